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
/// Each step's time is kept for [`step_times`].
pub(crate) fn step(name: &str, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    eprintln!("\n==> {name}");
    let start = Instant::now();
    let result = body();
    let secs = start.elapsed().as_secs_f64();
    match &result {
        Ok(()) => eprintln!("<== {name}: ok in {secs:.1}s"),
        Err(e) => eprintln!("<== {name}: FAILED in {secs:.1}s: {e}"),
    }
    TIMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((name.to_owned(), secs, result.is_ok()));
    result
}

/// The steps run so far: name, seconds, whether it passed.
static TIMES: std::sync::Mutex<Vec<(String, f64, bool)>> = std::sync::Mutex::new(Vec::new());

/// The steps run so far as a table, slowest first, with their total: what
/// a CI run prints at its end, passed or failed.
pub(crate) fn step_times() -> String {
    let mut times = TIMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    times.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = times.iter().map(|(_, secs, _)| secs).sum();
    let mut table = String::from("step times, slowest first:\n");
    for (name, secs, ok) in &times {
        let mark = if *ok { "" } else { "  FAILED" };
        table.push_str(&format!("  {secs:>7.1}s  {name}{mark}\n"));
    }
    table.push_str(&format!("  {total:>7.1}s  in all\n"));
    table
}
