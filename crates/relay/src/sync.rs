//! The synchronisation shim.
//!
//! Everything concurrent in this crate goes through this module, so that one
//! switch (`cfg(loom)`) swaps it for types the loom model checker can see:
//!
//! | item | normal build | `--cfg loom` |
//! |---|---|---|
//! | `AtomicU64` | `std::sync::atomic` | `loom::sync::atomic` |
//! | [`Map`] | a `dashmap::DashMap` | a `loom::sync::Mutex<HashMap>` |
//!
//! dashmap's sharded locks are invisible to loom, so under loom the table
//! becomes one loom-visible mutex around a `HashMap`. Both versions expose the
//! same small interface below; [`crate::Router`] is written against it alone,
//! so the code the models check is the code that ships, apart from the map's
//! internals. Every method of the interface is linearizable in both versions
//! (one shard lock or the one mutex is held for its whole duration), which is
//! all the router relies on.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use map::Map;

use std::hash::{BuildHasher, Hasher};

/// The hasher of the routing table: a fixed multiply-xorshift mix of a
/// PID's two words instead of std's randomly keyed SipHash.
///
/// PIDs are handed out by the scheduler's own allocator, not chosen by
/// untrusted input, so the table needs no protection against hash flooding,
/// and the route path is dominated by hashing otherwise. Both words go
/// through the 64-bit finaliser of MurmurHash3, which spreads consecutive ids
/// over all bits: dashmap picks the shard from the high bits and hashbrown
/// the bucket from the low ones.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BuildPidHasher;

impl BuildHasher for BuildPidHasher {
    type Hasher = PidHasher;

    fn build_hasher(&self) -> PidHasher {
        PidHasher(0)
    }
}

#[derive(Debug)]
pub(crate) struct PidHasher(u64);

impl PidHasher {
    fn mix(&mut self, word: u64) {
        self.0 = fmix64(self.0.rotate_left(29) ^ word);
    }
}

/// MurmurHash3's 64-bit finaliser: a bijection whose every output bit
/// depends on every input bit.
fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    // `Pid`'s derived `Hash` calls `write_u32(node)` then `write_u64(id)`;
    // the byte-wise fallback keeps the hasher correct for anything else.
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0_u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }
}

#[cfg(not(loom))]
mod map {
    use super::BuildPidHasher;
    use crate::Pid;
    use dashmap::mapref::entry::Entry;
    use dashmap::DashMap;

    /// A concurrent map from PID to `V`: dashmap in normal builds.
    pub(crate) struct Map<V> {
        inner: DashMap<Pid, V, BuildPidHasher>,
    }

    impl<V> Map<V> {
        pub(crate) fn new() -> Self {
            Map {
                inner: DashMap::with_hasher(BuildPidHasher),
            }
        }

        pub(crate) fn with_capacity(capacity: usize) -> Self {
            Map {
                inner: DashMap::with_capacity_and_hasher(capacity, BuildPidHasher),
            }
        }

        /// Inserts `value` under `pid` unless the PID is present; on a
        /// duplicate the value comes back untouched.
        pub(crate) fn insert_new(&self, pid: Pid, value: V) -> Result<(), V> {
            // The entry holds the shard's write lock from the check to the
            // insert, so two racing registrations cannot both see "vacant".
            match self.inner.entry(pid) {
                Entry::Occupied(_) => Err(value),
                Entry::Vacant(slot) => {
                    slot.insert(value);
                    Ok(())
                }
            }
        }

        pub(crate) fn remove(&self, pid: Pid) -> Option<V> {
            self.inner.remove(&pid).map(|(_, value)| value)
        }

        pub(crate) fn contains(&self, pid: Pid) -> bool {
            self.inner.contains_key(&pid)
        }

        /// Runs `f` on the value under `pid` while the shard's read lock is
        /// held.
        pub(crate) fn with<T>(&self, pid: Pid, f: impl FnOnce(&V) -> T) -> Option<T> {
            self.inner.get(&pid).map(|entry| f(entry.value()))
        }

        pub(crate) fn len(&self) -> usize {
            self.inner.len()
        }

        pub(crate) fn keys(&self) -> Vec<Pid> {
            self.inner.iter().map(|entry| *entry.key()).collect()
        }
    }
}

#[cfg(loom)]
mod map {
    use super::BuildPidHasher;
    use crate::Pid;
    use loom::sync::{Mutex, MutexGuard};
    use std::collections::hash_map::Entry;
    use std::collections::HashMap;

    /// A concurrent map from PID to `V`: a loom-visible mutex around a
    /// `HashMap` under loom.
    pub(crate) struct Map<V> {
        inner: Mutex<HashMap<Pid, V, BuildPidHasher>>,
    }

    impl<V> Map<V> {
        pub(crate) fn new() -> Self {
            Map {
                inner: Mutex::new(HashMap::with_hasher(BuildPidHasher)),
            }
        }

        pub(crate) fn with_capacity(capacity: usize) -> Self {
            Map {
                inner: Mutex::new(HashMap::with_capacity_and_hasher(capacity, BuildPidHasher)),
            }
        }

        fn lock(&self) -> MutexGuard<'_, HashMap<Pid, V, BuildPidHasher>> {
            // No code panics while holding this lock, so poisoning cannot
            // happen; recover the guard rather than propagate a panic.
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        pub(crate) fn insert_new(&self, pid: Pid, value: V) -> Result<(), V> {
            match self.lock().entry(pid) {
                Entry::Occupied(_) => Err(value),
                Entry::Vacant(slot) => {
                    slot.insert(value);
                    Ok(())
                }
            }
        }

        pub(crate) fn remove(&self, pid: Pid) -> Option<V> {
            self.lock().remove(&pid)
        }

        pub(crate) fn contains(&self, pid: Pid) -> bool {
            self.lock().contains_key(&pid)
        }

        pub(crate) fn with<T>(&self, pid: Pid, f: impl FnOnce(&V) -> T) -> Option<T> {
            self.lock().get(&pid).map(f)
        }

        pub(crate) fn len(&self) -> usize {
            self.lock().len()
        }

        pub(crate) fn keys(&self) -> Vec<Pid> {
            self.lock().keys().copied().collect()
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::Pid;
    use std::collections::HashSet;

    fn hash(pid: Pid) -> u64 {
        BuildPidHasher.hash_one(pid)
    }

    #[test]
    fn consecutive_pids_spread_over_high_and_low_bits() {
        let hashes: Vec<u64> = (0..4096).map(|id| hash(Pid::local(id))).collect();
        assert_eq!(hashes.iter().collect::<HashSet<_>>().len(), hashes.len());
        // dashmap shards by high bits, hashbrown buckets by low bits: 4096
        // consecutive ids must fill every one of 64 slots either way.
        let high: HashSet<u64> = hashes.iter().map(|h| h >> 58).collect();
        let low: HashSet<u64> = hashes.iter().map(|h| h & 63).collect();
        assert_eq!((high.len(), low.len()), (64, 64));
    }

    #[test]
    fn node_and_id_both_matter() {
        assert_ne!(hash(Pid::new(0, 1)), hash(Pid::new(1, 0)));
        assert_ne!(hash(Pid::new(1, 1)), hash(Pid::new(0, 0)));
    }

    #[test]
    fn byte_writes_hash_every_chunk() {
        let mut a = BuildPidHasher.build_hasher();
        a.write(b"0123456789abc");
        let mut b = BuildPidHasher.build_hasher();
        b.write(b"0123456789abd");
        assert_ne!(a.finish(), b.finish());
    }
}
