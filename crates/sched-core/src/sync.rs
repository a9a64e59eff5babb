//! Everything the engine synchronises through: std, parking_lot and
//! crossbeam-queue normally; loom's types (or loom-visible stand-ins for the
//! third-party ones) under `cfg(loom)`, so that the models explore the real
//! code.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
    };
    pub(crate) use std::sync::Arc;
    pub(crate) use std::thread;
    pub(crate) use std::thread_local;

    /// A mutex whose `lock` cannot fail (parking_lot's).
    pub(crate) type Mutex<T> = parking_lot::Mutex<T>;
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// parking_lot's condition variable, with a guard-passing API that
    /// loom's can match.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }

        pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        /// Waits until notified or until `deadline`; returns the guard and
        /// whether the deadline passed.
        pub(crate) fn wait_until<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            deadline: std::time::Instant,
        ) -> (MutexGuard<'a, T>, bool) {
            let timed_out = self.0.wait_until(&mut guard, deadline).timed_out();
            (guard, timed_out)
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// The lock-free FIFO used for the global queue.
    #[derive(Debug)]
    pub(crate) struct Fifo<T>(crossbeam_queue::SegQueue<T>);

    impl<T> Fifo<T> {
        pub(crate) fn new() -> Self {
            Fifo(crossbeam_queue::SegQueue::new())
        }
        pub(crate) fn push(&self, item: T) {
            self.0.push(item)
        }
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.pop()
        }
        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    /// Spinning is free outside loom.
    #[inline]
    pub(crate) fn spin_hint() {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
    };
    pub(crate) use loom::sync::Arc;
    pub(crate) use loom::thread;
    pub(crate) use loom::thread_local;

    /// loom's mutex with parking_lot's infallible `lock`.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().expect("loom mutex poisoned")
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Mutex::new(T::default())
        }
    }

    /// loom's condition variable. loom has no clock, so a timed wait is
    /// an untimed one.
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Default for Condvar {
        fn default() -> Self {
            Condvar::new()
        }
    }

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).expect("loom mutex poisoned")
        }
        pub(crate) fn wait_until<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            _deadline: std::time::Instant,
        ) -> (MutexGuard<'a, T>, bool) {
            (self.wait(guard), false)
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// A loom-visible stand-in for crossbeam-queue's `SegQueue`.
    #[derive(Debug)]
    pub(crate) struct Fifo<T>(loom::sync::Mutex<std::collections::VecDeque<T>>);

    impl<T> Fifo<T> {
        pub(crate) fn new() -> Self {
            Fifo(loom::sync::Mutex::new(std::collections::VecDeque::new()))
        }
        pub(crate) fn push(&self, item: T) {
            self.0.lock().unwrap().push_back(item)
        }
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.lock().unwrap().pop_front()
        }
        pub(crate) fn len(&self) -> usize {
            self.0.lock().unwrap().len()
        }
        pub(crate) fn is_empty(&self) -> bool {
            self.0.lock().unwrap().is_empty()
        }
    }

    /// Under loom a spin must let other threads run.
    #[inline]
    pub(crate) fn spin_hint() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

/// `std::cell::UnsafeCell` with loom's closure API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// Asks the CPU to start loading the `bytes` bytes at `ptr` into cache,
/// for a caller that will read them shortly. A hint with no effect on what
/// any thread sees: a prefetch never faults and reads nothing the program
/// observes, so `ptr` need not even be valid. A no-op off x86-64, and under
/// loom and miri.
#[inline(always)]
pub(crate) fn prefetch<T: ?Sized>(ptr: *const T, bytes: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Every line the range touches: an unaligned range of `n` bytes
        // can touch one more than `n / 64` rounded up.
        let base = ptr.cast::<i8>();
        let skew = base as usize % 64;
        for line in 0..(skew + bytes).div_ceil(64) {
            // SAFETY: `_mm_prefetch` is a hint: it cannot fault and has no
            // effect the program can observe, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_sub(skew).wrapping_add(line * 64)) };
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    let _ = (ptr, bytes);
}

/// The instant `timeout` from now, for the `wait_until` of a handle's
/// `wait_timeout` (on the machine's clock: a waiting thread is outside any
/// simulation). A timeout too long to add (`Duration::MAX`) waits a
/// century: as long as `wait`, without the overflow.
pub(crate) fn deadline_after(timeout: std::time::Duration) -> std::time::Instant {
    use std::time::{Duration, Instant};
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);
    let now = Instant::now();
    now.checked_add(timeout.min(CENTURY))
        .unwrap_or_else(|| now + Duration::from_secs(24 * 60 * 60))
}
