//! A timer's public identity: what cancels it and what its event carries.
//! The wheels that hold timers are in `timer/`.

use std::fmt;

/// Identifies a pending timer, to cancel it.
///
/// Returned by `set_timer`, `set_timer_at` and `send_after` (on
/// [`Output`](crate::Output)) and by the
/// [`Context`](crate::Context)'s `send_after`; carried by
/// [`Event::Timer`](crate::Event::Timer). An id is never reused for
/// another timer, so cancelling one that has fired does nothing.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use std::time::Duration;
///
/// fn arm(out: &mut Output<'_>) -> TimerId {
///     out.set_timer(Duration::from_millis(50), Tag(1))
/// }
/// fn is_mine(event: &Event, timer: TimerId) -> bool {
///     matches!(event, Event::Timer { id, .. } if *id == timer)
/// }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    pub(crate) shard: u32,
    pub(crate) key: u64,
}

impl fmt::Debug for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimerId({}:{:#x})", self.shard, self.key)
    }
}
