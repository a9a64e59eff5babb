//! `cargo xtask stress [--seconds N]`: the randomised whole-scheduler
//! stress run (`crates/sched/tests/stress/`), built in release and run for
//! N seconds, printing the counts it checked.

use crate::cmd::run;

/// How long `cargo xtask stress` runs without `--seconds`.
const DEFAULT_SECONDS: u64 = 60;
/// How long the CI step runs it: long enough for hundreds of rounds on
/// every worker count, short enough to keep CI bearable on 2 cores.
pub(crate) const CI_SECONDS: u64 = 30;

/// The run time asked for by the arguments after `stress`.
pub(crate) fn seconds(args: &[String]) -> Result<u64, String> {
    let value = match args {
        [] => return Ok(DEFAULT_SECONDS),
        [flag, n] if flag == "--seconds" => n.as_str(),
        [flag] if flag.starts_with("--seconds=") => &flag["--seconds=".len()..],
        other => {
            return Err(format!(
                "unknown stress arguments `{}` (usage: stress [--seconds N])",
                other.join(" ")
            ))
        }
    };
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "--seconds takes a positive whole number, not `{value}`"
        )),
    }
}

/// Runs the stress test in release for `seconds` seconds. A violation
/// fails the test, which fails the command; `SCHED_STRESS_SEED` in the
/// environment passes through to replay a run's scripts.
pub(crate) fn stress(seconds: u64) -> Result<(), String> {
    let seconds = seconds.to_string();
    run(
        "cargo",
        &[
            "test",
            "--release",
            "--package",
            "sched",
            "--test",
            "stress",
            "--",
            "--nocapture",
        ],
        &[("SCHED_STRESS_SECS", &seconds)],
    )
}
