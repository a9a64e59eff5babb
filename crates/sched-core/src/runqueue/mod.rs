//! Where runnable processes wait and idle workers sleep: each worker's
//! own queues and how code on a worker thread finds them (`local`), its
//! `next` slot (`next_slot`), the order a worker serves them in and the
//! bound that gives (`order`), how groups share a level (`shares`), and the parking protocol (`sleep`). The
//! engine's shared state holds these; the worker loop (`worker/`) runs
//! on them.

pub(crate) mod local;
pub(crate) mod next_slot;
pub(crate) mod order;
pub(crate) mod shares;
pub(crate) mod sleep;
