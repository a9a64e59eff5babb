//! Messages: delivery by PID, unknown and finished targets, full
//! mailboxes, dead letters, the workers' route caches.

use super::*;

#[test]
fn messages_reach_a_process_by_pid_and_finished_pids_are_unknown() {
    let engine = started(2);
    let h = submit(&engine, 7, Inbox::new());
    for i in 0..3 {
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(7), i as u64))
            .unwrap();
    }
    engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(7), "stop"))
        .unwrap();
    assert_eq!(done_u64(wait(h)), 3);
    let err = engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(7), 1u8))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert_eq!(err.target(), Pid::local(7));
    assert_eq!(
        err.into_package().downcast::<u8>().ok(),
        Some(1),
        "the message comes back"
    );
}

#[test]
fn sending_to_an_unknown_pid_fails_naming_it() {
    let engine = started(1);
    let err = engine
        .context()
        .forward(Package::new(Pid::local(1), Pid::local(404), ()))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::UnknownTarget);
    assert!(err.to_string().contains("<0.404>"), "{err}");
}

#[test]
fn a_message_sent_right_after_submit_is_never_lost() {
    let engine = started(2);
    for i in 0..100 {
        let h = submit(&engine, i, Inbox::new());
        let sender = {
            let pid = Pid::local(i);
            let engine = &engine;
            move || {
                engine
                    .context()
                    .forward(Package::new(Pid::local(0), pid, "stop"))
                    .unwrap()
            }
        };
        std::thread::scope(|s| {
            s.spawn(sender);
        });
        assert_eq!(done_u64(wait(h)), 0);
    }
}

#[test]
fn dead_letters_are_counted() {
    let engine = started(1);
    let p = process(|events, out| {
        events.for_each(drop);
        out.yield_command(NEVER, Tag(1), Box::new(()));
        Ok(())
    });
    let h = submit(&engine, 1, p);
    wait_for_state(&engine, Pid::local(1), ProcessState::Blocked);
    engine.context().terminate(Pid::local(1)).unwrap();
    // Whatever was sent after the terminate and before the end is a dead
    // letter, never silently lost: it is either refused or counted.
    let mut refused = 0;
    let mut accepted = 0;
    for _ in 0..10 {
        match engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(1), ()))
        {
            Ok(()) => accepted += 1,
            Err(_) => refused += 1,
        }
    }
    wait(h).unwrap_err();
    assert_eq!(accepted + refused, 10);
    assert_eq!(engine.context().stats().dead_letters, accepted);
}

#[test]
fn a_full_mailbox_refuses_and_hands_the_message_back() {
    let engine = builder(1).mailbox_capacity(2).build();
    // Not started: nothing drains the mailbox.
    let _h = submit(&engine, 1, Inbox::new());
    for i in 0..2u32 {
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(1), i))
            .unwrap();
    }
    let err = engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(1), 2u32))
        .unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Full);
    assert_eq!(err.into_package().downcast::<u32>().ok(), Some(2));
    engine.start();
    // Once drained, there is room again.
    let deadline = Instant::now() + PATIENCE;
    while engine
        .context()
        .forward(Package::new(Pid::local(0), Pid::local(1), 3u32))
        .is_err()
    {
        assert!(Instant::now() < deadline, "the mailbox never drained");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn dead_letters_reach_the_hook() {
    let letters = Arc::new(std::sync::Mutex::new(Vec::new()));
    let engine = builder(1)
        .on_dead_letter({
            let letters = letters.clone();
            move |_cx, pid, event| {
                if let Event::Message(p) = event {
                    letters
                        .lock()
                        .unwrap()
                        .push((pid, p.downcast::<u32>().unwrap()));
                }
            }
        })
        .build();
    // Queue messages before start, then terminate: they are never stepped.
    let h = submit(&engine, 1, Inbox::new());
    for i in 0..3u32 {
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(1), i))
            .unwrap();
    }
    engine.context().terminate(Pid::local(1)).unwrap();
    engine.start();
    assert!(matches!(wait(h), Err(ExitError::Terminated)));
    assert_eq!(
        *letters.lock().unwrap(),
        [(Pid::local(1), 0), (Pid::local(1), 1), (Pid::local(1), 2)]
    );
    assert_eq!(engine.context().stats().dead_letters, 3);
}

/// A step's sends go through its worker's cache of recently resolved
/// records; a PID whose process ended and was then taken by a new process
/// must still reach the new one, and a send to an ended PID must still say
/// the target is unknown.
#[test]
fn a_pid_taken_anew_gets_messages_sent_through_a_worker_s_route_cache() {
    use std::sync::mpsc;

    const TARGET: u64 = 50;
    let engine = started(1);
    // Forwards every `u32` it receives to TARGET and reports how the send
    // went.
    let (results_tx, results) = mpsc::channel::<Result<(), SendErrorKind>>();
    let forwarder = process(move |events, out| {
        for event in events {
            match event {
                Event::Message(package) => {
                    let n = *package.into_payload().downcast::<u32>().unwrap();
                    let sent = out.send(Pid::local(TARGET), n);
                    results_tx.send(sent.map_err(|e| e.kind())).unwrap();
                }
                Event::Cancel => {
                    out.finish(());
                    return Ok(());
                }
                _ => {}
            }
        }
        out.idle();
        Ok(())
    });
    let _forwarder = submit(&engine, 1, forwarder);
    // A target that ends with the first number it receives.
    let target = || {
        process(|events, out| {
            for event in events {
                if let Event::Message(package) = event {
                    let n = *package.into_payload().downcast::<u32>().unwrap();
                    out.finish(u64::from(n));
                    return Ok(());
                }
            }
            out.idle();
            Ok(())
        })
    };
    let forward = |n: u32| {
        engine
            .context()
            .forward(Package::new(Pid::local(0), Pid::local(1), n))
            .unwrap();
        results
            .recv_timeout(PATIENCE)
            .expect("the forwarder reported")
    };

    let first = submit(&engine, TARGET, target());
    assert_eq!(forward(1), Ok(()));
    assert_eq!(done_u64(wait(first)), 1);
    // The first target has ended (and its PID is free once its outcome is
    // in): the cached route must not swallow the message.
    assert_eq!(forward(2), Err(SendErrorKind::UnknownTarget));
    let second = submit(&engine, TARGET, target());
    assert_eq!(forward(3), Ok(()));
    assert_eq!(done_u64(wait(second)), 3, "the new process got the message");
    engine.shutdown(PATIENCE);
}
