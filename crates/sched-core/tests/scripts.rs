//! Property test: random process scripts (continue; yield to a sync,
//! async, rejecting or dropping handler; wait for messages sent from
//! outside; done; step error; panic) on 1 and 2 workers. Every process
//! ends exactly once (one outcome, one `close`) with the result its script
//! implies, sees each of its completions and messages exactly once, and is
//! never inside `step` on two workers at once.

mod script;

use std::sync::{mpsc, Arc};

use proptest::prelude::*;
use relay::Pid;
use sched_core::{ExitError, Spawn};
use script::*;

fn handler() -> impl Strategy<Value = Handler> {
    prop_oneof![
        Just(Handler::Sync),
        Just(Handler::Async),
        Just(Handler::Reject),
        Just(Handler::Drop),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Continue),
        4 => handler().prop_map(Op::Yield),
        2 => (1u8..=3).prop_map(Op::Idle),
        1 => Just(Op::Done),
        1 => Just(Op::Fail),
        1 => Just(Op::Panic),
    ]
}

fn scripts() -> impl Strategy<Value = Vec<Vec<Op>>> {
    prop::collection::vec(prop::collection::vec(op(), 0..8), 1..=20)
}

/// Runs `scripts` on an engine with `workers` workers and checks every
/// process.
fn run(workers: usize, scripts: &[Vec<Op>]) -> Result<(), String> {
    let (builder, pool) = builder(workers, 2);
    let engine = builder.build();
    engine.start();
    let (ask, asks) = mpsc::channel();
    let result = std::thread::scope(|s| {
        let sender = s.spawn(|| serve_messages(&engine, asks));
        let handles: Vec<_> = scripts
            .iter()
            .enumerate()
            .map(|(i, ops)| {
                let id = i as u64 + 1;
                let observed = Arc::new(Observed::default());
                let process = Scripted::new(id, ops, observed.clone(), ask.clone());
                let handle = engine
                    .context()
                    .spawn(Spawn::new(process).method("run").at(Pid::local(id)))
                    .map_err(|e| e.to_string())?;
                Ok((id, ops, handle, observed))
            })
            .collect::<Result<_, String>>()?;
        drop(ask);
        let mut failures = Vec::new();
        for (id, ops, mut handle, observed) in handles {
            let outcome = match handle.wait_timeout(PATIENCE) {
                Err(ExitError::TimedOut) => {
                    failures.push(format!("process {id} {ops:?} never ended"));
                    continue;
                }
                outcome => outcome,
            };
            if let Err(e) = check(id, ops, outcome, &observed, false) {
                failures.push(e);
            }
        }
        let (sent, refused) = sender.join().expect("the sender does not panic");
        let wanted: u64 = scripts.iter().map(|s| expected(s).1.messages).sum();
        if (sent, refused) != (wanted, 0) {
            failures.push(format!(
                "sent {sent} messages ({refused} refused), scripts want {wanted}"
            ));
        }
        let stats = engine.context().stats();
        if stats.live_processes != 0 || !engine.context().processes().is_empty() {
            failures.push(format!("{} processes still live", stats.live_processes));
        }
        if stats.totals().completed != scripts.len() as u64 {
            failures.push(format!(
                "{} processes completed, {} submitted",
                stats.totals().completed,
                scripts.len()
            ));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    });
    shut_down(engine, pool, result)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 40 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn scripts_run_as_written_on_one_and_two_workers(scripts in scripts()) {
        quiet_script_panics();
        for workers in [1, 2] {
            if let Err(e) = run(workers, &scripts) {
                return Err(TestCaseError::fail(format!("{workers} worker(s):\n{e}")));
            }
        }
    }
}

#[test]
fn every_kind_of_step_in_one_script() {
    quiet_script_panics();
    use Handler::*;
    let all = vec![
        Op::Continue,
        Op::Yield(Sync),
        Op::Yield(Async),
        Op::Yield(Reject),
        Op::Yield(Drop),
        Op::Idle(3),
        Op::Continue,
    ];
    let scripts = vec![
        [all.clone(), vec![Op::Done]].concat(),
        [all.clone(), vec![Op::Fail]].concat(),
        [all.clone(), vec![Op::Panic]].concat(),
        all,
    ];
    for workers in [1, 2] {
        run(workers, &scripts).unwrap();
    }
}
