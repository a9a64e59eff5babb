//! `cargo xtask tsan [CRATE]`: the concurrency tests under ThreadSanitizer.
//!
//! ThreadSanitizer needs the nightly toolchain, and the standard library
//! rebuilt with it (`-Zbuild-std`): a std built without instrumentation
//! hides the synchronisation inside its mutexes, channels and thread joins,
//! and TSAN then reports races that are not there. `--target` is required
//! by `-Zbuild-std`, and it also keeps the sanitizer flags off build
//! scripts and proc macros, which run on the host.
//!
//! crossbeam-epoch and crossbeam-utils (0.9.21 / 0.8.23) notice
//! `-Zsanitizer=thread` in their build scripts and replace the fences TSAN
//! does not model with equivalent acquire loads, so the epoch collector
//! under our deque needs no suppression. Our own code has two `SeqCst`
//! fences, in `sched-core/src/runqueue/sleep.rs`: a store-fence-load handshake
//! between a parking worker and a producer, which guards against a lost
//! wakeup, not against a data race (every location involved is an atomic or
//! sits behind a mutex), so TSAN's blindness to them cannot produce a
//! report there; loom checks that protocol instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cmd::{probe, run};
use crate::workspace::{root, select, Member};

/// Instrument every crate we compile for the target, std included.
const TSAN_RUSTFLAGS: &str = "-Zsanitizer=thread";

/// Reports go to stderr with both stacks of a lock-order inversion; a run
/// with any report exits with status 66 at the end (TSAN's default
/// `exitcode`), which fails the test binary and so the command.
const TSAN_OPTIONS: &str = "second_deadlock_stack=1";

/// Tests left out of the TSAN run, as (crate, test name), each with its
/// reason. None at the moment: `resets_never_let_a_stale_producer_deliver`
/// was left out while `drain_into` kept taking until it found the queue
/// empty (under TSAN its unbounded producer kept the consumer draining for
/// minutes); `drain_into` now takes at most what was claimed when it first
/// looked, and the test runs.
const SKIPPED: &[(&str, &str)] = &[];

/// The test targets of `member` that exercise concurrency, as
/// `cargo test` arguments; empty if it has none. Tests that assert on
/// wall-clock time or on memory use are left out: TSAN slows code down
/// five to fifteen times and multiplies its memory, so they would fail for
/// reasons that have nothing to do with races.
fn tsan_targets(member: &Member) -> Vec<&'static str> {
    match member.name.as_str() {
        // The threaded tests sit beside single-threaded ones in both files;
        // the latter cost little and are kept rather than filtered by name.
        "sched-deque" => vec!["--test", "behaviour", "--test", "properties"],
        "sched-mpsc" => vec!["--test", "threads"],
        // Concurrent sends, registrations and removals through the routing
        // table (dashmap).
        "sched-relay" => vec!["--test", "concurrent_routing"],
        // Besides the stress and engine tests: shutdown racing submissions,
        // idle workers taking from busy workers' `next` slots, and user
        // drops that panic on worker threads.
        "sched-core" => vec![
            "--test",
            "stress",
            "--test",
            "engine",
            "--test",
            "shutdown_races",
            "--test",
            "fairness",
            "--test",
            "hostile_user_code",
        ],
        "sched" => {
            let mut targets = vec!["--test", "api"];
            if has_test(member, "stress") {
                targets.extend(["--test", "stress"]);
            }
            targets
        }
        _ => Vec::new(),
    }
}

/// Whether `member` has an integration test target named `name`, as a
/// single file or as a directory with a `main.rs`.
fn has_test(member: &Member, name: &str) -> bool {
    let tests = member.dir.join("tests");
    tests.join(format!("{name}.rs")).is_file() || tests.join(name).join("main.rs").is_file()
}

