//! `Scheduler::builder().node(3).nats(config)`: the facade's builder,
//! joined to a NATS cluster in one call.

use std::sync::Arc;

use sched::SchedulerBuilder;

use crate::config::NatsConfig;
use crate::error::ConnectError;
use crate::transport::NatsTransport;

/// Adds [`nats`](NatsSchedulerExt::nats) to `sched`'s
/// [`SchedulerBuilder`].
///
/// # Examples
///
/// ```no_run
/// use relay_nats::{Codec, NatsConfig, NatsSchedulerExt};
/// use sched::Scheduler;
///
/// let scheduler = Scheduler::builder()
///     .node(3)
///     .nats(NatsConfig::new("nats://127.0.0.1:4222").codec(Codec::new().register::<u64>("n")))?
///     .build();
/// scheduler.start();
/// # Ok::<(), relay_nats::ConnectError>(())
/// ```
pub trait NatsSchedulerExt: Sized {
    /// Connects a [`NatsTransport`] and sets it as the scheduler's remote
    /// transport (the node number is the builder's
    /// [`node`](SchedulerBuilder::node), which must be unique in the
    /// cluster). To read the transport's [`stats`](NatsTransport::stats),
    /// connect it yourself and pass it to
    /// [`remote`](SchedulerBuilder::remote) instead.
    ///
    /// # Errors
    ///
    /// [`ConnectError`] when the client cannot connect.
    ///
    /// # Examples
    ///
    /// See [`NatsSchedulerExt`].
    fn nats(self, config: NatsConfig) -> Result<Self, ConnectError>;
}

impl NatsSchedulerExt for SchedulerBuilder {
    fn nats(self, config: NatsConfig) -> Result<Self, ConnectError> {
        let transport = NatsTransport::connect(config)?;
        Ok(self.remote(Arc::new(transport)))
    }
}
