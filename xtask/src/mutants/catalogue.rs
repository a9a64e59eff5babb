//! The mutations `cargo xtask mutants` applies, and the commands that must
//! catch them.

use super::{Catcher, Mutation};

/// The loom models of sched-core's library whose path starts with the
/// given filter, as `cargo xtask loom sched-core` builds them.
macro_rules! sched_core_loom_lib {
    ($filter:literal) => {
        Catcher {
            args: &["test", "-p", "sched-core", "--release", "--lib", $filter],
            env: &[("RUSTFLAGS", "--cfg loom"), ("LOOM_MAX_PREEMPTIONS", "2")],
            target_subdir: Some("loom"),
        }
    };
}

/// One test of the facade's promises (`crates/sched/tests/promises.rs`).
macro_rules! promise {
    ($test:literal) => {
        Catcher {
            args: &["test", "-p", "sched", "--test", "promises", "--", $test],
            env: &[],
            target_subdir: None,
        }
    };
}

/// The loom models of the deque, as `cargo xtask loom sched-deque` runs them.
const DEQUE_LOOM: Catcher = Catcher {
    args: &["test", "-p", "sched-deque", "--release", "--test", "loom"],
    env: &[
        ("RUSTFLAGS", "--cfg loom --cfg crossbeam_loom"),
        ("LOOM_MAX_PREEMPTIONS", "2"),
    ],
    target_subdir: Some("loom"),
};

/// The deque's tests with items whose `Drop` panics.
/// The durable processes' channel tests: sends between durable processes
/// taken once, in order, on every path.
const DURABLE_CHANNEL: Catcher = Catcher {
    args: &["test", "-p", "sched-durable", "--test", "channel"],
    env: &[],
    target_subdir: None,
};

/// The embedded store's damage tests: kills during creation, empty,
/// foreign and damaged files.
/// The durable crate's unit tests of its send channel.
const DURABLE_CHANNEL_UNIT: Catcher = Catcher {
    args: &["test", "-p", "sched-durable", "--lib", "channel::"],
    env: &[],
    target_subdir: None,
};

const DURABLE_STORE_DAMAGE: Catcher = Catcher {
    args: &["test", "-p", "sched-durable", "--test", "store_damage"],
    env: &[],
    target_subdir: None,
};

/// The NATS transport's frames queued for a run of a node that restarted
/// (needs `nats-server`).
const SCHED_TIMER_RESCUE: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched",
        "--test",
        "timers",
        "--",
        "a_step_that_blocks_does_not_hold_back_the_timers_of_its_worker",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_HAND_OFF: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed",
        "--",
        "a_shard_stays_until_its_processes_have_ended_and_they_read_what_was_sent_before",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_CLOSE: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed_docs",
        "--",
        "a_node_whose_transport_closes_keeps_no_key_beside_the_next_holder",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_ASK_PASSED_ON: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed_ask",
        "--",
        "a_question_that_reaches_the_old_holder_after_it_let_go_is_passed_on_and_answered",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_ASK_ACROSS: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed_ask",
        "--",
        "a_question_to_a_key_is_answered_by_its_one_process_wherever_its_shard_is",
    ],
    env: &[],
    target_subdir: None,
};

const SCHED_FORWARD: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "forward"],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_DURABLE_MOVE: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed_durable",
        "--",
        "a_durable_keyed_process_keeps_its_state_when_its_shard_moves_to_a_joining_node",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_FENCE: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed",
        "--",
        "a_node_cut_off_past_its_lease_never_steps_a_key_beside_its_new_holder",
    ],
    env: &[],
    target_subdir: None,
};

/// A node that leaves while another floods it accounts for every frame
/// published to it.
const NATS_LEAVING: Catcher = Catcher {
    args: &["test", "-p", "relay-nats", "--test", "leaving"],
    env: &[],
    target_subdir: None,
};

/// A node that closes just after its only sender left reads what that
/// sender published first.
const NATS_LEAVING_AFTER_SENDER: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "docs_leaving",
        "--",
        "a_node_leaving_as_soon_as_its_only_sender_left",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_ENTITY_HAND_BACK: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed_entity",
        "--",
        "what_reaches_a_stopped_process_after_its_last_step_goes_to_its_next_one",
    ],
    env: &[],
    target_subdir: None,
};

/// The numbers of frames lost before the first one seen (a unit test;
/// `docs_leaving.rs`'s two floods into 512-frame subscriptions catch it
/// too, in about one run in three).
const NATS_FIRST_NUMBERS: Catcher = Catcher {
    args: &["test", "-p", "relay-nats", "--lib", "sequence::tests"],
    env: &[],
    target_subdir: None,
};

/// The count of what a run that died before its detection never
/// confirmed (a new run of the node attached first).
const NATS_RESTART_UNCONFIRMED: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "docs_first_numbers_and_late_leases",
        "--",
        "a_node_that_dies_and_is_replaced_before_detection_leaves_no_frame_uncounted",
    ],
    env: &[],
    target_subdir: None,
};

/// A keyed process's wait under a lease that ran out (a unit test).
const NATS_KEYED_LEASE_LATE: Catcher = Catcher {
    args: &["test", "-p", "relay-nats", "--lib", "keyed::host::tests"],
    env: &[],
    target_subdir: None,
};

const NATS_KEYED_LAPSED: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "keyed",
        "--",
        "a_message_that_reached_a_lapsed_holder_is_fenced_not_read_after_a_later_one",
    ],
    env: &[],
    target_subdir: None,
};

const NATS_RESTARTED_RUN: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "failures",
        "--",
        "frames_queued_for_a_run_that_restarted_do_not_reach_the_new_run",
    ],
    env: &[],
    target_subdir: None,
};

/// The NATS transport's order of fencing and telling the engine of a
/// loss (a unit test: no server, no timing).
const NATS_RESET_ORDER: Catcher = Catcher {
    args: &["test", "-p", "relay-nats", "--lib", "reset::tests"],
    env: &[],
    target_subdir: None,
};

/// The NATS transport's count of a backlog for a node that dies (needs
/// `nats-server`).
const NATS_BACKLOG_ACCOUNTING: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "relay-nats",
        "--test",
        "failures",
        "--",
        "a_backlog_for_a_node_that_dies_is_counted_exactly",
    ],
    env: &[],
    target_subdir: None,
};

/// The durable test of a process ending while a recovery reads the store.
const DURABLE_RECOVERY_CLAIM: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-durable",
        "--test",
        "durable",
        "--",
        "a_process_that_ends_while_a_recovery_reads_the_store_is_not_resumed",
    ],
    env: &[],
    target_subdir: None,
};

/// The durable processes in the simulation, against the model, over the
/// default seeds.
const DURABLE_SIMULATION: Catcher = Catcher {
    args: &["test", "-p", "sched-durable", "--test", "simulation"],
    env: &[],
    target_subdir: None,
};

