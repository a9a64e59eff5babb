//! `sched-top` in a real terminal: tmux runs it against the `live` example
//! of the `sched` crate, its screen is captured and read, `q` quits, and
//! the terminal is checked to be back in its normal state.
//!
//! tmux must be installed (`apt-get install -y tmux`; `cargo xtask ci`
//! installs it). Without it the test is skipped with a loud message,
//! except under `CI` (set and not `false`), where it fails.
//!
//! `SCHED_TOP_CAPTURE=<file>` writes the captured screen there (the one in
//! `docs/guide/live-view.md` was made so).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;
/// How long the screen may take to show figures (the example's first
/// backlog and long step take a second or two; a loaded CI machine more).
const SETTLE: Duration = Duration::from_secs(60);

fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server of our own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    /// Whether the session still runs.
    fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["-L", &self.socket, "has-session", "-t", "top"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Waits up to 10 s for a line of the screen that starts with
    /// `prefix` (the output, not the command line that printed it, which
    /// starts with the prompt); returns it and the screen.
    fn wait_for_line(&self, prefix: &str, what: &str) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen = self.screen();
            if let Some(line) = screen.lines().find(|l| l.starts_with(prefix)) {
                return (line.to_string(), screen);
            }
            assert!(Instant::now() < deadline, "{what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn format(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", "top", format])
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// The example, killed on drop, and the read end of its output (kept
/// open: the example would fail printing to a closed pipe).
struct Example(Child, BufReader<std::process::ChildStdout>);

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Builds the `live` example of the `sched` crate into the target
/// directory this test was built in, with the same profile, and returns
/// its path.
fn build_example(sched_top: &Path) -> PathBuf {
    let profile_dir = sched_top.parent().expect("the binary's directory");
    let target_dir = profile_dir.parent().expect("the target directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // The workspace's libraries with all their features, as `cargo
        // test --workspace --all-features` (CI) built them: only the
        // example is compiled here. `-p sched --features live` would
        // rebuild the engine with another feature set (a minute on CI).
        .args(["build", "--quiet", "--workspace", "--all-features"])
        .args(["--example", "live", "--message-format", "json"])
        .arg("--target-dir")
        .arg(target_dir);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            command.arg("--release");
        }
        Some(other) => {
            command.args(["--profile", other]);
        }
    }
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "cargo build --example live failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "live")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the example's executable")
}

/// Starts the example on a port of the system's choosing and reads the
/// address it printed.
fn start_example(path: &Path) -> (Example, String) {
    let mut child = Command::new(path)
        .args(["127.0.0.1:0", "--seconds", "300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the live example");
    let stdout = child.stdout.take().expect("piped");
    let mut example = Example(child, BufReader::new(stdout));
    let mut first = String::new();
    example
        .1
        .read_line(&mut first)
        .expect("read the example's address");
    let addr = first
        .trim()
        .strip_prefix("live endpoint on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    (example, addr)
}

/// The columns of `screen` under the panel whose title starts at the
/// position of `title` on its line, one string per line below it.
fn panel(screen: &str, title: &str, width: usize) -> Vec<String> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let (row, col) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let text: String = l.iter().collect();
            text.find(title)
                .map(|byte| (i, text[..byte].chars().count()))
        })
        .unwrap_or_else(|| panic!("no panel {title:?} in\n{screen}"));
    lines[row + 1..]
        .iter()
        .map(|l| l.iter().skip(col).take(width).collect())
        .collect()
}

