//! `cargo xtask leak`: memory stays flat over a million process lifecycles,
//! and a shorter run leaks nothing by valgrind's count.
//!
//! Both runs are `crates/sched/tests/lifecycle_memory.rs` in release, which
//! reads its lifecycle count from `SCHED_LIFECYCLES`:
//!
//! 1. 1 000 000 lifecycles, checking that resident memory after the run is
//!    within 10% (plus a small slack the test justifies) of what it was
//!    after the first 100 000;
//! 2. 20 000 lifecycles under valgrind's memcheck, failing on any
//!    *definite* leak (or any memory error). Buffers retired through
//!    crossbeam-epoch's global collector may still be waiting for it when
//!    the process exits; valgrind reports those as "still reachable" or
//!    "possibly lost", which is correct behaviour and does not fail the run.

use crate::cmd::{probe, run, step};
use crate::tsan::host_triple;

/// Lifecycles of the resident-memory run.
const LIFECYCLES: &str = "1000000";

/// Lifecycles under valgrind, which runs the threads one at a time and
/// each of them tens of times slower: enough for every kind of lifecycle to
/// run thousands of times, in about 3 s.
const VALGRIND_LIFECYCLES: &str = "20000";

/// memcheck, failing the run (exit status 1) on a definite leak or any
/// memory error, and listing only the definite leaks: the possibly-lost
/// and reachable blocks the epoch collector leaves at exit are counted in
/// the summary without a stack trace each.
const VALGRIND: &str = "valgrind --leak-check=full --errors-for-leak-kinds=definite \
                        --show-leak-kinds=definite --error-exitcode=1";

const TEST_ARGS: &[&str] = &[
    "test",
    "--release",
    "--package",
    "sched",
    "--test",
    "lifecycle_memory",
    "--",
    "--nocapture",
];

/// Runs both checks. Without valgrind, the second one fails the command
/// when `valgrind_required`, and is skipped with a loud notice otherwise
/// (in `cargo xtask ci`, as miri is when it cannot be installed).
pub(crate) fn leak(valgrind_required: bool) -> Result<(), String> {
    step("resident memory over 1 000 000 lifecycles", || {
        run("cargo", TEST_ARGS, &[("SCHED_LIFECYCLES", LIFECYCLES)])
    })?;
    step("valgrind over 20 000 lifecycles", || {
        if !probe("valgrind", &["--version"]) {
            let why = "valgrind is not installed (apt-get install valgrind)";
            if valgrind_required {
                return Err(why.into());
            }
            eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
            eprintln!("SKIPPED: the valgrind leak check ({why})");
            eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
            return Ok(());
        }
        // Cargo runs test binaries through `target.<triple>.runner`; set
        // through the environment it applies to this run only.
        let runner = format!(
            "CARGO_TARGET_{}_RUNNER",
            host_triple(None)?.to_uppercase().replace(['-', '.'], "_")
        );
        run(
            "cargo",
            TEST_ARGS,
            &[
                ("SCHED_LIFECYCLES", VALGRIND_LIFECYCLES),
                // Resident memory under valgrind is valgrind's own.
                ("SCHED_LIFECYCLE_RSS", "skip"),
                // Processes in the global allocator, whose every block
                // valgrind tracks (mimalloc's pages it does not).
                ("SCHED_LIFECYCLE_ALLOCATOR", "global"),
                (&runner, VALGRIND),
            ],
        )
    })
}
