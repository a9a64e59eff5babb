//! The failover test: nodes as child OS processes.

/// Runs a node when the binary was started as one.
pub(crate) fn child_if_asked() {}