/// The JetStream store's live cross-node sends.
const DURABLE_JETSTREAM_LIVE: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-durable-jetstream",
        "--test",
        "journal",
        "live::",
    ],
    env: &[],
    target_subdir: None,
};

/// The restart feed's tests.
const SCHED_RESTART_FEED: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "restart_feed"],
    env: &[],
    target_subdir: None,
};

/// The typed API's promises, tested from the docs only.
const SCHED_DOCS_TYPED: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "docs_typed_end_to_end"],
    env: &[],
    target_subdir: None,
};

const DEQUE_PANICKING_DROP: Catcher = Catcher {
    args: &["test", "-p", "sched-deque", "--test", "panicking_drop"],
    env: &[],
    target_subdir: None,
};

/// The sched-core loom model in which the other worker steals a
/// continued process (with the record's owner check).
const SCHED_CORE_STEAL_MODEL: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-core",
        "--release",
        "--test",
        "loom",
        "a_continued_process_stolen_by_the_other_worker",
    ],
    // The model sets its own preemption bound (one).
    env: &[("RUSTFLAGS", "--cfg loom")],
    target_subdir: Some("loom"),
};

/// The loom models of the admission word (live count and stopping flag).
const SCHED_CORE_ADMISSION_MODEL: Catcher = sched_core_loom_lib!("engine::live");

/// sched-core's fairness tests (every wake path, one and two workers).
/// The simulation's check of the scheduling bound, over 200 seeds (the
/// test's default is 1 000; a broken order fails at the first seeds).
const SCHED_FAIRNESS_BOUND: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "fairness"],
    env: &[("FAIRNESS_SEEDS", "200")],
    target_subdir: None,
};

/// Light processes first: a light probe stepped ahead of a heavy
/// backlog, a heavy one behind it, no heavy process starved.
const SCHED_LIGHT_FIRST: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "light_first"],
    env: &[],
    target_subdir: None,
};

/// A stand-in whose durable process the store's fence refused passes
/// the refused messages to the next process (a fencing store of two
/// nodes).
const DURABLE_STAND_IN_FENCED: Catcher = Catcher {
    args: &["test", "-p", "sched-durable", "--test", "stand_in_fenced"],
    env: &[],
    target_subdir: None,
};

/// A stand-in ended abnormally with writes in flight: each message it
/// held is counted dropped.
const DURABLE_STAND_IN_ABNORMAL_END: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-durable",
        "--test",
        "stand_in_abnormal_end",
    ],
    env: &[],
    target_subdir: None,
};

/// A stand-in ended with writes held at the store; the key's next
/// process resumes only once they landed, and the journal reads whole.
const DURABLE_DOCS_STAND_IN_ABNORMAL_END: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-durable",
        "--test",
        "docs_stand_in_abnormal_end",
    ],
    env: &[],
    target_subdir: None,
};

/// Stand-ins in the simulation against a model: every message in the
/// key's journals once, in order, through cancels, finishes, fences and
/// delays, over 300 seeds.
const DURABLE_STAND_IN_SIM: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-durable",
        "--test",
        "stand_in_simulation",
    ],
    env: &[],
    target_subdir: None,
};

/// Across simulated nodes, a cancel comes behind what its node sent
/// before it, and outside code's messages and asks keep their order.
const SCHED_SIM_NETWORK_ORDER: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched",
        "--test",
        "docs_sim_cancel",
        "--",
        "across_simulated_nodes",
    ],
    env: &[],
    target_subdir: None,
};

/// A simulation's cancel comes no earlier than the delayed messages sent
/// before it.
const SCHED_SIM_CANCEL: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched",
        "--test",
        "simulation",
        "--",
        "a_cancel_comes_no_earlier_than_the_delayed_messages_sent_before_it",
    ],
    env: &[],
    target_subdir: None,
};

/// The light queues' unit tests: three light picks in four, heavy and
/// unmeasured wakes in the level's queue, two strikes make heavy.
const SCHED_CORE_LIGHT_QUEUES: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "runqueue::local"],
    env: &[],
    target_subdir: None,
};

/// The unit tests of the measuring spells (`worker/light.rs`).
const SCHED_CORE_SPELLS: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "worker::light"],
    env: &[],
    target_subdir: None,
};

/// The groups' tests: shares by weight, a flood held to its share, and
/// the bound with groups (in the simulation).
const SCHED_GROUPS: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "groups"],
    env: &[],
    target_subdir: None,
};

/// When an idle worker lingers.
const SCHED_IDLE_LINGER: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "idle_linger"],
    env: &[],
    target_subdir: None,
};

/// The system lane's tests.
const SCHED_SYSTEM_LANE: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "system_lane"],
    env: &[],
    target_subdir: None,
};

/// The timers' registry's unit tests (a parked worker's grain).
const SCHED_CORE_TIMER_REGISTRY: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "timer::registry"],
    env: &[],
    target_subdir: None,
};

/// The simulation's own test file (virtual time: exact instants).
const SCHED_SIMULATION: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "simulation"],
    env: &[],
    target_subdir: None,
};

/// The tests of sends through a resolved process.
const SCHED_RESOLVED: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "resolved"],
    env: &[],
    target_subdir: None,
};

/// The tests of a terminate that does not wait for the process's turn.
const SCHED_TERMINATE_QUEUED: Catcher = Catcher {
    args: &["test", "-p", "sched", "--test", "terminate_queued"],
    env: &[],
    target_subdir: None,
};

const SCHED_CORE_FAIRNESS: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--test", "fairness"],
    env: &[],
    target_subdir: None,
};

/// sched-core's shutdown races (submissions racing shutdown).
const SCHED_CORE_SHUTDOWN_RACES: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-core",
        "--test",
        "shutdown_races",
        "every_process_admitted_during_shutdown_receives_the_cancel",
    ],
    env: &[],
    target_subdir: None,
};

/// The loom models of the link protocol (which side sends an exit signal).
const SCHED_CORE_LINK_MODELS: Catcher = sched_core_loom_lib!("loom_models::links");

/// sched-core's tests of hostile user code and unread events.
const SCHED_CORE_HOSTILE: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--test", "hostile_user_code"],
    env: &[],
    target_subdir: None,
};

/// The timing wheel's unit tests.
const SCHED_CORE_WHEEL: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "timer::wheel"],
    env: &[],
    target_subdir: None,
};

/// A cancelled timer's event later in the same batch is never handed out.
const PROMISE_CANCELLED_MID_BATCH: Catcher =
    promise!("a_timer_cancelled_while_its_event_is_in_the_batch_is_never_seen");

/// No exit signal after `unlink` returns, in the gap of the peer's end.
const PROMISE_UNLINK_GAP: Catcher = promise!("unlink_in_the_gap_of_the_peers_end_stops_its_signal");

