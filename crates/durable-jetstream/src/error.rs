//! The two kinds of failure the store reports: the server's, and a
//! stream that does not read as journals.

use sched_durable::DurableError;

pub(crate) fn store_error(what: &str, e: impl std::fmt::Display) -> DurableError {
    DurableError::Store(format!("{what}: {e}"))
}

pub(crate) fn corrupt(what: impl std::fmt::Display) -> DurableError {
    DurableError::Corrupt(what.to_string())
}
