//! The engine as a running step sees it: the engine's shared state and the
//! stepped process's record, behind the process contract's
//! [`StepEngine`] interface (`contract/step_engine.rs`).
//!
//! The worker builds one [`Stepping`] per step and lends it to the step's
//! `Output`. This file implements the operations every step has (send, a
//! fresh PID, the inside handle); each feature implements its own part of
//! the interface in its module (`timers`, `monitors`, `links`, `names`,
//! `ask`).

use std::any::Any;

use relay::{Package, Pid, PidsExhausted, SendError};

use super::shared::Shared;
use super::Context;
use crate::contract::step_engine::StepEngine;
use crate::record::Record;
use crate::sync::Arc;

/// One step's view of the engine: borrowed from the worker for the length
/// of the step.
pub(crate) struct Stepping<'a> {
    /// The engine, owned (an ask's answer path keeps it).
    pub(crate) shared: &'a Arc<Shared>,
    /// The process being stepped.
    pub(crate) record: &'a Arc<Record>,
}

impl StepEngine for Stepping<'_> {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.shared.send(package)
    }

    fn allocate_pid(&self) -> Result<Pid, PidsExhausted> {
        self.shared.allocate_pid()
    }

    fn context(&self) -> &dyn Any {
        Context::of(self.shared)
    }
}