/// Delayed messages to an ended process are dead letters at its end.
const PROMISE_DELAYED_TO_ENDED: Catcher =
    promise!("delayed_messages_to_an_ended_process_go_at_its_end");

/// The loom models of the process table (lookups racing unregistration and reuse).
const SCHED_CORE_TABLE_MODELS: Catcher = sched_core_loom_lib!("table::loom");

/// The loom models of the outcome slot (the end racing the handle and its wakers).
const SCHED_CORE_SLOT_MODELS: Catcher = sched_core_loom_lib!("record::slot_loom");

/// The loom models of parking (work and timers racing a worker that parks).
const SCHED_CORE_PARKING_MODELS: Catcher = sched_core_loom_lib!("loom_models::parking");

/// The mailbox word's unit tests (message count and cancel latch).
const SCHED_CORE_MAILBOX: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "record::mailbox"],
    env: &[],
    target_subdir: None,
};

/// The parked watcher, directly: a worker that parks beside a busy one
/// returns on its own after its recheck (loom switches the watcher off).
/// The whole-engine test (`fairness`'s
/// `a_process_woken_by_a_long_step_is_taken_by_an_idle_worker`) let the
/// mutation through on a loaded machine: the worker woken for the `next`
/// slot searched long enough to take it without watching.
const SCHED_CORE_WATCHER: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-core",
        "--lib",
        "runqueue::sleep::tests::a_worker_parking_beside_a_busy_one",
    ],
    env: &[],
    target_subdir: None,
};

/// The timed park racing wakeups on real threads (what loom cannot reach).
const SCHED_CORE_TIMED_PARK: Catcher = Catcher {
    args: &["test", "-p", "sched-core", "--lib", "runqueue::sleep"],
    env: &[],
    target_subdir: None,
};

/// The mpsc loom model of a consumer at an install position whose next
/// block is not linked yet, in a debug build: the consumer that moves on
/// anyway follows a null link, which `Block::slot`'s debug assertion
/// reports as a failed model (in a release build, as the loom step of CI
/// runs it, the same bug is a SIGSEGV; Rust's own null check in a debug
/// build aborts without unwinding, which is why the assertion is there).
const MPSC_INSTALL_WAIT_MODEL: Catcher = Catcher {
    args: &[
        "test",
        "-p",
        "sched-mpsc",
        "--test",
        "loom",
        "--",
        "--exact",
        "the_consumer_waits_at_the_install_position_until_the_next_block_is_linked",
    ],
    env: &[
        ("RUSTFLAGS", "--cfg loom --cfg crossbeam_loom"),
        ("LOOM_MAX_PREEMPTIONS", "2"),
    ],
    target_subdir: Some("loom"),
};

/// The loom model of a lingering worker's look (the linger's fence).
const SCHED_CORE_LINGERING_LOOK_MODEL: Catcher = sched_core_loom_lib!(
    "loom_models::parking::a_lingering_look_sees_work_whose_producer_counted_it"
);

/// The loom model of two threads setting timers in one wheel.
const SCHED_CORE_TIMER_NEXT_MODEL: Catcher = sched_core_loom_lib!("loom_models::timers");

