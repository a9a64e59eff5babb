//! [`Spawned`]: a durable process started or resumed, its receipt and
//! its outcome.

use super::*;

/// A durable process started by [`Durability::spawn`] or resumed by
/// [`Durability::recover`].
///
/// # Examples
///
/// See [`Durability`].
#[derive(Debug)]
pub struct Spawned {
    pub(super) key: Arc<str>,
    pub(super) completion: Completion<Ending>,
    pub(super) receipt: Receipt,
}

impl Spawned {
    /// The process's key.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its PID in this run.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn pid(&self) -> Pid {
        self.completion.pid()
    }

    /// Says when the process is durable (its first record written): from
    /// then on, a crash does not lose it. Settled at once for a resumed
    /// process.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn durable(&self) -> &Receipt {
        &self.receipt
    }

    /// Waits for the process to finish, and decodes its outcome as a `T`.
    ///
    /// # Errors
    ///
    /// [`DurableError::Failed`] if a step failed or panicked;
    /// [`DurableError::Suspended`] if the scheduler shut down first (it
    /// resumes on recovery); [`DurableError::Codec`] if the outcome is not
    /// a `T`.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn wait<T: DeserializeOwned>(self) -> Result<T, DurableError> {
        decode_ending(self.completion.wait())
    }

    /// As [`wait`](Spawned::wait), for at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`wait`](Spawned::wait), and [`DurableError::Timeout`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::Spawned;
    /// # use std::time::Duration;
    /// fn within_a_second(mut spawned: Spawned) -> Option<u64> {
    ///     spawned.wait_timeout::<u64>(Duration::from_secs(1)).ok()
    /// }
    /// ```
    pub fn wait_timeout<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
    ) -> Result<T, DurableError> {
        match self.completion.wait_timeout(timeout) {
            Err(ExitError::TimedOut) => Err(DurableError::Timeout),
            result => decode_ending(result),
        }
    }
}

fn decode_ending<T: DeserializeOwned>(
    result: Result<Ending, ExitError>,
) -> Result<T, DurableError> {
    match result {
        Ok(Ending::Done(bytes)) => postcard::from_bytes(&bytes).map_err(codec),
        Ok(Ending::Suspended) => Err(DurableError::Suspended),
        Err(ExitError::Cancelled) => Err(DurableError::Suspended),
        Err(e) => Err(DurableError::Failed(e.to_string())),
    }
}
