//! Containing panics from user code: turning a caught panic into a
//! message, and dropping user values where a panicking `Drop` must not
//! unwind through the engine.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use relay::Pid;

/// The message of a panic payload (`&str` or `String`), or a placeholder
/// for other payload types.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// Drops a value that may hold user code (a process, a payload, an event)
/// at a place where a panic must not escape: a worker's loop, a shutdown
/// sweep, a submission's error path. A panicking `Drop` is caught and
/// logged; the value is gone either way.
pub(crate) fn drop_user_value<T>(value: T, pid: Pid, what: &'static str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        tracing::warn!(%pid, what, message = %panic_message(&*panic), "dropping a user value panicked");
        drop_payload(panic);
    }
}

/// Wakes a user's [`Waker`](std::task::Waker) (an async caller waiting on a
/// completion or a reply) where a panic must not escape: a waker is user
/// code, and its `wake` or its `Drop` may panic.
pub(crate) fn wake_user_waker(waker: std::task::Waker, what: &'static str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(move || waker.wake())) {
        tracing::warn!(what, message = %panic_message(&*panic), "a waker panicked");
        drop_payload(panic);
    }
}

/// Drops a caught panic's payload; a payload whose own `Drop` panics is
/// leaked instead (a few bytes, once) rather than unwinding further.
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn reads_str_and_string_payloads() {
        let p = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_message(&*p), "plain");
        let p = std::panic::catch_unwind(|| panic!("formatted {}", 1)).unwrap_err();
        assert_eq!(panic_message(&*p), "formatted 1");
        let p = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_message(&*p), "a panic with a non-string payload");
    }

    #[test]
    fn a_panicking_drop_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("boom");
            }
        }
        drop_user_value(Bomb, Pid::local(1), "a test value");
        drop_user_value((1u8, Bomb), Pid::local(1), "a test value in a tuple");
    }
}
