//! `sched-top`: a live view of a running `sched` scheduler in the
//! terminal, in the spirit of `top`.
//!
//! It attaches to the endpoint an application serves with
//! `sched::live::serve` (feature `live`), asks it for a snapshot every
//! refresh interval, and shows the engine's totals, its workers (busy %,
//! steps/s, queue lengths, parks/s, steals), its groups when it declares
//! some (weight, share of the step time, ready processes), its histograms,
//! the figures of other libraries when the application serves some
//! (`sched::live::serve_with`: a panel per source, counters with their
//! rate) and the top processes by steps/s, by mailbox depth and by long
//! steps. See `docs/guide/live-view.md` in the repository.
//!
//! The binary is a thin loop around this library: [`fetch`] talks to the
//! endpoint from a thread of its own, [`app::App`] keeps the state,
//! [`view::view`] turns two successive snapshots into what the screen
//! shows (a pure function), and [`ui::render`] draws it.
//!
//! # Examples
//!
//! ```
//! use ratatui::backend::TestBackend;
//! use ratatui::Terminal;
//! use sched_top::app::App;
//! use sched_top::fetch::Update;
//!
//! let mut app = App::new("127.0.0.1:7207".into(), std::time::Duration::from_secs(1));
//! app.update(Update::Disconnected("connection refused".into()));
//! let mut terminal = Terminal::new(TestBackend::new(100, 30))?;
//! terminal.draw(|frame| sched_top::ui::render(frame, &app.screen))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod app;
pub mod cli;
pub mod fetch;
pub mod ui;
pub mod view;
