//! Project automation, run as `cargo xtask <command>`.
//!
//! Commands:
//! - `loom [CRATE]`: run the loom models of one crate (or of every crate);
//! - `miri [CRATE]`: run a crate's tests under miri (or every crate with unsafe code);
//! - `ci`: everything CI checks, in order, each step timed;
//! - `tests`: CI's tests step alone (every test but the doc tests, the
//!   crates whose tests wait on `nats-server` beside the others);
//! - `services`: install what the tests start (`nats-server` with
//!   JetStream, `tmux`) when missing;
//! - `bench [--quick | --report-only]`: the comparison benchmarks and a
//!   ratio report (`--report-only` re-renders the last run's results);
//! - `stress [--seconds N]`: the randomised whole-scheduler stress run, in
//!   release (60 s unless told);
//! - `tsan [CRATE]`: the concurrency tests under ThreadSanitizer;
//! - `leak`: resident memory over a million process lifecycles, and a
//!   shorter run under valgrind for definite leaks;
//! - `layers`: check that each crate's modules use only the ones below
//!   them on the crate's ladders (with their named exceptions);
//! - `sizes`: check that no function is over 100 lines and no file over
//!   800 (outside tests), except the listed ones;
//! - `mutants [NAME]`: apply each known bug in turn and check that its
//!   test catches it;
//! - `doors`: count the public surface (spawn, send and ask doors, the
//!   methods of `Output` and `Context`, the crate root's names) against
//!   the targets of the one-verb-per-act plan.
//!
//! The commands only shell out to `cargo`, `rustup`, `cargo-deny`,
//! `valgrind`, and (to install the test services) `apt-get` and `pip`; they need no dependency of their own, so `cargo xtask`
//! builds in seconds on a fresh machine.

mod bench_report;
mod cmd;
mod docnames;
mod doors;
mod layers;
mod leak;
mod mutants;
mod sizes;
mod steps;
mod stress;
mod test_step;
mod tsan;
mod workspace;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  loom [CRATE]   run loom models (all crates when none is named);
                 LOOM_MAX_PREEMPTIONS defaults to 2
  miri [CRATE]   run tests under miri with the race detector
                 (all crates with unsafe code when none is named)
  ci [--full]    fmt, clippy, layers, sizes, tests, doc tests, stress (30 s), leak, loom,
                 miri on the quick selection of each crate's tests, cargo-deny;
                 prints each step's time at the end. --full also runs the
                 mutations that quick loom models catch, and miri on every
                 test selected for it (what CI ran before: about twice as long)
  tests          CI's tests step alone: every test but the doc tests, the
                 crates whose tests mostly wait on nats-server run beside
                 the others (CI=true: a missing nats-server or tmux fails)
  services       install what the tests start when missing: nats-server
                 (2.10 or later, for JetStream) and tmux
  bench [--quick | --report-only]
                 run the benchmarks against the peers (tokio, rayon,
                 crossbeam, st3, std) and report our/peer ratios; writes
                 target/bench-report/report.md and ratios.svg
  tsan [CRATE]   run the concurrency tests under ThreadSanitizer (nightly,
                 -Zbuild-std, target/tsan; all such crates when none is named)
  leak           resident memory over 1 000 000 process lifecycles, and
                 20 000 under valgrind with no definite leak
  stress [--seconds N]
                 the randomised whole-scheduler stress run with its checker,
                 in release, for N seconds (default 60)
  layers         check that each crate's modules (every crate under
                 crates/: sched-deque, sched-mpsc, sched-relay, sched-core,
                 sched, relay-nats, sched-durable, sched-durable-jetstream,
                 sched-top, sched-examples) use only lower ones on their
                 ladders, but for their named exceptions
  sizes          functions over 100 lines and files over 800 (outside
                 tests) are split, or listed with their reason
  mutants [NAME] apply each mutation of the table (or the one named), run
                 the command that must catch it, restore; fails if any
                 mutation survives
  docnames       the tests, files and members of our types the docs quote
                 exist in the code
  doors [--list] count the public surface (spawn/send/ask doors, Output
                 and Context methods, root names) against its targets
  help           this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("loom") => steps::loom(args.get(1).map(String::as_str)),
        Some("miri") => steps::miri(args.get(1).map(String::as_str)).map_err(|e| e.to_string()),
        Some("ci") => match args.get(1).map(String::as_str) {
            None => steps::ci(false),
            Some("--full") => steps::ci(true),
            Some(other) => Err(format!("unknown ci option `{other}`\n\n{USAGE}")),
        },
        Some("services") => steps::services(),
        Some("tests") => test_step::tests(),
        Some("stress") => stress::seconds(&args[1..]).and_then(stress::stress),
        Some("tsan") => tsan::tsan(args.get(1).map(String::as_str)),
        Some("leak") => leak::leak(true),
        Some("layers") => layers::layers(),
        Some("docnames") => docnames::docnames(),
        Some("sizes") => sizes::sizes(),
        Some("doors") => doors::doors(args.iter().any(|a| a == "--list")),
        Some("mutants") => mutants::mutants(args.get(1).map(String::as_str)),
        Some("bench") => match args.get(1).map(String::as_str) {
            None => bench_report::bench(false),
            Some("--quick") => bench_report::bench(true),
            Some("--report-only") => bench_report::report_last_run(),
            Some(other) => Err(format!("unknown bench option `{other}`\n\n{USAGE}")),
        },
        Some("help") | Some("--help") | Some("-h") => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n\n{USAGE}")),
        None => Err(format!("no command given\n\n{USAGE}")),
    };
    if args.first().map(String::as_str) == Some("ci") {
        // Passed or failed: where the time went.
        eprint!("\n{}", cmd::step_times());
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}
