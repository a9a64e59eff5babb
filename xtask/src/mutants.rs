//! `cargo xtask mutants [NAME]`: checks that the tests catch known bugs.
//!
//! Each entry of [`MUTATIONS`] names a bug we once had or a step a proof
//! relies on, the exact source text it changes, and the command that must
//! catch it. For each one (or only the one named), the command first runs
//! on the unmutated source (a catcher that already fails proves nothing),
//! then the mutation is applied, the command runs again, and the file is
//! restored. A mutation *survives* if the command still passes; the run
//! exits non-zero if any survived or could not be checked.
//!
//! Mutations are applied to the working tree: other builds of the same
//! crates meanwhile see the mutated code (run it in a checkout of its own
//! when others share the tree). The file is restored by a guard, so also on
//! errors and panics. In case
//! the process is killed (ctrl-c), the original is first saved next to the
//! file as `<file>.mutant-orig`; the next run restores any such file before
//! it starts.
//!
//! Command output goes to `<target>/mutants/<name>.log` (and
//! `baseline-<n>.log`), where `<target>` is `CARGO_TARGET_DIR` or the
//! workspace's `target`.
//!
//! To add a mutation, add an entry to [`MUTATIONS`]; a new kind of command
//! is a new [`Catcher`] constant.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::workspace::root;

/// The command that must catch a mutation: `cargo` with `args`, the
/// environment `env`, and a target directory of its own (a subdirectory of
/// the target directory) when its flags would otherwise rebuild the normal
/// build.
#[derive(Debug, PartialEq)]
pub(crate) struct Catcher {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    target_subdir: Option<&'static str>,
}

/// One deliberate bug.
#[derive(Debug)]
pub(crate) struct Mutation {
    /// What `cargo xtask mutants NAME` selects it by.
    name: &'static str,
    /// The file it changes, relative to the workspace root.
    file: &'static str,
    /// Text that must occur exactly once in the file.
    original: &'static str,
    /// What it is replaced with.
    replacement: &'static str,
    /// The command that must fail once the mutation is applied.
    catcher: &'static Catcher,
}

mod catalogue;
pub(crate) use catalogue::MUTATIONS;

/// A command that has not finished by then counts as failed (a mutation
/// that makes the code hang is caught); generous, for loom on 2 cores.
const TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// How a catcher's run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    Passed,
    Failed,
    TimedOut,
}

/// Runs every mutation, or the one named, and prints the table.
pub(crate) fn mutants(named: Option<&str>) -> Result<(), String> {
    let root = root();
    restore_leftovers(&root)?;
    let selected: Vec<&Mutation> = match named {
        None => MUTATIONS.iter().collect(),
        Some(name) => {
            let found: Vec<_> = MUTATIONS.iter().filter(|m| m.name == name).collect();
            if found.is_empty() {
                let known: Vec<&str> = MUTATIONS.iter().map(|m| m.name).collect();
                return Err(format!(
                    "no mutation `{name}` (known: {})",
                    known.join(", ")
                ));
            }
            found
        }
    };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let logs = target.join("mutants");
    fs::create_dir_all(&logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;

    // Each catcher once on the unmutated source.
    let mut baselines: Vec<(&Catcher, Outcome)> = Vec::new();
    for mutation in &selected {
        if baselines.iter().any(|(c, _)| *c == mutation.catcher) {
            continue;
        }
        let log = logs.join(format!("baseline-{}.log", baselines.len() + 1));
        eprintln!("mutants: baseline `{}`", shown(mutation.catcher));
        let outcome = run_catcher(mutation.catcher, &root, &target, &log)?;
        if outcome != Outcome::Passed {
            eprintln!("mutants: the baseline failed; see {}", log.display());
        }
        baselines.push((mutation.catcher, outcome));
    }

    let mut rows = Vec::new();
    for mutation in &selected {
        let baseline = baselines
            .iter()
            .find(|(c, _)| *c == mutation.catcher)
            .map(|(_, o)| *o);
        let verdict = if baseline != Some(Outcome::Passed) {
            "NOT CHECKED (catcher fails unmutated)".to_string()
        } else {
            let log = logs.join(format!("{}.log", mutation.name));
            eprintln!("mutants: {} ({})", mutation.name, mutation.file);
            let started = Instant::now();
            let build_log = logs.join(format!("{}.build.log", mutation.name));
            let (built, outcome) = {
                let _applied = Applied::apply(&root, mutation)?;
                // A mutation that does not compile proves nothing: build
                // first, then run.
                let args = build_args(mutation.catcher);
                match run_cargo(mutation.catcher, &args, &root, &target, &build_log)? {
                    Outcome::Passed => (true, run_catcher(mutation.catcher, &root, &target, &log)?),
                    other => (false, other),
                }
            };
            let secs = started.elapsed().as_secs();
            match outcome {
                _ if !built => format!("DOES NOT BUILD (fix the table; {})", build_log.display()),
                Outcome::Failed => format!("caught ({secs} s)"),
                Outcome::TimedOut => format!("caught: timed out ({secs} s)"),
                Outcome::Passed => format!("SURVIVED ({secs} s; {})", log.display()),
            }
        };
        rows.push((mutation, verdict));
    }

    println!("\n| mutation | file | caught by | result |");
    println!("|---|---|---|---|");
    for (mutation, verdict) in &rows {
        println!(
            "| {} | {} | `{}` | {} |",
            mutation.name,
            mutation.file,
            shown(mutation.catcher),
            verdict
        );
    }
    let bad = rows
        .iter()
        .filter(|(_, v)| !v.starts_with("caught"))
        .count();
    if bad == 0 {
        Ok(())
    } else {
        Err(format!(
            "{bad} of {} mutations survived or were not checked",
            rows.len()
        ))
    }
}

/// The catcher as a command line.
fn shown(catcher: &Catcher) -> String {
    let env: String = catcher
        .env
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\" "))
        .collect();
    format!("{env}cargo {}", catcher.args.join(" "))
}

