//! Knowing that the process a completer works for has gone: the
//! [`Abandoned`] future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::record::state::{state_of, COMPLETE, KILL};
use crate::record::Record;
use crate::record::RecordRef;

/// Whether a process has ended, or been marked to be ended by force.
pub(crate) fn ended_or_killed(record: &Record) -> bool {
    let word = record.state.load();
    state_of(word) == COMPLETE || word & KILL != 0
}

/// The future returned by [`Completer::abandoned`](crate::Completer::abandoned): resolves once the
/// process the completer works for has ended or been terminated.
///
/// It is `Send`, `'static` and [`Unpin`]; polling it again after it
/// resolved resolves again at once.
///
/// # Examples
///
/// ```
/// use sched::command::{Abandoned, Command, Completer, Rejected};
///
/// // Blocking work on a thread of its own, and a tokio task that notes when
/// // the process goes away. The future is made before `done` moves.
/// fn handler(tokio: tokio::runtime::Handle) -> impl Fn(Command, Completer) -> Result<(), Rejected> {
///     move |_cmd, done| {
///         let gone: Abandoned = done.abandoned();
///         let pid = done.pid();
///         tokio.spawn(async move {
///             gone.await;
///             println!("{pid} has ended; whatever still works for it can stop");
///         });
///         std::thread::spawn(move || {
///             let _ = done.complete(Box::new("result"));
///         });
///         Ok(())
///     }
/// }
/// # let _ = handler;
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Abandoned {
    pub(super) record: RecordRef,
    /// The waker's entry in the record's slot, from the first pending poll.
    pub(super) key: Option<u64>,
}

impl Future for Abandoned {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Cheap first, and it covers a terminate that the worker has not
        // acted on yet. The slot's check under its lock is the one no wake
        // can slip past: `set` marks the end and takes the wakers there.
        if ended_or_killed(&self.record) {
            return Poll::Ready(());
        }
        let this = &mut *self;
        let (ended, displaced) =
            this.record
                .slot
                .watch(&mut this.key, cx.waker(), RecordRef::spare(&this.record));
        drop(displaced);
        if ended {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            drop(
                self.record
                    .slot
                    .unwatch(key, RecordRef::spare(&self.record)),
            );
        }
    }
}

impl fmt::Debug for Abandoned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Abandoned")
            .field("pid", &self.record.pid)
            .field("abandoned", &ended_or_killed(&self.record))
            .finish()
    }
}
