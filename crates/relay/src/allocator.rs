//! Handing out fresh PIDs on one node, each exactly once, from any thread.

use std::error::Error;
use std::fmt;

use crate::sync::{AtomicU64, Ordering};
use crate::Pid;

/// Hands out fresh PIDs on one node, each exactly once, from any thread.
///
/// Ids are consecutive, starting at 1 for [`PidAllocator::new`] (id 0 is left
/// for a caller that wants a fixed PID, for example the sender of messages
/// from outside any process) or at the first id given to
/// [`PidAllocator::starting_at`]. Allocation is one atomic read-modify-write;
/// the id `u64::MAX` is never handed out, and once the ids run out every call
/// returns [`PidsExhausted`] instead of wrapping around to a PID already in
/// use.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::remote::PidAllocator;
///
/// let pids = PidAllocator::new(Pid::LOCAL_NODE);
/// let a = pids.allocate()?;
/// let b = pids.allocate()?;
/// assert_eq!(a, Pid::local(1));
/// assert_eq!(b, Pid::local(2));
/// # Ok::<(), sched::remote::PidsExhausted>(())
/// ```
#[derive(Debug)]
pub struct PidAllocator {
    node: u32,
    next: AtomicU64,
}

impl PidAllocator {
    /// An allocator for node `node` whose first id is 1.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::remote::PidAllocator;
    ///
    /// let pids = PidAllocator::new(3);
    /// assert_eq!(pids.allocate(), Ok(Pid::new(3, 1)));
    /// ```
    pub fn new(node: u32) -> Self {
        Self::starting_at(node, 1)
    }

    /// An allocator for node `node` whose first id is `first`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::remote::{PidAllocator, PidsExhausted};
    ///
    /// let pids = PidAllocator::starting_at(0, u64::MAX - 1);
    /// assert_eq!(pids.allocate(), Ok(Pid::local(u64::MAX - 1)));
    /// assert_eq!(pids.allocate(), Err(PidsExhausted { node: 0 }));
    /// ```
    pub fn starting_at(node: u32, first: u64) -> Self {
        PidAllocator {
            node,
            next: AtomicU64::new(first),
        }
    }

    /// The node whose PIDs this allocator hands out.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::remote::PidAllocator;
    ///
    /// assert_eq!(PidAllocator::new(9).node(), 9);
    /// ```
    pub fn node(&self) -> u32 {
        self.node
    }

    /// A PID no earlier call on this allocator has returned.
    ///
    /// # Errors
    ///
    /// [`PidsExhausted`] once every id up to `u64::MAX - 1` has been handed
    /// out.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::remote::PidAllocator;
    /// use std::collections::HashSet;
    /// use std::sync::Arc;
    ///
    /// let pids = Arc::new(PidAllocator::new(0));
    /// let threads: Vec<_> = (0..2)
    ///     .map(|_| {
    ///         let pids = Arc::clone(&pids);
    ///         std::thread::spawn(move || {
    ///             (0..100).map(|_| pids.allocate().unwrap()).collect::<Vec<_>>()
    ///         })
    ///     })
    ///     .collect();
    /// let mut seen = HashSet::new();
    /// for thread in threads {
    ///     for pid in thread.join().unwrap() {
    ///         assert!(seen.insert(pid), "{pid} handed out twice");
    ///     }
    /// }
    /// assert_eq!(seen.len(), 200);
    /// ```
    pub fn allocate(&self) -> Result<Pid, PidsExhausted> {
        // Uniqueness needs only the atomicity of the read-modify-write, not
        // any ordering with other memory, hence Relaxed. `checked_add` stops
        // the counter at u64::MAX instead of wrapping to ids in use.
        self.next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                next.checked_add(1)
            })
            .map(|id| Pid::new(self.node, id))
            .map_err(|_| PidsExhausted { node: self.node })
    }
}

/// A [`PidAllocator`] has handed out every id it can.
///
/// # Examples
///
/// ```
/// use sched::remote::{PidAllocator, PidsExhausted};
///
/// let pids = PidAllocator::starting_at(1, u64::MAX);
/// let err = pids.allocate().unwrap_err();
/// assert_eq!(err, PidsExhausted { node: 1 });
/// assert_eq!(err.to_string(), "no PIDs left to allocate on node 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PidsExhausted {
    /// The node whose ids ran out.
    pub node: u32,
}

impl fmt::Display for PidsExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no PIDs left to allocate on node {}", self.node)
    }
}

impl Error for PidsExhausted {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn allocator_counts_up_and_stops_before_wrapping() {
        let pids = PidAllocator::starting_at(7, u64::MAX - 2);
        assert_eq!(pids.node(), 7);
        assert_eq!(pids.allocate(), Ok(Pid::new(7, u64::MAX - 2)));
        assert_eq!(pids.allocate(), Ok(Pid::new(7, u64::MAX - 1)));
        assert_eq!(pids.allocate(), Err(PidsExhausted { node: 7 }));
        assert_eq!(pids.allocate(), Err(PidsExhausted { node: 7 }));
    }

    #[test]
    fn allocator_starts_at_one() {
        let pids = PidAllocator::new(Pid::LOCAL_NODE);
        assert_eq!(pids.allocate(), Ok(Pid::local(1)));
        assert_eq!(pids.allocate(), Ok(Pid::local(2)));
    }
}