/// Runs a catcher with its output in `log`, killing it after [`TIMEOUT`].
fn run_catcher(
    catcher: &Catcher,
    root: &Path,
    target: &Path,
    log: &Path,
) -> Result<Outcome, String> {
    run_cargo(catcher, catcher.args, root, target, log)
}

/// The catcher's build step: its arguments up to `--`, plus `--no-run`
/// (every catcher is a `cargo test` or a `cargo miri test`).
fn build_args(catcher: &Catcher) -> Vec<&'static str> {
    let mut args: Vec<&'static str> = catcher
        .args
        .iter()
        .copied()
        .take_while(|a| *a != "--")
        .collect();
    args.push("--no-run");
    args
}

/// Runs `cargo args` with the catcher's environment and target directory,
/// its output in `log`, killing it after [`TIMEOUT`].
fn run_cargo(
    catcher: &Catcher,
    args: &[&str],
    root: &Path,
    target: &Path,
    log: &Path,
) -> Result<Outcome, String> {
    let out = File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let target = match catcher.target_subdir {
        Some(sub) => target.join(sub),
        None => target.to_path_buf(),
    };
    let mut command = Command::new("cargo");
    command
        .args(args)
        .envs(catcher.env.iter().copied())
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // A group of its own, so that a timeout kills the test binaries too.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not start cargo: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(Outcome::Passed),
            Ok(Some(_)) => return Ok(Outcome::Failed),
            Ok(None) if started.elapsed() > TIMEOUT => {
                kill_group(&mut child);
                return Ok(Outcome::TimedOut);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(format!("waiting for cargo: {e}")),
        }
    }
}

/// Kills a catcher and everything it started.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The copy of a file's original text kept while it is mutated.
fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".mutant-orig");
    PathBuf::from(name)
}

/// Restores files left mutated by a run that was killed.
fn restore_leftovers(root: &Path) -> Result<(), String> {
    for mutation in MUTATIONS {
        let path = root.join(mutation.file);
        let backup = backup_of(&path);
        if backup.is_file() {
            eprintln!(
                "mutants: restoring {} from an interrupted run",
                mutation.file
            );
            fs::rename(&backup, &path).map_err(|e| format!("restoring {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A mutation applied to its file; dropping it restores the original.
struct Applied {
    path: PathBuf,
    original: String,
}

impl Applied {
    fn apply(root: &Path, mutation: &Mutation) -> Result<Applied, String> {
        let path = root.join(mutation.file);
        let original =
            fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let found = original.matches(mutation.original).count();
        if found != 1 {
            return Err(format!(
                "mutation `{}`: its original text occurs {found} times in {} (must be once); \
                 update the table",
                mutation.name, mutation.file
            ));
        }
        let backup = backup_of(&path);
        fs::write(&backup, &original).map_err(|e| format!("writing {}: {e}", backup.display()))?;
        // From here on the guard restores the file, whatever happens.
        let applied = Applied { path, original };
        let mutated = applied
            .original
            .replacen(mutation.original, mutation.replacement, 1);
        fs::write(&applied.path, mutated)
            .map_err(|e| format!("writing {}: {e}", applied.path.display()))?;
        Ok(applied)
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        match fs::write(&self.path, &self.original) {
            Ok(()) => {
                let _ = fs::remove_file(backup_of(&self.path));
            }
            Err(e) => eprintln!(
                "mutants: could not restore {} ({e}); its original is in {}",
                self.path.display(),
                backup_of(&self.path).display()
            ),
        }
    }
}

#[cfg(test)]
mod ci_entries {
    use super::MUTATIONS;

    #[test]
    fn every_mutation_s_original_text_occurs_once_in_its_file() {
        // A mutation whose text drifted away from the source cannot be
        // applied: the run reports it, but only when it is run.
        let root = crate::workspace::root();
        for m in MUTATIONS {
            let text = std::fs::read_to_string(root.join(m.file))
                .unwrap_or_else(|e| panic!("{}: {}: {e}", m.name, m.file));
            assert_eq!(
                text.matches(m.original).count(),
                1,
                "{}: its original text should occur once in {}",
                m.name,
                m.file
            );
        }
    }

    #[test]
    fn every_mutation_ci_checks_is_in_the_table() {
        for name in crate::steps::CI_MUTANTS {
            assert!(
                MUTATIONS.iter().any(|m| m.name == *name),
                "CI checks `{name}`, which the table does not hold"
            );
        }
    }
}
