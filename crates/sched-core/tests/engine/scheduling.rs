//! Scheduling: fairness between continuing processes, one worker per
//! process at a time, introspection, where spawned processes run.

use super::*;

#[test]
fn a_process_that_always_continues_does_not_starve_a_later_one() {
    let engine = started(1);
    let stop = Arc::new(AtomicBool::new(false));
    let hog = process({
        let stop = stop.clone();
        move |_, out| {
            if stop.load(Ordering::SeqCst) {
                out.finish(());
            } else {
                out.continue_();
            }
            Ok(())
        }
    });
    let hog = submit(&engine, 1, hog);
    // Let the hog settle into its loop on the only worker.
    std::thread::sleep(Duration::from_millis(20));
    let later = submit(&engine, 2, Counter::new(3, SYNC));
    assert_eq!(done_u64(wait(later)), 3);
    stop.store(true, Ordering::SeqCst);
    wait(hog).unwrap();
}

#[test]
fn continuing_processes_take_turns_on_one_worker() {
    // Started only once all three are queued: a worker already running
    // could finish the first one's steps before the others are submitted,
    // and then nobody was waiting (it happened under ThreadSanitizer).
    let engine = builder(1).build();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..3u64)
        .map(|id| {
            let log = log.clone();
            let mut left = 5;
            submit(
                &engine,
                id,
                process(move |_, out| {
                    log.lock().unwrap().push(id);
                    left -= 1;
                    if left == 0 {
                        out.finish(());
                    } else {
                        out.continue_();
                    }
                    Ok(())
                }),
            )
        })
        .collect();
    engine.start();
    for h in handles {
        wait(h).unwrap();
    }
    let log = log.lock().unwrap();
    // No process runs its 5 steps back to back while the others wait.
    for window in log.windows(3) {
        assert!(
            !(window[0] == window[1] && window[1] == window[2]),
            "{log:?}"
        );
    }
}

#[test]
fn a_process_never_runs_on_two_workers_at_once() {
    let engine = started(2);
    let overlaps = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..200u64)
        .map(|id| {
            let in_step = Arc::new(AtomicBool::new(false));
            let overlaps = overlaps.clone();
            let mut left = 20;
            submit(
                &engine,
                id,
                process(move |events, out| {
                    if in_step.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    events.for_each(drop);
                    left -= 1;
                    if left == 0 {
                        out.finish(());
                    } else if left % 2 == 0 {
                        out.yield_command(ASYNC, Tag(left), Box::new(()));
                    } else {
                        out.yield_command(SYNC, Tag(left), Box::new(()));
                        out.continue_();
                    }
                    in_step.store(false, Ordering::SeqCst);
                    Ok(())
                }),
            )
        })
        .collect();
    for h in handles {
        wait(h).unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

#[test]
fn processes_lists_live_processes_with_their_state() {
    let engine = started(1);
    let _h = submit(&engine, 4, Inbox::new());
    wait_for_state(&engine, Pid::local(4), ProcessState::Idle);
    let list = engine.context().processes();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, Pid::local(4));
    assert_eq!(list[0].state.to_string(), "idle");
    assert_eq!(list[0].steps, 1);
}

/// A process spawned by a short step goes to its worker's `next` slot and
/// runs on the same core once the step ends, while another worker sits
/// idle (an idle worker only takes from the slot what has waited there far
/// longer than a step; see `fairness.rs` for the long step).
#[test]
fn a_process_spawned_by_a_short_step_runs_after_that_step_on_the_same_worker() {
    use std::sync::Mutex;
    use std::thread::ThreadId;

    let engine = started(2);
    // (thread, still inside the parent's step) for the child.
    let child_ran: Arc<Mutex<Option<(ThreadId, bool)>>> = Arc::default();
    let in_parent = Arc::new(AtomicBool::new(false));
    let parent_thread: Arc<Mutex<Option<ThreadId>>> = Arc::default();
    let (seen, flag, parent_seen) = (child_ran.clone(), in_parent.clone(), parent_thread.clone());
    let parent = process(move |_, out| {
        flag.store(true, Ordering::SeqCst);
        *parent_seen.lock().unwrap() = Some(std::thread::current().id());
        let (seen, in_step) = (seen.clone(), flag.clone());
        let child = process(move |_, out| {
            *seen.lock().unwrap() =
                Some((std::thread::current().id(), in_step.load(Ordering::SeqCst)));
            out.finish(());
            Ok(())
        });
        let pid = out.context().allocate_pid().expect("pids left");
        let child = out
            .spawn(Spawn::new(child).method("run").at(pid))
            .expect("spawned");
        flag.store(false, Ordering::SeqCst);
        out.finish(child);
        Ok(())
    });
    // An id the allocator will not hand out to the child.
    let outcome = wait(submit(&engine, 1 << 40, parent));
    let mut child = *outcome
        .expect("parent done")
        .downcast::<Completion>()
        .unwrap();
    child.wait_timeout(PATIENCE).expect("child done");
    let (thread, during_parent) = child_ran.lock().unwrap().expect("the child ran");
    assert!(
        !during_parent,
        "the child ran while its parent's step was running"
    );
    assert_eq!(
        Some(thread),
        *parent_thread.lock().unwrap(),
        "the child moved to another worker"
    );
    engine.shutdown(PATIENCE);
}
