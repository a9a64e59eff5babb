//! CI's tests step: the workspace's tests, in two runs side by side.
//!
//! The tests of the crates that talk to a real `nats-server` mostly wait:
//! for a failure detector to decide, a lease to lapse, a killed node's
//! work to move. Measured on a CI run of 2 cores, their binaries took
//! about 770 s of the step's 1 060 s of test time, while one of the
//! slowest (`failures`, 73 s) used 5 s of CPU. Each binary's tests run
//! one at a time (see `NatsServer` in their support code: side by side,
//! each with its server and nodes, they missed their waits), and cargo
//! runs binaries one after another; so the other crates' tests, which
//! are the CPU-bound ones, ran after them on an otherwise idle machine.
//!
//! Here each run's tests are built first, then the two `cargo test` runs
//! go side by side: the waiting crates' (their output kept in a file, printed
//! when they end) and everybody else's (printed as it runs). Each
//! waiting binary still runs alone among the waiting ones, as before,
//! now beside up to one CPU-bound binary: the load every test here is
//! asked to pass under (two busy loops on 2 cores).

use std::fs;
use std::process::{Command, Stdio};

use crate::cmd::run;
use crate::workspace::root;

/// The packages whose tests mostly wait on a real `nats-server`.
const WAITING: &[&str] = &["relay-nats", "sched-durable-jetstream"];

/// What every run of the step builds and tests: everything but the doc
/// tests (a step of their own).
const TARGETS: &[&str] = &["--all-features", "--lib", "--bins", "--tests", "--examples"];

/// Builds every test, then runs the waiting packages' tests beside the
/// others' (see the module's documentation). Fails if either run does,
/// after both have ended.
pub(crate) fn tests() -> Result<(), String> {
    let mut waiting_args = vec!["test"];
    for package in WAITING {
        waiting_args.extend(["--package", package]);
    }
    waiting_args.extend(TARGETS);
    let mut rest_args = vec!["test", "--workspace"];
    for package in WAITING {
        rest_args.extend(["--exclude", package]);
    }
    rest_args.extend(TARGETS);
    // Each run's own build first, one after the other: the two package
    // sets unify features differently (a few crates are built twice), and
    // a build inside a run would hold the other's lock and cores.
    for args in [&waiting_args, &rest_args] {
        let mut build = args.clone();
        build.push("--no-run");
        run("cargo", &build, &[("CI", "true")])?;
    }

    let log_path = root().join("target").join("ci-waiting-tests.log");
    let log = fs::File::create(&log_path)
        .map_err(|e| format!("could not create {}: {e}", log_path.display()))?;
    let err_log = log
        .try_clone()
        .map_err(|e| format!("could not share {}: {e}", log_path.display()))?;
    eprintln!(
        "$ CI=\"true\" cargo {} > {} (beside the next run)",
        waiting_args.join(" "),
        log_path.display()
    );
    let mut waiting = Command::new("cargo")
        .args(&waiting_args)
        .env("CI", "true")
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err_log))
        .spawn()
        .map_err(|e| format!("could not start `cargo`: {e}"))?;

    let rest = run("cargo", &rest_args, &[("CI", "true")]);

    let status = waiting.wait();
    eprintln!(
        "\n== the tests of {} (run beside the others):",
        WAITING.join(", ")
    );
    match fs::read_to_string(&log_path) {
        Ok(text) => eprintln!("{text}"),
        Err(e) => eprintln!("could not read {}: {e}", log_path.display()),
    }
    let waited = match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "`cargo {}` failed with {status} (its output is above)",
            waiting_args.join(" ")
        )),
        Err(e) => Err(format!("could not wait for `cargo`: {e}")),
    };
    match (rest, waited) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
    }
}
