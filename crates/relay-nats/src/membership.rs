//! Which nodes announced that they left. Every transport listens on one
//! cluster-wide subject (`<prefix>.nodes`) where a node announces itself
//! when it attaches and says goodbye when it closes; a send to a node that
//! said goodbye (and did not come back) is refused as unreachable.
//!
//! A node that crashes says nothing: sends to it are published and lost
//! (at-most-once), which `docs/guide/distributed.md` states.

use std::collections::HashSet;
use std::sync::Mutex;

/// An announcement: one byte (1 up, 0 down) and the node number.
pub(crate) fn announcement(node: u32, up: bool) -> Vec<u8> {
    let mut out = vec![u8::from(up)];
    out.extend_from_slice(&node.to_be_bytes());
    out
}

/// Reads an announcement: `(node, up)`.
pub(crate) fn read_announcement(bytes: &[u8]) -> Option<(u32, bool)> {
    match bytes {
        [up @ (0 | 1), a, b, c, d] => Some((u32::from_be_bytes([*a, *b, *c, *d]), *up == 1)),
        _ => None,
    }
}

/// The nodes known to have left.
#[derive(Debug, Default)]
pub(crate) struct Departed(Mutex<HashSet<u32>>);

impl Departed {
    pub(crate) fn contains(&self, node: u32) -> bool {
        self.lock().contains(&node)
    }

    /// Applies an announcement; returns whether it changed anything.
    pub(crate) fn apply(&self, node: u32, up: bool) -> bool {
        let mut set = self.lock();
        if up {
            set.remove(&node)
        } else {
            set.insert(node)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<u32>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_junk_is_ignored() {
        assert_eq!(read_announcement(&announcement(7, true)), Some((7, true)));
        assert_eq!(read_announcement(&announcement(9, false)), Some((9, false)));
        assert_eq!(read_announcement(b"hello"), None);
        assert_eq!(read_announcement(&[1, 0]), None);
    }

    #[test]
    fn a_node_that_comes_back_is_reachable_again() {
        let departed = Departed::default();
        assert!(departed.apply(3, false));
        assert!(departed.contains(3));
        assert!(departed.apply(3, true));
        assert!(!departed.contains(3));
    }
}
