//! What a step may ask of the engine it runs on.
//!
//! [`Output`](crate::Output) reaches the engine only through this trait, so
//! the contract types do not depend on how the engine is built; the engine
//! implements it on its shared state.

use relay::{Package, Payload, Pid, PidsExhausted, SendError};

use crate::contract::error::SubmitError;
use crate::contract::process::Process;
use crate::engine::Context;
use crate::record::completion::Completion;

/// The engine services a step uses: send a message, start a process,
/// allocate a PID. Called on the worker thread that runs the step.
pub(crate) trait StepEngine: Sync {
    /// Delivers `package` to its target process.
    fn send(&self, package: Package) -> Result<(), SendError>;

    /// Submits a new process (as `Engine::submit`).
    fn submit(
        &self,
        pid: Pid,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError>;

    /// Submits a new process under a fresh PID, skipping PIDs in use.
    fn spawn(
        &self,
        process: Box<dyn Process>,
        method: &str,
        input: Payload,
    ) -> Result<Completion, SubmitError>;

    /// A fresh PID on the engine's node.
    fn allocate_pid(&self) -> Result<Pid, PidsExhausted>;

    /// The engine's full set of operations, for the step's own use.
    fn context(&self) -> &Context;
}
