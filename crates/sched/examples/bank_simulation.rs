//! Deterministic simulation: finding, shrinking and replaying a bug that
//! shows under one ordering only.
//!
//! Two accounts and a few transfers between them. A transfer asks the
//! source account to withdraw, and waits 20 ms for its answer; with no
//! answer by then it asks again (the request may have been lost). Then it
//! deposits into the target account. The invariant: money is neither made
//! nor lost.
//!
//! The bug: a withdrawal that was only *late*, not lost, is applied twice
//! (the original and the retry). It takes a message held back longer than
//! the timeout, which a test on a running engine almost never sees. The
//! simulation injects such delays from a seed, finds a failing seed,
//! shrinks its run to the one delay that matters, and replays it exactly.
//! With `--fixed` the account remembers the transfers it has applied, and
//! no seed fails.
//!
//! With `--asks` the same bank is built on asks: a transfer asks the
//! account (`Output::ask`, with the 20 ms timeout) and asks again when the
//! ask times out. The simulation holds back requests as it holds back
//! messages, so the same bug ("timed out, but the request was still
//! applied") is found and shrunk there too.
//!
//! Run it with `cargo run -p sched --example bank_simulation` (or
//! `-- --fixed`, `-- --asks`, both).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::actor::AskError;
use sched::prelude::*;
use sched::sim::{explore, shrink, Config, Faults, Source, Trace, Verdict};

/// How long a transfer waits for the withdrawal's answer before it asks
/// again.
const TIMEOUT: Duration = Duration::from_millis(20);
const OPENING_BALANCE: i64 = 1_000;
const TRANSFERS: u64 = 5;

/// Transfer `id` asks its source account to withdraw `amount`.
struct Withdraw {
    id: u64,
    amount: i64,
}

/// The account's answer: withdrawal `id` is done.
struct Withdrawn {
    #[allow(dead_code)] // Read by no one: a transfer has one withdrawal.
    id: u64,
}

/// Asked, a withdrawal is answered with its `Withdrawn`.
impl Question for Withdraw {
    type Answer = Withdrawn;
}

/// Credit `amount` to the account.
struct Deposit {
    amount: i64,
}

/// An account: applies withdrawals and deposits to its balance, which it
/// publishes to `ledger` for the test to check.
struct Account {
    index: usize,
    ledger: Arc<Mutex<[i64; 2]>>,
    /// With the fix: the transfers already applied, so a retry of one is
    /// answered without withdrawing again.
    applied: Option<HashSet<u64>>,
}

impl Account {
    /// Applies withdrawal `id`, unless the fix remembers it was applied.
    fn withdraw(&mut self, id: u64, amount: i64) {
        let first_time = match &mut self.applied {
            Some(applied) => applied.insert(id),
            None => true,
        };
        if first_time {
            self.ledger.lock().unwrap()[self.index] -= amount;
        }
    }
}

impl Process for Account {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let message = match event {
                Event::Message(message) => message,
                // A transfer that asks (`--asks`): the answer is the reply.
                Event::Request(request) => {
                    if let Some(&Withdraw { id, amount }) = request.payload::<Withdraw>() {
                        self.withdraw(id, amount);
                        request.reply(Withdrawn { id });
                    }
                    continue;
                }
                _ => continue,
            };
            if let Some(&Withdraw { id, amount }) = message.payload::<Withdraw>() {
                self.withdraw(id, amount);
                // Not `?`: the transfer may have ended already (an earlier
                // answer reached it), and that is no reason for the
                // account to fail. (The simulation found this one: with
                // `?`, the fixed version lost money too.)
                let _ = out.send(message.source(), Withdrawn { id });
            } else if let Some(deposit) = message.payload::<Deposit>() {
                self.ledger.lock().unwrap()[self.index] += deposit.amount;
            }
        }
        Ok(())
    }
}

/// A transfer: withdraw (asking again after each timeout), then deposit.
struct Transfer {
    id: u64,
    amount: i64,
    from: Pid,
    to: Pid,
    timer: Option<TimerId>,
}

impl Transfer {
    fn ask_withdrawal(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let request = Withdraw {
            id: self.id,
            amount: self.amount,
        };
        out.send(self.from, request)?;
        self.timer = Some(out.set_timer(TIMEOUT, Tag(self.id)));
        Ok(())
    }
}

