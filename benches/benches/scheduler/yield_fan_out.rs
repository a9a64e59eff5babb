//! yield fan-out: processes whose yields another thread completes, against
//! tokio tasks awaiting oneshots completed the same way.

use super::*;

pub(crate) fn yield_fan_out(c: &mut Criterion) {
    let mut group = c.benchmark_group("yield-fan-out");

    let (to_completer, completions) = mpsc::channel::<Completer>();
    let completer = thread::spawn(move || {
        for c in completions {
            c.complete(Box::new(())).expect("the process waits");
        }
    });
    let engine = engine_with(
        REMOTE,
        move |_: Command, c: Completer| -> Result<(), Rejected> {
            to_completer.send(c).expect("completer thread alive");
            Ok(())
        },
    );
    group.bench_function("ours", |b| {
        b.iter(|| {
            let latch = Latch::new(FAN_OUT_TASKS);
            for _ in 0..FAN_OUT_TASKS {
                submit(&engine, pid(&engine), FanOut::new(latch.clone()));
            }
            latch.wait();
        })
    });
    shut(engine);
    completer.join().expect("completer thread");

    let rt = runtime();
    let (to_completer, completions) = mpsc::channel::<tokio::sync::oneshot::Sender<()>>();
    let completer = thread::spawn(move || {
        for c in completions {
            c.send(()).expect("the task waits");
        }
    });
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let latch = Latch::new(FAN_OUT_TASKS);
            for _ in 0..FAN_OUT_TASKS {
                let latch = latch.clone();
                let to_completer = to_completer.clone();
                rt.spawn(async move {
                    for _ in 0..FAN_OUT_YIELDS {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        to_completer.send(tx).expect("completer thread alive");
                        rx.await.expect("completed");
                    }
                    latch.count_down();
                });
            }
            latch.wait();
        })
    });
    drop(to_completer);
    drop(rt);
    completer.join().expect("completer thread");
    group.finish();
}