/// Figures on one line, in order (`2.00ms`, `12.5k`, `25%` count).
fn figures(line: &str) -> Vec<&str> {
    line.split(['│', ' '])
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

fn nonzero(figure: &str) -> bool {
    figure.chars().any(|c| ('1'..='9').contains(&c))
}

/// What a screen showing real figures has; `Err` says what is missing.
fn check(screen: &str, mailbox_reported: bool) -> Result<(), String> {
    if !screen.contains("  connected  ") {
        return Err("not connected".into());
    }
    // Two worker rows with a step rate.
    let workers = panel(screen, "┌ workers", 58);
    for index in ["0", "1"] {
        let row = workers
            .iter()
            .find(|l| l.starts_with(&format!("│{index} ")))
            .ok_or(format!("no row for worker {index}"))?;
        let f = figures(row);
        // worker, steps/s, queue, parks/s, stolen, steps (busy is `-` or a %).
        if f.len() < 5 || !f.iter().any(|x| nonzero(x)) {
            return Err(format!("worker {index} has no figures yet: {row}"));
        }
    }
    // The step histogram with non-zero quantiles.
    let histograms = panel(screen, "┌ histograms", 58);
    let step = histograms
        .iter()
        .find(|l| l.starts_with("│step "))
        .ok_or("no step histogram")?;
    let f = figures(step);
    if f.len() != 5 || !f.iter().all(|x| nonzero(x)) {
        return Err(format!("step histogram not filled: {step}"));
    }
    if !histograms.iter().any(|l| l.starts_with("│timer_lateness")) {
        return Err("no timer lateness histogram".into());
    }
    // Rates in the top list, with a hot process in it.
    let top = panel(screen, "┌ top by steps/s", 40);
    if !top.iter().take(6).any(|l| l.contains("hot-")) {
        return Err("no hot process at the top by steps/s".into());
    }
    // The growing mailbox first in its table, by name.
    let mailbox = panel(screen, "┌ top by mailbox depth", 40);
    if mailbox_reported {
        let first = &mailbox[1];
        if !first.contains("backlog") || !figures(first).iter().any(|x| nonzero(x)) {
            return Err(format!("backlog is not first by mailbox depth: {first}"));
        }
    } else if !mailbox[0].contains("not reported by this engine") {
        return Err(format!("the mailbox table says neither: {}", mailbox[0]));
    }
    Ok(())
}

#[test]
fn sched_top_shows_a_running_scheduler_in_tmux_and_quits_cleanly() {
    if !tmux_available() {
        if on_ci() {
            panic!("tmux is not installed, and CI is set: install it (apt-get install -y tmux)");
        }
        eprintln!("\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        eprintln!("SKIPPED: sched-top tmux test: tmux is not installed");
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n");
        return;
    }
    let sched_top = PathBuf::from(env!("CARGO_BIN_EXE_sched-top"));
    let example_path = build_example(&sched_top);
    let (_example, addr) = start_example(&example_path);

    // Whether this engine reports mailbox depths, straight from the
    // endpoint: the mailbox table is checked by name when it does.
    let mut client = sched::live::Client::connect(addr.parse().unwrap(), Duration::from_secs(10))
        .expect("connect to the example");
    let mailbox_reported = client.snapshot(1).unwrap().reports_mailbox_depth;
    drop(client);
    if !mailbox_reported {
        eprintln!(
            "note: this engine does not report mailbox depths; the mailbox table is checked \
             to say so instead of naming the backlog"
        );
    }

    let tmux = Tmux {
        socket: format!("sched-top-test-{}", std::process::id()),
    };
    let (width, height) = (WIDTH.to_string(), HEIGHT.to_string());
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        &width,
        "-y",
        &height,
        "env PS1='$ ' TERM=xterm-256color bash --norc --noprofile -i",
    ]);
    let command = format!(
        "'{}' {addr} --interval-ms 300; echo sched-top-exit=$?",
        sched_top.display()
    );
    tmux.run(&["send-keys", "-t", "top", "-l", &command]);
    tmux.run(&["send-keys", "-t", "top", "Enter"]);

    let started = Instant::now();
    let mut screen;
    loop {
        std::thread::sleep(Duration::from_millis(250));
        screen = tmux.screen();
        match check(&screen, mailbox_reported) {
            Ok(()) => break,
            Err(missing) if started.elapsed() > SETTLE => {
                panic!("after {SETTLE:?}: {missing}\n{screen}")
            }
            Err(_) => {}
        }
    }
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "1",
        "sched-top uses the alternate screen"
    );
    println!("{screen}");
    if let Ok(path) = std::env::var("SCHED_TOP_CAPTURE") {
        std::fs::write(&path, &screen).expect("write the capture");
    }

    // `q` quits, with status 0, and the terminal is as it was: main
    // screen, cursor shown, line discipline back (not raw).
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let (exit, screen) = tmux.wait_for_line("sched-top-exit=", "sched-top did not exit on q");
    assert_eq!(exit.trim(), "sched-top-exit=0", "{screen}");
    assert!(
        !screen.contains("top by steps"),
        "the TUI is still on screen:\n{screen}"
    );
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "0",
        "left the alternate screen"
    );
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "the cursor is shown");
    tmux.run(&[
        "send-keys",
        "-t",
        "top",
        "-l",
        "case \"$(stty -a)\" in *-icanon*|*-echo\\ *) echo tty=raw;; *) echo tty=cooked;; esac",
    ]);
    tmux.run(&["send-keys", "-t", "top", "Enter"]);
    let (tty, screen) = tmux.wait_for_line("tty=", "the shell did not answer");
    assert_eq!(
        tty.trim(),
        "tty=cooked",
        "the terminal was left raw:\n{screen}"
    );
}