impl Process for Transfer {
    type Done = ();
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.ask_withdrawal(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                // No answer in time: ask again.
                Event::Timer { .. } => self.ask_withdrawal(out)?,
                Event::Message(message) if message.is::<Withdrawn>() => {
                    if let Some(timer) = self.timer.take() {
                        out.cancel_timer(timer);
                    }
                    let deposit = Deposit {
                        amount: self.amount,
                    };
                    out.send(self.to, deposit)?;
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A transfer built on asks: asks the source account to withdraw (with
/// the timeout), asks again each time the ask fails, then deposits.
struct AskingTransfer {
    id: u64,
    amount: i64,
    from: Pid,
    to: Pid,
}

impl AskingTransfer {
    fn ask_withdrawal(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        let request = Withdraw {
            id: self.id,
            amount: self.amount,
        };
        out.ask(self.from, request, TIMEOUT)?;
        Ok(())
    }
}

impl Process for AskingTransfer {
    type Done = ();
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.ask_withdrawal(out)
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Reply { result: Ok(_), .. } => {
                    let deposit = Deposit {
                        amount: self.amount,
                    };
                    out.send(self.to, deposit)?;
                    out.finish(());
                    return Ok(());
                }
                // No answer in time (or none at all): ask again.
                Event::Reply {
                    result: Err(AskError::TimedOut | AskError::NoReply),
                    ..
                } => self.ask_withdrawal(out)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// How transfers reach the account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bank {
    /// A message, and a timer for the answer.
    Messages,
    /// An ask with a timeout.
    Asks,
}

/// One simulated run: two accounts, a few transfers, messages held back
/// now and then; fails if money was made or lost.
#[allow(dead_code)] // The tests use it; `main` goes through `simulate`.
pub(crate) fn scenario(source: Source, fixed: bool) -> Verdict {
    simulate(source, fixed, Bank::Messages).0
}

/// [`scenario`] of the bank whose transfers ask.
#[allow(dead_code)] // The tests use it; `main` goes through `simulate`.
pub(crate) fn asking_scenario(source: Source, fixed: bool) -> Verdict {
    simulate(source, fixed, Bank::Asks).0
}

/// [`scenario`], with the run's trace.
pub(crate) fn simulate(source: Source, fixed: bool, bank: Bank) -> (Verdict, Trace) {
    let faults = Faults::none().delay_messages(0.05, Duration::from_millis(50));
    let mut sim = Scheduler::builder().simulation(Config::new(source).workers(2).faults(faults));
    let ledger = Arc::new(Mutex::new([OPENING_BALANCE; 2]));
    let account = |index| Account {
        index,
        ledger: Arc::clone(&ledger),
        applied: fixed.then(HashSet::new),
    };
    let a = sim.context().spawn(account(0)).expect("spawned").pid();
    let b = sim.context().spawn(account(1)).expect("spawned").pid();
    for id in 0..TRANSFERS {
        let (from, to) = if id % 2 == 0 { (a, b) } else { (b, a) };
        let amount = 10 * (id as i64 + 1);
        match bank {
            Bank::Messages => sim.context().spawn(Transfer {
                id,
                amount,
                from,
                to,
                timer: None,
            }),
            Bank::Asks => sim.context().spawn(AskingTransfer {
                id,
                amount,
                from,
                to,
            }),
        }
        .expect("spawned");
    }
    let result = match sim.run() {
        Err(error) => Err(error.to_string()),
        Ok(()) => {
            let [x, y] = *ledger.lock().unwrap();
            if x + y == 2 * OPENING_BALANCE {
                Ok(())
            } else {
                Err(format!(
                    "money changed: {x} + {y} = {} instead of {}",
                    x + y,
                    2 * OPENING_BALANCE
                ))
            }
        }
    };
    (sim.verdict(result), sim.trace())
}

#[allow(dead_code)] // Also compiled into the tests, which do not call it.
fn main() {
    let fixed = std::env::args().any(|arg| arg == "--fixed");
    let bank = match std::env::args().any(|arg| arg == "--asks") {
        true => Bank::Asks,
        false => Bank::Messages,
    };
    let scenario = |source| simulate(source, fixed, bank).0;
    let Some(failure) = explore(0..1_000, scenario) else {
        println!("no failure in 1000 seeds");
        return;
    };
    println!("found after {} seeds: {failure}", failure.runs);
    let shrunk = shrink(&failure, scenario);
    println!("shrunk in {} runs: {shrunk}", shrunk.runs);
    let (replay, trace) = simulate(shrunk.source.clone(), fixed, bank);
    assert_eq!(
        replay.hash, shrunk.verdict.hash,
        "the replay ran differently"
    );
    println!("replayed: {}", replay.failure.unwrap_or_default());
    println!("{trace}");
}
