//! Running external commands with a readable echo of what runs.

use std::process::Command;
use std::time::Instant;

/// Runs `program args...` with extra environment variables, echoing the
/// command line first; fails with a message naming the command.
pub(crate) fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    let shown_env: String = envs.iter().map(|(k, v)| format!("{k}=\"{v}\" ")).collect();
    eprintln!("$ {shown_env}{program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| format!("could not start `{program}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed with {status}",
            args.join(" ")
        ))
    }
}

/// Runs a command and reports whether it exited successfully, without echo
/// and without its output: for probes such as "is this tool installed?".
pub(crate) fn probe(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs one named CI step, printing its name before and its time after.
pub(crate) fn step(name: &str, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    eprintln!("\n==> {name}");
    let start = Instant::now();
    let result = body();
    let secs = start.elapsed().as_secs_f64();
    match &result {
        Ok(()) => eprintln!("<== {name}: ok in {secs:.1}s"),
        Err(e) => eprintln!("<== {name}: FAILED in {secs:.1}s: {e}"),
    }
    result
}
