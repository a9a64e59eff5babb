//! The features whose state lives in the records: monitors, links and
//! asks. Each keeps its lists in each process's own relations (a monitor
//! in its target's watchers, a link in both ends' lists, an ask's timeout
//! and the asker in the asking process's pending lists and in the
//! request it sends), so none has engine-wide state to own: the ids
//! monitors and asks are known by come from the engine's one id source
//! (`ids.rs`), which both draw from, so that a simulation's run hands out
//! the same ids in the same order whatever the mix.
//!
//! Each feature still has its type here, which the shared state holds
//! (`monitors`, `links`, `asks`): it is the home of the feature's
//! operations on records, written in the feature's own file
//! (`monitors.rs`, `links.rs`, `ask.rs`) as methods that take the records
//! and the engine pieces they need. The types stand on the ladder's ground
//! floor so that the shared state can hold them; their operations stand
//! where their files do.

/// Monitors: their operations are in `monitors.rs`.
#[derive(Debug, Default)]
pub(crate) struct Monitors;

/// Links: their operations are in `links.rs`.
#[derive(Debug, Default)]
pub(crate) struct Links;

/// Asks: their operations are in `ask.rs`.
#[derive(Debug, Default)]
pub(crate) struct Asks;
