//! Synchronisation shim.
//!
//! Every atomic, `Arc` and `UnsafeCell` the crate uses comes from here: the
//! standard library's in a normal build, loom's under `cfg(loom)` so that
//! `tests/loom.rs` can model-check the real code. The std `UnsafeCell` is
//! wrapped to expose loom's closure-based `with` / `with_mut` API, so the
//! same code compiles both ways.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

/// `std::cell::UnsafeCell` with loom's access API.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    #[allow(dead_code)] // blocks are zero-allocated outside loom
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared (read) pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with an exclusive (write) pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// One round of a wait loop. `step` counts the rounds so far: a few rounds of
/// exponentially more `spin_loop` hints, then `yield_now`.
#[cfg(not(loom))]
#[inline]
pub(crate) fn spin_wait(step: &mut u32) {
    if *step < 6 {
        for _ in 0..(1u32 << *step) {
            std::hint::spin_loop();
        }
        *step += 1;
    } else {
        std::thread::yield_now();
    }
}

/// One round of a wait loop: under loom every spin must yield so the model
/// checker can schedule the thread being waited for.
#[cfg(loom)]
#[inline]
pub(crate) fn spin_wait(_step: &mut u32) {
    loom::thread::yield_now();
}
