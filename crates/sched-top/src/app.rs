//! The program's state: the connection's status and the latest view.

use std::time::Duration;

use sched::live::Snapshot;

use crate::fetch::Update;
use crate::view::{view, View};

/// The connection as the header shows it.
///
/// # Examples
///
/// ```
/// use sched_top::app::Status;
///
/// assert_eq!(Status::Connecting.to_string(), "connecting");
/// assert_eq!(Status::Disconnected("refused".into()).to_string(), "disconnected, retrying (refused)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No answer yet.
    Connecting,
    /// The last request was answered.
    Connected,
    /// The connection failed or dropped (why); retrying.
    Disconnected(String),
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Connecting => f.write_str("connecting"),
            Status::Connected => f.write_str("connected"),
            Status::Disconnected(why) => write!(f, "disconnected, retrying ({why})"),
        }
    }
}

/// What [`render`](crate::ui::render) draws.
///
/// # Examples
///
/// ```
/// let app = sched_top::app::App::new("127.0.0.1:7207".into(), std::time::Duration::from_secs(1));
/// assert!(app.screen.view.is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Screen {
    /// The endpoint's address, as given.
    pub addr: String,
    /// The refresh interval.
    pub interval: Duration,
    /// The connection.
    pub status: Status,
    /// The latest view; kept (and shown as stale) while disconnected.
    pub view: Option<View>,
}

/// The state: the screen, and the previous snapshot for rates.
///
/// # Examples
///
/// ```
/// use sched_top::app::{App, Status};
/// use sched_top::fetch::Update;
///
/// let mut app = App::new("127.0.0.1:7207".into(), std::time::Duration::from_secs(1));
/// app.update(Update::Snapshot(Box::default()));
/// assert_eq!(app.screen.status, Status::Connected);
/// assert!(app.screen.view.is_some());
/// ```
#[derive(Debug)]
pub struct App {
    /// What to draw.
    pub screen: Screen,
    previous: Option<Snapshot>,
}

impl App {
    /// Nothing received yet.
    ///
    /// # Examples
    ///
    /// See [`App`].
    pub fn new(addr: String, interval: Duration) -> App {
        App {
            screen: Screen {
                addr,
                interval,
                status: Status::Connecting,
                view: None,
            },
            previous: None,
        }
    }

    /// Takes in what the fetching thread reported. A disconnection forgets
    /// the previous snapshot: the next one comes from a new connection,
    /// and rates across the two would be wrong.
    ///
    /// # Examples
    ///
    /// See [`App`].
    pub fn update(&mut self, update: Update) {
        match update {
            Update::Snapshot(snapshot) => {
                self.screen.view = Some(view(self.previous.as_ref(), &snapshot));
                self.screen.status = Status::Connected;
                self.previous = Some(*snapshot);
            }
            Update::Disconnected(why) => {
                self.screen.status = Status::Disconnected(why);
                self.previous = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sched::live::WorkerSnapshot;

    fn snapshot(elapsed_ms: u64, steps: u64) -> Box<Snapshot> {
        let mut s = Snapshot::default();
        s.elapsed_ns = elapsed_ms * 1_000_000;
        let mut w = WorkerSnapshot::default();
        w.steps = steps;
        s.workers.push(w);
        Box::new(s)
    }

    #[test]
    fn rates_need_two_snapshots_of_one_connection() {
        let mut app = App::new("x:1".into(), Duration::from_secs(1));
        app.update(Update::Snapshot(snapshot(1_000, 100)));
        assert_eq!(app.screen.view.as_ref().unwrap().header.steps_per_sec, None);
        app.update(Update::Snapshot(snapshot(2_000, 300)));
        assert_eq!(
            app.screen.view.as_ref().unwrap().header.steps_per_sec,
            Some(200.0)
        );

        app.update(Update::Disconnected("reset".into()));
        assert_eq!(app.screen.status, Status::Disconnected("reset".into()));
        assert!(app.screen.view.is_some(), "the last view stays on screen");
        app.update(Update::Snapshot(snapshot(3_000, 400)));
        assert_eq!(app.screen.status, Status::Connected);
        assert_eq!(app.screen.view.as_ref().unwrap().header.steps_per_sec, None);
    }
}
