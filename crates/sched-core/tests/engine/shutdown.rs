//! Shutdown: graceful cancel, the forced end at the deadline, in-flight
//! completions.

use super::*;

#[test]
fn shutdown_cancels_live_processes_gracefully() {
    let engine = started(2);
    let closes = CloseCounter::default();
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let mut p = Inbox::new();
            p.closes = closes.clone();
            submit(&engine, i, p)
        })
        .collect();
    let report = engine.shutdown(Duration::from_secs(2));
    assert_eq!(report.ended_gracefully, 10);
    assert_eq!(report.forced, 0);
    assert!(
        report.elapsed < Duration::from_secs(1),
        "returns when all ended: {report:?}"
    );
    for h in handles {
        let v = wait(h).unwrap();
        assert_eq!(v.downcast_ref::<&str>(), Some(&"cancelled"));
    }
    assert_eq!(closes.get(), 10);
}

#[test]
fn shutdown_forces_processes_that_ignore_cancel_at_the_deadline() {
    let engine = started(2);
    let mut stubborn = Inbox::new();
    stubborn.ignore_cancel = true;
    let closes = stubborn.closes.clone();
    let h = submit(&engine, 1, stubborn);
    let blocked = submit(&engine, 2, Counter::new(1, NEVER));
    let report = engine.shutdown(Duration::from_millis(200));
    // Both are forced. On a machine whose cores are busy elsewhere the
    // report may be made (at the deadline plus its grace) before the
    // workers have ended them: then they are counted as still queued,
    // and the workers as detached, and they get their outcome after.
    assert_eq!(
        report.forced as usize + report.still_queued,
        2,
        "{report:?}"
    );
    assert_eq!(report.still_running, 0, "{report:?}");
    assert!(
        report.elapsed < Duration::from_millis(200) + Duration::from_millis(400),
        "{report:?}"
    );
    assert!(matches!(wait(h), Err(ExitError::Cancelled)));
    assert!(matches!(wait(blocked), Err(ExitError::Cancelled)));
    assert_eq!(closes.get(), 1);
}

#[test]
fn shutdown_waits_for_in_flight_completions_that_arrive_in_time() {
    let engine = started(2);
    let p = process({
        let mut asked = false;
        move |events, out| {
            if !asked {
                asked = true;
                out.yield_command(ASYNC, Tag(1), Box::new(Duration::from_millis(100)));
                return Ok(());
            }
            for e in events {
                if e.tag() == Some(Tag(1)) {
                    out.finish(7u64);
                }
            }
            Ok(())
        }
    });
    let h = submit(&engine, 1, p);
    let report = engine.shutdown(Duration::from_secs(5));
    assert_eq!(report.ended_gracefully, 1);
    assert_eq!(done_u64(wait(h)), 7);
}