#[test]
fn sched_top_says_disconnected_retries_and_reconnects() {
    if !tmux_available() {
        assert!(!on_ci(), "tmux is not installed, and CI is set");
        eprintln!("SKIPPED: sched-top tmux test: tmux is not installed");
        return;
    }
    // A port nobody listens on yet: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmux = Tmux {
        socket: format!("sched-top-test-down-{}", std::process::id()),
    };
    let command = format!(
        "{} 127.0.0.1:{port} --interval-ms 200",
        env!("CARGO_BIN_EXE_sched-top")
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = tmux.screen();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what:?} on screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for("disconnected, retrying");

    // An endpoint appears on that port, with figures of a library beside
    // the engine's: it connects, and they have a panel.
    use sched::live::{Figure, Unit};
    let records = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = std::sync::Arc::clone(&records);
    let scheduler = std::sync::Arc::new(sched::Scheduler::builder().workers(3).build());
    let endpoint = sched::live::serve_with(
        std::sync::Arc::clone(&scheduler),
        ("127.0.0.1", port),
        move || {
            // Grows by 100 a snapshot: a rate on screen from the second on.
            let records = counted.fetch_add(100, std::sync::atomic::Ordering::Relaxed) + 100;
            vec![
                Figure::counter("journal", "records", records as f64, Unit::Count),
                Figure::gauge("journal", "store size", 1_572_864.0, Unit::Bytes),
                Figure::gauge("journal", "sync p99", 0.0042, Unit::Seconds),
            ]
        },
    )
    .expect("serve on the released port");
    let screen = wait_for("  connected  ");
    assert!(wait_for("workers 3 ").contains("workers 3 "), "{screen}");
    let screen = wait_for("┌ journal ");
    let row = |name: &str| {
        screen
            .lines()
            .find(|l| l.starts_with(&format!("│{name} ")))
            .unwrap_or_else(|| panic!("no {name} row:\n{screen}"))
            .to_string()
    };
    assert!(row("store size").contains("1.50MiB"), "{screen}");
    assert!(row("sync p99").contains("4.20ms"), "{screen}");
    assert!(row("records").contains("00 "), "{screen}");

    // It goes away: the last figures stay, marked stale, and it retries.
    endpoint.stop();
    let screen = wait_for("disconnected, retrying");
    assert!(screen.contains("from before the disconnection"), "{screen}");

    // Esc quits: the session (whose only command it was) ends.
    tmux.run(&["send-keys", "-t", "top", "Escape"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.alive() {
        assert!(Instant::now() < deadline, "sched-top did not quit on Esc");
        std::thread::sleep(Duration::from_millis(100));
    }
}