/// The nightly toolchain's sysroot.
fn nightly_sysroot() -> Result<PathBuf, String> {
    let out = Command::new("rustc")
        .args(["+nightly", "--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run rustc: {e}"))?;
    if !out.status.success() {
        return Err(
            "the nightly toolchain is not installed (rustup toolchain install nightly)".into(),
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// The host's target triple by `rustc` of `toolchain` (`None`: the
/// default one): what the instrumented build targets, and what names the
/// runner setting of `cargo xtask leak`.
pub(crate) fn host_triple(toolchain: Option<&str>) -> Result<String, String> {
    let mut args = Vec::new();
    if let Some(toolchain) = toolchain {
        args.push(format!("+{toolchain}"));
    }
    args.push("-vV".into());
    let out = Command::new("rustc")
        .args(&args)
        .output()
        .map_err(|e| format!("could not run rustc: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_string)
        .ok_or_else(|| format!("`rustc {}` printed no host triple", args.join(" ")))
}

fn has_rust_src(sysroot: &Path) -> bool {
    sysroot.join("lib/rustlib/src/rust/library/std").is_dir()
}

/// Makes sure nightly and its `rust-src` component (what `-Zbuild-std`
/// compiles) are there, installing the component if it is missing.
fn ensure_build_std() -> Result<(), String> {
    let sysroot = nightly_sysroot()?;
    if has_rust_src(&sysroot) {
        return Ok(());
    }
    run(
        "rustup",
        &["component", "add", "rust-src", "--toolchain", "nightly"],
        &[],
    )
    .map_err(|e| format!("installing rust-src for nightly: {e}"))?;
    if has_rust_src(&sysroot) {
        Ok(())
    } else {
        Err(format!(
            "rust-src is still missing under {} after installing it",
            sysroot.display()
        ))
    }
}

/// Runs the concurrency tests of one crate, or of every crate that has
/// some, under ThreadSanitizer, in `target/tsan`.
pub(crate) fn tsan(named: Option<&str>) -> Result<(), String> {
    let crates = select(named, |m| !tsan_targets(m).is_empty())?;
    if let Some(member) = crates.iter().find(|m| tsan_targets(m).is_empty()) {
        return Err(format!(
            "crate `{}` has no concurrency tests for ThreadSanitizer",
            member.name
        ));
    }
    if !probe("rustc", &["+nightly", "--version"]) {
        return Err(
            "the nightly toolchain is not installed (rustup toolchain install nightly)".into(),
        );
    }
    ensure_build_std()?;
    let host = host_triple(Some("nightly"))?;
    // A separate target directory: the instrumented build shares nothing
    // with the normal one and would otherwise invalidate it.
    let target_dir = root().join("target").join("tsan");
    let target_dir = target_dir.to_string_lossy();
    let options = match std::env::var("TSAN_OPTIONS") {
        Ok(extra) if !extra.trim().is_empty() => format!("{TSAN_OPTIONS} {extra}"),
        _ => TSAN_OPTIONS.to_string(),
    };
    let started = Instant::now();
    for member in &crates {
        let mut args = vec![
            "+nightly",
            "test",
            "-Zbuild-std",
            "--target",
            &host,
            "--package",
            &member.name,
        ];
        args.extend(tsan_targets(member));
        let skipped: Vec<&str> = SKIPPED
            .iter()
            .filter(|(crate_name, _)| *crate_name == member.name)
            .flat_map(|(_, test)| ["--skip", test])
            .collect();
        if !skipped.is_empty() {
            args.push("--");
            args.extend(skipped);
        }
        run(
            "cargo",
            &args,
            &[
                ("RUSTFLAGS", TSAN_RUSTFLAGS),
                ("CARGO_TARGET_DIR", &target_dir),
                ("TSAN_OPTIONS", &options),
                // Symbolising one panic's backtrace takes about 7 s in
                // an instrumented binary, under a global lock; the engine
                // tests panic on purpose inside processes and wait 10 s for
                // their outcomes, so an inherited RUST_BACKTRACE=1 made
                // them time out. TSAN's own reports carry their stacks.
                ("RUST_BACKTRACE", "0"),
            ],
        )?;
    }
    eprintln!(
        "tsan: {} crate(s) clean in {:.0}s",
        crates.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
