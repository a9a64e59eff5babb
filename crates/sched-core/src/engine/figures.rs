//! What introspection keeps engine-wide: a coarse clock, ticked by the
//! watcher thread (`long_steps.rs`) so that no step reads the real clock
//! to stamp when it ran (`since_last_step` is read against the real clock:
//! the coarse one stands still while the engine idles), and the table of process type names, which each
//! worker reaches through a small cache of its own, so that only a type's
//! first instance on a worker takes the table's lock. A leaf of the
//! engine: the shared state holds it, and it names nothing of the engine.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU32, Mutex};

/// The engine-wide parts of introspection.
#[derive(Debug)]
pub(crate) struct Introspect {
    /// When the engine started: the origin of the coarse clock and of the
    /// histograms' ready stamps.
    epoch: Instant,
    /// Milliseconds since `epoch`, as of the watcher's last tick.
    clock_ms: CachePadded<AtomicU32>,
    types: Mutex<TypeNames>,
}

/// Process type names, each with its index (what a record stores).
#[derive(Debug, Default)]
#[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
struct TypeNames {
    names: Vec<&'static str>,
    index: HashMap<&'static str, u16>,
}

impl Introspect {
    pub(crate) fn new() -> Self {
        Introspect {
            epoch: Instant::now(),
            clock_ms: CachePadded::new(AtomicU32::new(0)),
            types: Mutex::new(TypeNames::default()),
        }
    }

    /// The coarse clock: milliseconds since the engine started, as of the
    /// watcher's last tick (wrapping after 49 days). Only steps read it
    /// (to stamp when they ran), with the `introspection` feature.
    #[inline]
    #[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
    pub(crate) fn now_ms(&self) -> u32 {
        self.clock_ms.load(Relaxed)
    }

    /// Milliseconds since the engine started, read now from the real
    /// clock (for readers: the coarse clock stands still while every
    /// worker is parked).
    pub(crate) fn read_now_ms(&self) -> u32 {
        self.epoch.elapsed().as_millis() as u32
    }

    /// Moves the coarse clock on (the watcher, every period; a worker that
    /// wakes the dozing watcher).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn tick(&self) {
        self.clock_ms.store(self.read_now_ms(), Relaxed);
    }

    /// `at` in the histograms' stamp units: 1 024 ns since the engine
    /// started, wrapping (about 73 minutes).
    #[inline]
    pub(crate) fn stamp(&self, at: Instant) -> u32 {
        (at.saturating_duration_since(self.epoch).as_nanos() >> 10) as u32
    }

    /// The time from stamp `then` to `now` (both from [`stamp`]).
    ///
    /// [`stamp`]: Introspect::stamp
    #[inline]
    pub(crate) fn between(then: u32, now: u32) -> Duration {
        Duration::from_nanos(u64::from(now.wrapping_sub(then)) << 10)
    }

    #[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
    /// The index of type `name`, added on first sight; `None` once 32 767
    /// types are known.
    fn type_index(&self, name: &'static str) -> Option<u16> {
        let mut types = self.types.lock();
        if let Some(&index) = types.index.get(name) {
            return Some(index);
        }
        // A record keeps the index in 15 bits (`record/figures.rs`).
        let index = u16::try_from(types.names.len())
            .ok()
            .filter(|i| *i < (1 << 15) - 1)?;
        types.names.push(name);
        types.index.insert(name, index);
        Some(index)
    }

    /// Every type name known so far, by index.
    pub(crate) fn type_names(&self) -> Vec<&'static str> {
        self.types.lock().names.clone()
    }

    /// The name of type `index`.
    pub(crate) fn type_name(&self, index: u16) -> Option<&'static str> {
        self.types.lock().names.get(usize::from(index)).copied()
    }
}

/// A worker's cache of type indices, by the address and length of the
/// name (a type's name is one static string, so the same type finds its
/// entry without hashing or locking).
#[derive(Debug, Default)]
#[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
pub(crate) struct TypeCache {
    entries: Vec<(usize, usize, u16)>,
    next: usize,
}

#[cfg_attr(not(all(feature = "introspection", not(loom))), allow(dead_code))]
impl TypeCache {
    const SIZE: usize = 32;

    /// The index of `name`, from the cache or the engine's table.
    pub(crate) fn index(&mut self, introspect: &Introspect, name: &'static str) -> Option<u16> {
        let key = (name.as_ptr() as usize, name.len());
        if let Some(&(_, _, index)) = self.entries.iter().find(|e| (e.0, e.1) == key) {
            return Some(index);
        }
        let index = introspect.type_index(name)?;
        let entry = (key.0, key.1, index);
        if self.entries.len() < Self::SIZE {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % Self::SIZE;
        }
        Some(index)
    }
}