/// The table. Keep the original text short but unique in its file.
pub(crate) const MUTATIONS: &[Mutation] = &[
    Mutation {
        // A restart under a new PID goes untold: the feed hears only of
        // restarts in place.
        name: "restart-feed-misses-new-pid-restarts",
        file: "crates/sched/src/supervisor.rs",
        original: "                        feed.push(notice);\n",
        replacement: "                        drop(notice);\n",
        catcher: &SCHED_RESTART_FEED,
    },
    Mutation {
        // A restart under a new PID reports the outcome's wrapper
        // ("the step failed: x") instead of what the child said.
        name: "new-pid-restart-says-the-wrapper",
        file: "crates/sched/src/supervisor/child.rs",
        original: "        Err(ExitError::Step(error)) => Some(error.to_string()),\n",
        replacement: "        Err(ExitError::Step(error)) => Some(ExitError::Step(error).to_string()),\n",
        catcher: &SCHED_DOCS_TYPED,
    },
    Mutation {
        // A handle's wait_timeout adds its timeout to now unchecked:
        // `Duration::MAX` panics with an overflow.
        name: "wait-timeout-overflows",
        file: "crates/sched-core/src/sync.rs",
        original: "    now.checked_add(timeout.min(CENTURY))\n",
        replacement: "    Some(now + timeout)\n",
        catcher: &SCHED_DOCS_TYPED,
    },
    Mutation {
        name: "deque-grow-copies-from-claimed-head",
        file: "crates/deque/src/worker.rs",
        original: "let mut position = self.head_bound.get();",
        replacement: "let mut position = unpack(self.inner.pop_and_claimed.load(Acquire)).1;",
        catcher: &DEQUE_LOOM,
    },
    Mutation {
        name: "deque-leftovers-stop-at-a-panicking-drop",
        file: "crates/deque/src/inner.rs",
        original: "        // Nothing left unless an item's `Drop` panicked in `drop_all`.\n        self.drop_all();",
        replacement: "        // Mutated: the items after a panicking one leak.",
        catcher: &DEQUE_PANICKING_DROP,
    },
    Mutation {
        name: "sched-core-process-handed-on-inside-the-body-borrow",
        file: "crates/sched-core/src/worker/step.rs",
        original: "        let desired = unsafe { record.with_body(|body| self.step_owned(&record, body, kill)) };\n        let measured = started.map(|started| self.measured(&record, started));\n        self.local.current_level.set(crate::Priority::Normal);\n        let parked = match desired {\n            Some(desired) => self.after_step(&record, desired),\n            None => false,\n        };",
        replacement: "        let desired = unsafe {\n            record.with_body(|body| {\n                if let Some(desired) = self.step_owned(&record, body, kill) {\n                    match record.state.finish_step(desired, false) {\n                        AfterStep::Requeue { woken } => {\n                            let how = if woken { Runnable::Woken } else { Runnable::Continued };\n                            self.shared.schedule(record.clone(), how);\n                        }\n                        AfterStep::Parked => RecordRef::park(record.clone()),\n                        AfterStep::Kill(_) => {}\n                    }\n                }\n                None::<u32>\n            })\n        };\n        let measured = started.map(|started| self.measured(&record, started));\n        self.local.current_level.set(crate::Priority::Normal);\n        let parked = match desired {\n            Some(desired) => self.after_step(&record, desired),\n            None => false,\n        };",
        catcher: &SCHED_CORE_STEAL_MODEL,
    },
    Mutation {
        name: "sched-core-admission-reads-stopping-apart-from-the-count",
        file: "crates/sched-core/src/engine/live.rs",
        original: "            counter.fetch_add(1, SeqCst);\n            // Pairs with the fence in `stop` (the Dekker argument of the\n            // module docs rests on these two fences, which loom models).\n            fence(SeqCst);\n            if self.word.load(SeqCst) & STOPPING != 0 {",
        replacement: "            if self.word.load(SeqCst) & STOPPING != 0 {\n                return Err(Refused::Stopping);\n            }\n            counter.fetch_add(1, SeqCst);\n            if false {",
        catcher: &SCHED_CORE_ADMISSION_MODEL,
    },
    Mutation {
        // The ready queues served newest first (a LIFO, as the deque of
        // woken processes once was): a process buried under later ones
        // waits past its bound.
        name: "ready-queue-newest-first",
        file: "crates/sched-core/src/runqueue/local.rs",
        original: "        oldest(queue)\n    }",
        replacement: "        queue.pop()\n    }",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // Steps never charged to their lanes: every pick goes to the
        // lane that ties lowest, `High`, strictly first, and `Normal` and
        // `Low` starve under a `High` flood.
        name: "levels-never-charged",
        file: "crates/sched-core/src/runqueue/shares.rs",
        original: "None if self.groups == 1 => self.nominal[lane],",
        replacement: "None if self.groups == 1 => 0,",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // Takes from the global queues never charged: every take goes to
        // the highest level with outside work, and `Low`'s outside
        // wake-ups wait for as long as `High`'s keep coming.
        name: "global-takes-never-charged",
        file: "crates/sched-core/src/worker/mod.rs",
        original: "                self.global_shares.charge(lane, weight, None);\n",
        replacement: "",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // A lane back from idle keeps its old pass instead of the floor:
        // it banks credit while idle and then holds the worker until the
        // others' passes come down to it, past their bound.
        name: "lanes-bank-credit-while-idle",
        file: "crates/sched-core/src/runqueue/shares.rs",
        original: "let lifted = (*pass).max(floor);",
        replacement: "let lifted = *pass;",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // A woken light process joins the back of its level's queue, as a
        // heavy one does: no light queue is ever used.
        name: "light-queue-never-used",
        file: "crates/sched-core/src/runqueue/local.rs",
        original: "if self.lighting.get() && !record.heavy() && !cfg!(loom) {",
        replacement: "if false && self.lighting.get() && !record.heavy() {",
        catcher: &SCHED_LIGHT_FIRST,
    },
    Mutation {
        // A light queue is served without a pause while it has work: the
        // heavy processes of its level wait for as long as light ones keep
        // waking.
        name: "light-queue-never-yields",
        file: "crates/sched-core/src/runqueue/local.rs",
        original: "if runs.get() >= LIGHT_RUNS && !self.ready[lane].is_empty() {",
        replacement: "if runs.get() >= u32::MAX && !self.ready[lane].is_empty() {",
        catcher: &SCHED_CORE_LIGHT_QUEUES,
    },
    Mutation {
        // The light queue serves its newest process first: a light process
        // woken early is overtaken by every later one. (The simulation's
        // bound check over 1 000 seeds no longer catches it since the
        // levels became weights of one order: the light queues drain
        // within the bound there; the run queue's unit test of the order
        // does.)
        name: "light-queue-newest-first",
        file: "crates/sched-core/src/runqueue/local.rs",
        original: "let popped = oldest(light);",
        replacement: "let popped = light.pop();",
        catcher: &SCHED_CORE_LIGHT_QUEUES,
    },
    Mutation {
        // Any slow step renews a spell of measuring: a workload of short
        // steps with a slow one now and then measures every step for ever.
        name: "spell-always-renewed",
        file: "crates/sched-core/src/worker/light.rs",
        original: "if slow && (measuring == 0 || confirmed || light) {",
        replacement: "if slow {",
        catcher: &SCHED_CORE_SPELLS,
    },
    Mutation {
        // A thief takes the lowest level's work first.
        name: "thief-takes-lowest-level-first",
        file: "crates/sched-core/src/worker/mod.rs",
        original: "for (stealer, into) in lanes.chain(nurseries) {",
        replacement: "for (stealer, into) in lanes.chain(nurseries).collect::<Vec<_>>().into_iter().rev() {",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // The nurseries are never moved to their levels' queues: what a
        // step woke waits there for as long as chains keep the worker
        // busy.
        name: "nursery-never-flushed",
        file: "crates/sched-core/src/worker/mod.rs",
        original: "            self.flush_nursery();\n",
        replacement: "",
        catcher: &SCHED_FAIRNESS_BOUND,
    },
    Mutation {
        // A parked worker sleeps until its earliest deadline's own tick:
        // a light load of timers wakes it up to ten times as often.
        name: "timer-park-at-each-tick",
        file: "crates/sched-core/src/timer/registry.rs",
        original: "tick => Some(self.instant_of(park_tick(tick))),",
        replacement: "tick => Some(self.instant_of(tick)),",
        catcher: &SCHED_CORE_TIMER_REGISTRY,
    },
    Mutation {
        // A receiver asks whether a sender has an earlier send on its way
        // by reading every send addressed to it: after a restart, once
        // per sender, which kept a recovery of 10 000 senders to one
        // counter reading for more than ten minutes.
        name: "durable-earlier-send-reads-the-whole-outbox",
        file: "crates/durable/src/channel.rs",
        original: "match store.outbox_holds_earlier(receiver, from, seq) {",
        replacement: "match store.outbox_to(receiver).map(|all| all.iter().any(|s| s.from == from && s.seq < seq)) {",
        catcher: &DURABLE_CHANNEL_UNIT,
    },
    Mutation {
        // A resolved process sent to through another engine goes to its
        // record anyway: the other engine's process of that PID never
        // hears of it, and the first engine's reads a stranger's message.
        name: "resolved-ignores-its-engine",
        file: "crates/sched-core/src/engine/resolved.rs",
        original: "if shared.engine_id != self.engine {",
        replacement: "if shared.engine_id == u64::MAX {",
        catcher: &SCHED_RESOLVED,
    },
    Mutation {
        // The wheels' tick back at 1 ms: a timer re-armed from the step
        // its last one woke falls due nearly a whole tick late.
        name: "timer-tick-a-millisecond",
        file: "crates/sched-core/src/timer/registry.rs",
        original: "const TICK: Duration = Duration::from_micros(100);",
        replacement: "const TICK: Duration = Duration::from_millis(1);",
        catcher: &SCHED_SIMULATION,
    },
    Mutation {
        // Urgent messages left in arrival order: an urgent stop waits
        // behind the backlog.
        name: "urgent-not-first",
        file: "crates/sched-core/src/contract/urgent.rs",
        original: "(1, Event::Message(unwrap(package))),",
        replacement: "(2, Event::Message(unwrap(package))),",
        catcher: &SCHED_SYSTEM_LANE,
    },
    Mutation {
        // Lanes served most-charged first: the group that had the most
        // step time for its weight keeps the level, the others starve.
        name: "groups-most-charged-first",
        file: "crates/sched-core/src/runqueue/shares.rs",
        original: "if best.is_some_and(|(_, least)| lifted >= least) || !ready(lane) {",
        replacement: "if best.is_some_and(|(_, least)| lifted < least) || !ready(lane) {",
        catcher: &SCHED_GROUPS,
    },
    Mutation {
        // Every idle spell may linger up to the builder's limit: an idle
        // engine fed unbidden from outside spends CPU on every gap.
        name: "linger-always",
        file: "crates/sched-core/src/worker/idle.rs",
        original: "    if expects_answer || others_busy {\n",
        replacement: "    if true || expects_answer || others_busy {\n",
        catcher: &SCHED_IDLE_LINGER,
    },
    Mutation {
        // Busy workers never even out their lanes: a group's or a level's
        // processes stay on the worker they landed on, and its share holds
        // only there.
        name: "sched-core-busy-workers-never-balance",
        file: "crates/sched-core/src/worker/mod.rs",
        original: "        if others < 2 || cfg!(loom) {\n",
        replacement: "        if true || others < 2 || cfg!(loom) {\n",
        catcher: &SCHED_GROUPS,
    },
    Mutation {
        // A worker awaiting an answer lingers no longer than for work
        // nothing awaits: it parks in every gap of an exchange.
        name: "linger-capped-while-an-answer-is-awaited",
        file: "crates/sched-core/src/worker/idle.rs",
        original: "    if expects_answer || others_busy {\n",
        replacement: "    if others_busy {\n",
        catcher: &SCHED_IDLE_LINGER,
    },
    Mutation {
        // The `next` slot without its limit: two processes that wake each
        // other keep it, and what waits in the queue never runs.
        name: "next-slot-without-limit",
        file: "crates/sched-core/src/worker/mod.rs",
        original: "if self.next_runs < NEXT_SLOT_RUNS && !self.local.higher_ready(level) {",
        replacement: "if self.next_runs < u32::MAX && !self.local.higher_ready(level) {",
        catcher: &SCHED_CORE_FAIRNESS,
    },
    Mutation {
        // The system lane skipped: a down or a cancel waits behind the
        // backlog.
        name: "no-system-lane",
        file: "crates/sched-core/src/contract/urgent.rs",
        original: "        super::event::system_first(events);\n",
        replacement: "        let _ = super::event::system_first;\n",
        catcher: &SCHED_SYSTEM_LANE,
    },
    Mutation {
        name: "sched-core-late-submission-skips-its-cancel",
        file: "crates/sched-core/src/engine/admission.rs",
        original: "        if self.is_stopping() {",
        replacement: "        if false && self.is_stopping() {",
        catcher: &SCHED_CORE_SHUTDOWN_RACES,
    },
    Mutation {
        name: "sched-core-unread-events-dropped-after-the-step",
        file: "crates/sched-core/src/worker/step.rs",
        original: "            .keep(rest, taken, ranks);",
        replacement: "            .keep(rest.take(0), taken, ranks);",
        catcher: &SCHED_CORE_HOSTILE,
    },
    Mutation {
        // A backlog read in place is not put back: what the step left of
        // it is lost.
        name: "backlog-not-kept",
        file: "crates/sched-core/src/worker/step.rs",
        original: "                .unread = backlog;",
        replacement: "                .unread = Default::default();\n            drop(backlog);",
        catcher: &SCHED_SYSTEM_LANE,
    },
    Mutation {
        name: "sched-core-repeated-link-signals-beside-the-end",
        file: "crates/sched-core/src/record/links.rs",
        original: "    if refused.signalled && !newly {\n        return None;\n    }",
        replacement: "    let _ = newly;",
        catcher: &SCHED_CORE_LINK_MODELS,
    },
    Mutation {
        name: "sched-core-cancelled-events-checked-only-before-the-step",
        file: "crates/sched-core/src/contract/output.rs",
        original: "Some(lists) if !lists.hand_out(&event) => set_aside(lists, event),",
        replacement: "Some(lists) if false && !lists.hand_out(&event) => set_aside(lists, event),",
        catcher: &PROMISE_CANCELLED_MID_BATCH,
    },
    Mutation {
        name: "sched-core-unlink-through-the-process-table",
        file: "crates/sched-core/src/engine/stepping.rs",
        original: "        links::unlink(self.record, target);",
        replacement: "        if self.shared.processes.get(target).is_none() {\n            return;\n        }\n        links::unlink(self.record, target);",
        catcher: &PROMISE_UNLINK_GAP,
    },
    Mutation {
        name: "sched-core-delayed-messages-outlive-their-target",
        file: "crates/sched-core/src/engine/shared.rs",
        original: "        if !related.delayed.is_empty() {",
        replacement: "        if false && !related.delayed.is_empty() {",
        catcher: &PROMISE_DELAYED_TO_ENDED,
    },
    Mutation {
        name: "sched-core-timer-wheel-never-shrinks",
        file: "crates/sched-core/src/timer/wheel.rs",
        original: "if slots < SHRINK_FROM || self.len > self.look_at {",
        replacement: "if true || slots < SHRINK_FROM || self.len > self.look_at {",
        catcher: &SCHED_CORE_WHEEL,
    },
    Mutation {
        name: "sched-core-table-lookup-skips-the-pid-check",
        file: "crates/sched-core/src/table/slot.rs",
        original: "let matches = unsafe { &*raw }.pid() == pid;",
        replacement: "let matches = unsafe { &*raw }.pid() == pid || true;",
        catcher: &SCHED_CORE_TABLE_MODELS,
    },
    Mutation {
        name: "sched-core-outcome-slot-forgets-the-waiter",
        file: "crates/sched-core/src/record/slot.rs",
        original: "crate::panic_guard::wake_user_waker(waiter, \"a completion's waker\");",
        replacement: "drop(waiter);",
        catcher: &SCHED_CORE_SLOT_MODELS,
    },
    Mutation {
        name: "sched-core-parking-ignores-work-seen-after-announcing",
        file: "crates/sched-core/src/runqueue/sleep.rs",
        original: "        if has_work() && self.leave(me) {",
        replacement: "        if false && has_work() && self.leave(me) {",
        catcher: &SCHED_CORE_PARKING_MODELS,
    },
    Mutation {
        name: "sched-core-cancel-latch-claimed-twice",
        file: "crates/sched-core/src/record/mailbox.rs",
        original: "self.0.fetch_or(CANCEL_SENT, AcqRel) & CANCEL_SENT == 0",
        replacement: "self.0.fetch_or(CANCEL_SENT, AcqRel) & CANCEL_SENT == 0 || true",
        catcher: &SCHED_CORE_MAILBOX,
    },
    Mutation {
        name: "sched-core-no-parked-watcher",
        file: "crates/sched-core/src/runqueue/sleep.rs",
        original: "let watch = !cfg!(loom)",
        replacement: "let watch = false && !cfg!(loom)",
        catcher: &SCHED_CORE_WATCHER,
    },
    Mutation {
        name: "sched-core-timer-cancel-misses-a-pending-timer",
        file: "crates/sched-core/src/timer/wheel.rs",
        original: "        if entry.generation != key.generation || entry.value.is_none() {",
        replacement: "        if true || entry.generation != key.generation || entry.value.is_none() {",
        catcher: &SCHED_CORE_WHEEL,
    },
    Mutation {
        name: "sched-core-end-signal-acted-on-outside-the-linkers-lock",
        file: "crates/sched-core/src/record/links.rs",
        original: "    linked.relations.remove_link_then(ended, act)\n",
        replacement: "    if !linked.relations.remove_link(ended) {\n        return None;\n    }\n    linked.relations.with_existing(act)\n",
        catcher: &SCHED_CORE_LINK_MODELS,
    },
    Mutation {
        name: "sched-core-timed-park-leaves-a-wakeup-behind",
        file: "crates/sched-core/src/runqueue/sleep.rs",
        original: "                    self.parkers[me].park();",
        replacement: "",
        catcher: &SCHED_CORE_TIMED_PARK,
    },
    Mutation {
        name: "sched-core-full-mailbox-keeps-the-refused-count",
        file: "crates/sched-core/src/record/mailbox.rs",
        original: "            self.0.fetch_sub(1, AcqRel);\n            return false;",
        replacement: "            return false;",
        catcher: &SCHED_CORE_MAILBOX,
    },
    Mutation {
        name: "mpsc-consumer-skips-the-install-position-wait",
        file: "crates/mpsc/src/queue/cursor.rs",
        original: "                if next.is_null() {\n                    return None;\n                }\n",
        replacement: "",
        catcher: &MPSC_INSTALL_WAIT_MODEL,
    },
    Mutation {
        name: "sched-core-lingering-look-without-its-fence",
        file: "crates/sched-core/src/worker/idle.rs",
        original: "    sleepers.stop_searching();\n    fence(SeqCst);\n",
        replacement: "    sleepers.stop_searching();\n",
        catcher: &SCHED_CORE_LINGERING_LOOK_MODEL,
    },
    Mutation {
        name: "sched-core-timer-next-stored-outside-the-lock",
        file: "crates/sched-core/src/timer/registry.rs",
        original: "        let next = wheel.next_deadline().unwrap_or(deadline);\n",
        replacement: "        let next = wheel.next_deadline().unwrap_or(deadline);\n        drop(wheel);\n",
        catcher: &SCHED_CORE_TIMER_NEXT_MODEL,
    },
    Mutation {
        name: "durable-admission-by-high-water-mark",
        file: "crates/durable/src/state.rs",
        original: "            Some(&mark) if seq == mark + 1 => Admission::Next,\n",
        replacement: "            Some(_) | None => Admission::Next,\n",
        catcher: &DURABLE_CHANNEL,
    },
    Mutation {
        name: "durable-spawn-leaves-the-outbox-for-a-recovery",
        file: "crates/durable/src/durability/mod.rs",
        original: "                    .and_then(|sends| channel::deliver(&self.shared, cx, sends));\n",
        replacement: "                    .map(drop);\n",
        catcher: &DURABLE_CHANNEL,
    },
    Mutation {
        name: "durable-recover-delivers-before-every-process-runs",
        file: "crates/durable/src/durability/recover.rs",
        original: "        channel::deliver(&self.shared, cx, sends)\n",
        replacement: "        drop(sends);\n        Ok(channel::Delivery::default())\n",
        catcher: &DURABLE_CHANNEL,
    },
    Mutation {
        name: "durable-store-created-in-place",
        file: "crates/durable/src/store/redb.rs",
        original: "            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_atomically(path)?,\n",
        replacement: "            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {\n                initialise(&Database::create(path).map_err(store)?)?;\n            }\n",
        catcher: &DURABLE_STORE_DAMAGE,
    },
    Mutation {
        name: "durable-store-opens-without-its-checksums",
        file: "crates/durable/src/store/redb.rs",
        original: "                .set_check_integrity_on_open(true)\n",
        replacement: "                .set_check_integrity_on_open(false)\n",
        catcher: &DURABLE_STORE_DAMAGE,
    },
    Mutation {
        name: "durable-recover-trusts-its-first-read",
        file: "crates/durable/src/durability/recover.rs",
        original: "        if claimed.is_empty() || self.shared.closed.load(SeqCst) == closed {\n",
        replacement: "        if claimed.is_empty() || closed == closed {\n",
        catcher: &DURABLE_RECOVERY_CLAIM,
    },
    Mutation {
        name: "durable-admission-by-high-water-mark-in-the-simulation",
        file: "crates/durable/src/state.rs",
        original: "            Some(&mark) if seq == mark + 1 => Admission::Next,\n",
        replacement: "            Some(_) | None => Admission::Next,\n",
        catcher: &DURABLE_SIMULATION,
    },
    Mutation {
        name: "durable-spawn-leaves-the-outbox-in-the-simulation",
        file: "crates/durable/src/durability/mod.rs",
        original: "                    .and_then(|sends| channel::deliver(&self.shared, cx, sends));\n",
        replacement: "                    .map(drop);\n",
        catcher: &DURABLE_SIMULATION,
    },
    Mutation {
        name: "durable-recover-delivers-before-every-process-runs-in-the-simulation",
        file: "crates/durable/src/durability/recover.rs",
        original: "        channel::deliver(&self.shared, cx, sends)\n",
        replacement: "        drop(sends);\n        Ok(channel::Delivery::default())\n",
        catcher: &DURABLE_SIMULATION,
    },
    Mutation {
        // A receiver's record that stepped on an early send is written
        // although the sender's record holding that send was not.
        name: "durable-writes-a-record-whose-send-was-not-written-in-the-simulation",
        file: "crates/durable/src/commit.rs",
        original: "                    item.after.iter().find_map(|&(incarnation, seq)| {\n",
        replacement: "                    item.after.iter().filter(|_| false).find_map(|&(incarnation, seq)| {\n",
        catcher: &DURABLE_SIMULATION,
    },
    Mutation {
        // The watch of the journal stream hands nothing over: a send from
        // another node waits for a recovery.
        name: "durable-jetstream-watch-hands-nothing-over",
        file: "crates/durable-jetstream/src/watch.rs",
        original: "        if writer == self.me {\n",
        replacement: "        if writer == self.me || writer != self.me {\n",
        catcher: &DURABLE_JETSTREAM_LIVE,
    },
    Mutation {
        name: "relay-nats-backlog-published-after-the-node-is-down",
        file: "crates/relay-nats/src/io.rs",
        original: "                    if let Some(gone) = lost {\n",
        replacement: "                    if let Some(gone) = lost.filter(|_| false) {\n",
        catcher: &NATS_BACKLOG_ACCOUNTING,
    },
    Mutation {
        // The engine hears of a lost node before the fence goes up: what
        // its sweep sends to the node (a held ask answered "no reply") can
        // reach it ahead of the Reset.
        name: "relay-nats-sweep-before-the-fence",
        file: "crates/relay-nats/src/reset.rs",
        original: "        let episode = self.members.fence(node);\n        self.tell_lost(node);\n",
        replacement: "        self.tell_lost(node);\n        let episode = self.members.fence(node);\n",
        catcher: &NATS_RESET_ORDER,
    },
    Mutation {
        // Frames accepted for a run of a node that has since restarted go
        // to the new run, whose processes reuse the old one's PIDs.
        name: "relay-nats-frames-for-an-old-run-reach-the-new-one",
        file: "crates/relay-nats/src/io.rs",
        original: "                            (addressed != 0 && current != addressed)\n",
        replacement: "                            (false && addressed != 0 && current != addressed)\n",
        catcher: &NATS_RESTARTED_RUN,
    },
    Mutation {
        // Nobody fires the timers of a worker held in one step: they wait
        // for the step to return, however long, while other workers idle.
        name: "sched-core-timers-wait-for-a-blocked-worker",
        file: "crates/sched-core/src/engine/long_steps.rs",
        original: "                        let fired = shared.timers.rescue(&shared, worker, pid, steps);",
        replacement: "                        let fired = 0 * usize::from(shared.timers.any_due(worker, || shared.clock.now()));",
        catcher: &SCHED_TIMER_RESCUE,
    },
    Mutation {
        // The worker fires its wheel whether or not the watcher has the
        // turn: both fire one wheel at once, out of deadline order.
        name: "sched-core-timer-turn-ignores-the-watcher",
        file: "crates/sched-core/src/timer/registry.rs",
        original: "        if turn.fetch_or(WORKER, Acquire) & WATCHER == 0 {",
        replacement: "        if turn.fetch_or(WORKER, Acquire) & WATCHER == 0 || true {",
        catcher: &sched_core_loom_lib!("loom_models::timers"),
    },
    Mutation {
        // A shard's name is released while its keys' processes still run:
        // the next holder starts a second process of a key beside the
        // first.
        name: "relay-nats-keyed-release-before-the-processes-end",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "        if !shard.children.is_empty() || shard.releasing {",
        replacement: "        if shard.releasing {",
        catcher: &NATS_KEYED_HAND_OFF,
    },
    Mutation {
        // A question passed on from a node that is not its asker's
        // speaks with the asker's PID: the next node drops it as forged,
        // and the asker waits for an answer that never comes.
        name: "sched-core-forward-speaks-for-a-remote-asker",
        file: "crates/sched-core/src/engine/forward.rs",
        original: "        let from = if shared.is_remote(from) {",
        replacement: "        let from = if false && shared.is_remote(from) {",
        catcher: &NATS_KEYED_ASK_PASSED_ON,
    },
    Mutation {
        // A forward that cannot go hands back a right that answers
        // nobody: the original asker is never told `NoReply`.
        name: "sched-core-forward-loses-the-right-it-could-not-use",
        file: "crates/sched-core/src/engine/forward.rs",
        original: "            Err(error) => Err((error, ReplyTo::new(kept, question_type))),",
        replacement: "            Err(error) => Err((error, ReplyTo::new(StdArc::new(ReplySlot::default()), question_type))),",
        catcher: &SCHED_FORWARD,
    },
    Mutation {
        // A withdrawn pair stays pending: its timeout still comes as an
        // `Event::Reply` the process never asked for.
        name: "sched-core-withdrawn-pair-stays-pending",
        file: "crates/sched-core/src/engine/forward.rs",
        original: "                .position(|(pending, _)| *pending == ask)?;",
        replacement: "                .position(|(pending, _)| *pending == ask)\n                .filter(|_| false)?;",
        catcher: &SCHED_FORWARD,
    },
    Mutation {
        // A host never reads what other nodes ask its keys: every
        // question across nodes is answered `NoReply`.
        name: "relay-nats-keyed-host-ignores-questions-from-other-nodes",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "                Event::Request(request) => self.asked(out.context(), request),",
        replacement: "                Event::Request(_) => {}",
        catcher: &NATS_KEYED_ASK_ACROSS,
    },
    Mutation {
        // A stand-in suspends its durable process as soon as it is
        // cancelled, before what it passed on is journaled: a hand-off
        // drops the deposits taken but not yet written.
        name: "durable-stand-in-suspends-before-its-messages-are-journaled",
        file: "crates/durable/src/stand_in.rs",
        original: "        let idle = self.pending.is_empty() && self.waiting.is_empty();",
        replacement: "        let idle = self.waiting.is_empty();",
        catcher: &NATS_KEYED_DURABLE_MOVE,
    },
    Mutation {
        // A stand-in drops what the store's fence refused, as it used to:
        // a key that moved away and back loses what its new stand-in
        // passed to the node's stale incarnation.
        name: "durable-stand-in-drops-what-the-fence-refused",
        file: "crates/durable/src/stand_in.rs",
        original: "                Err(DurableError::Fenced(_)) => {\n                    self.fenced = true;\n                    self.wait_again(number, message);\n                }\n",
        replacement: "",
        catcher: &DURABLE_STAND_IN_FENCED,
    },
    Mutation {
        // A stand-in that ends abnormally drops what it holds unjournaled
        // without a count, as it used to.
        name: "durable-stand-in-ends-holding-messages-uncounted",
        file: "crates/durable/src/stand_in.rs",
        original: "        for _ in 0..dropped {",
        replacement: "        for _ in 0..0 {",
        catcher: &DURABLE_STAND_IN_ABNORMAL_END,
    },
    Mutation {
        // A process that ends lets its key go at once, as it used to,
        // while a write of it is still under way: the key's next process
        // here resumes the journal before that write lands, numbers its
        // records as the write's, and the journal reads corrupt.
        name: "durable-key-let-go-before-the-last-write-lands",
        file: "crates/durable/src/commit.rs",
        original: "        if queue.writing.contains(&incarnation) {",
        replacement: "        if false && queue.writing.contains(&incarnation) {",
        catcher: &DURABLE_DOCS_STAND_IN_ABNORMAL_END,
    },
    Mutation {
        // What came back unwritten goes ahead of everything waiting (what
        // came back at an earlier look included): out of order when a
        // process's receipts settle over several looks.
        name: "durable-stand-in-returns-later-messages-first",
        file: "crates/durable/src/stand_in.rs",
        original: "        let at = self.waiting.partition_point(|(n, _)| *n < number);",
        replacement: "        let at = 0;",
        catcher: &DURABLE_STAND_IN_SIM,
    },
    Mutation {
        // The simulated network keeps only each process's order, as it
        // used to: a remote cancel or ask overtakes what its node sent
        // before it.
        name: "sim-network-keeps-only-each-process-s-order",
        file: "crates/sched-core/src/runtime/simulation/faults.rs",
        original: "                Some((Pid::new(*from, 0), Pid::new(package.target().node(), 0)))",
        replacement: "                Some((package.source(), package.target())).filter(|_| *from < u32::MAX)",
        catcher: &SCHED_SIM_NETWORK_ORDER,
    },
    Mutation {
        // A simulation's cancel is delivered at once, overtaking the
        // messages sent before it that delays hold back, as it used to.
        name: "sim-cancel-overtakes-held-messages",
        file: "crates/sched-core/src/engine/monitors.rs",
        original: "            if !intercept.cancel(&record) {",
        replacement: "            if !intercept.cancel(&record) && false {",
        catcher: &SCHED_SIM_CANCEL,
    },
    Mutation {
        // A stopped keyed process keeps nothing of what reached it after
        // its last step: a send on a cached route that raced the stop is
        // a dead letter.
        name: "relay-nats-stopped-keyed-process-hands-nothing-back",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "        if !self.link.stopping.load(Acquire) || !self.link.clock.valid_coarse() {",
        replacement: "        if true {",
        catcher: &NATS_KEYED_ENTITY_HAND_BACK,
    },
    Mutation {
        // A restart heard before the old run was declared down counts
        // nothing of what the old run never confirmed.
        name: "relay-nats-restart-leaves-the-old-run-uncounted",
        file: "crates/relay-nats/src/io.rs",
        original: "                        count_unconfirmed(&inner, node, sent);\n                        inner.tell_lost(node);",
        replacement: "                        inner.tell_lost(node);",
        catcher: &NATS_RESTART_UNCONFIRMED,
    },
    Mutation {
        // The first frame seen from a sender sets a bare baseline again:
        // what a slow consumer dropped before it is counted nowhere.
        name: "relay-nats-frames-before-the-first-seen-uncounted",
        file: "crates/relay-nats/src/sequence.rs",
        original: "            let from = if first == 0 { seq } else { first };",
        replacement: "            let from = seq;",
        catcher: &NATS_FIRST_NUMBERS,
    },
    Mutation {
        // A keyed process whose lease ran out ends at once, as if lost:
        // a renewal that only came late fences what its mailbox held.
        name: "relay-nats-keyed-late-renewal-fences",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "        if self.link.clock.is_void() {",
        replacement: "        if true {",
        catcher: &NATS_KEYED_LEASE_LATE,
    },
    Mutation {
        // What a stopped process hands back goes behind what waited for
        // its key, not ahead: a sender's order breaks.
        name: "relay-nats-hand-back-behind-the-wait",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "                                    queued.push_front(Waiting::Message(message));",
        replacement: "                                    queued.push_back(Waiting::Message(message));",
        catcher: &NATS_KEYED_ENTITY_HAND_BACK,
    },
    Mutation {
        // A leaving node stops reading as soon as it said goodbye: what
        // the others published before hearing it is counted nowhere.
        name: "relay-nats-leave-without-farewells",
        file: "crates/relay-nats/src/io.rs",
        original: "        crate::farewell::await_farewells(inner, up, FAREWELL_WAIT).await;",
        replacement: "        let _ = (up, FAREWELL_WAIT);",
        catcher: &NATS_LEAVING,
    },
    Mutation {
        // A node forgets what a node that left said it published here: it
        // closes before reading the frames that came ahead of the goodbye.
        name: "relay-nats-close-forgets-the-last-frames-of-who-left",
        file: "crates/relay-nats/src/farewell.rs",
        original: "        lock(&self.farewells).expect(from, run, last);\n",
        replacement: "        let _ = (from, run, last);\n",
        catcher: &NATS_LEAVING_AFTER_SENDER,
    },
    Mutation {
        // An entity ignores that its key's process is stopping: it keeps
        // sending by PID to a process on its way out.
        name: "relay-nats-entity-ignores-a-stop",
        file: "crates/relay-nats/src/keyed/entity.rs",
        original: "            && !link.stopping.load(std::sync::atomic::Ordering::Acquire)",
        replacement: "",
        catcher: &NATS_KEYED_ENTITY_HAND_BACK,
    },
    Mutation {
        // A closing transport releases its names while the keyed
        // processes under them still run: the next holder starts the keys
        // again beside them.
        name: "relay-nats-close-releases-names-under-running-keyed-processes",
        file: "crates/relay-nats/src/io.rs",
        original: "        crate::leases::give_up_all(inner);\n",
        replacement: "",
        catcher: &NATS_KEYED_CLOSE,
    },
    Mutation {
        // A keyed process steps whatever its lease: a node cut off past
        // it reads messages beside the key's new holder.
        name: "relay-nats-keyed-steps-without-its-lease",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {\n        if !self.link.clock.valid_coarse() {",
        replacement: "    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {\n        if false && !self.link.clock.valid() {",
        catcher: &NATS_KEYED_FENCE,
    },
    Mutation {
        // A node that lost a shard's lease passes on what waited there:
        // the next holder reads it behind a later message of its sender.
        name: "relay-nats-keyed-lost-lease-passes-on-what-waited",
        file: "crates/relay-nats/src/keyed/host.rs",
        original: "            self.stop_all(cx, shard);\n            kind.fence_waiting(shard);",
        replacement: "            self.stop_all(cx, shard);",
        catcher: &NATS_KEYED_LAPSED,
    },
    Mutation {
        // A terminate sets the flag and waits for the process's turn, as
        // before kill tickets: behind 2 000 busy processes, thousands of
        // steps.
        name: "terminate-waits-its-turn",
        file: "crates/sched-core/src/engine/routing.rs",
        original: "        if flag != TERMINATE || self.histograms || cfg!(loom) {",
        replacement: "        if true || flag != TERMINATE || self.histograms || cfg!(loom) {",
        catcher: &SCHED_TERMINATE_QUEUED,
    },
    Mutation {
        // A continuing process is never made READY in its queue: a ticket
        // cannot take it, and its terminate waits a whole turn.
        name: "continue-never-published-for-tickets",
        file: "crates/sched-core/src/worker/step.rs",
        original: "pub(crate) const KILL_TICKET_BACKLOG: usize = 256;",
        replacement: "pub(crate) const KILL_TICKET_BACKLOG: usize = usize::MAX;",
        catcher: &SCHED_TERMINATE_QUEUED,
    },
];
