//! `sched-top [ADDR] [--interval-ms N] [--top N]`: a live view of a
//! running scheduler. See the library's documentation and
//! `docs/guide/live-view.md`.

use std::io::Write;
use std::process::ExitCode;
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::{cursor, execute};
use sched_top::app::App;
use sched_top::cli::{self, Args, Parsed};
use sched_top::fetch::Fetcher;

/// Puts the terminal back (raw mode off, main screen, cursor shown) when
/// dropped: on return, on error, and while a panic unwinds (ratatui's
/// panic hook does the same before the message is printed).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
        let mut out = std::io::stdout();
        let _ = execute!(out, cursor::Show);
        let _ = out.flush();
    }
}

fn run(args: Args) -> std::io::Result<()> {
    let fetcher = Fetcher::start(args.addr.clone(), args.interval, args.top);
    let mut app = App::new(args.addr, args.interval);
    // Armed first: if setting the terminal up fails half-way (raw mode on,
    // no alternate screen), it is still put back.
    let _restore = Restore;
    let mut terminal = ratatui::try_init()?;
    loop {
        loop {
            match fetcher.updates.try_recv() {
                Ok(update) => app.update(update),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(std::io::Error::other("the fetching thread ended"))
                }
            }
        }
        terminal.draw(|frame| sched_top::ui::render(frame, &app.screen))?;
        if event::poll(Duration::from_millis(100))? {
            if let Event::Key(key) = event::read()? {
                if sched_top::ui::quits(&key) {
                    return Ok(());
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let args = match cli::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            println!("sched-top {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprint!("sched-top: {why}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sched-top: {e}");
            ExitCode::FAILURE
        }
    }
}
