//! [`Spawned`]: a durable process started or resumed, its receipt and
//! its outcome, typed by what the process finishes with.

use std::marker::PhantomData;

use super::*;

/// A durable process started by [`Durability::spawn`] (a
/// `Spawned<D::Done>`: its `wait` gives what the process finishes with)
/// or resumed by [`Durability::recover`] (a `Spawned<AnyKind>`, of a kind
/// known at run time: [`of`](Spawned::of) types it).
///
/// # Examples
///
/// See [`Durability`].
#[derive(Debug)]
pub struct Spawned<T = AnyKind> {
    pub(super) key: Arc<str>,
    pub(super) kind: Arc<str>,
    pub(super) completion: Completion<Ending>,
    pub(super) receipt: Receipt,
    pub(super) done: PhantomData<fn() -> T>,
}

/// The done type of a resumed process's handle before it is typed: its
/// kind is known at run time only (see [`Spawned::of`]). No value has
/// this type.
///
/// # Examples
///
/// ```
/// use sched_durable::{AnyKind, Spawned};
/// fn keys(resumed: &[Spawned<AnyKind>]) -> Vec<&str> {
///     resumed.iter().map(|s| s.key()).collect()
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnyKind {}

impl<T> Spawned<T> {
    pub(super) fn new(
        key: Arc<str>,
        kind: &str,
        completion: Completion<Ending>,
        receipt: Receipt,
    ) -> Self {
        Spawned {
            key,
            kind: kind.into(),
            completion,
            receipt,
            done: PhantomData,
        }
    }

    /// The process's key.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The process's kind ([`Durable::KIND`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::{AnyKind, Spawned};
    /// fn orders(resumed: &[Spawned<AnyKind>]) -> usize {
    ///     resumed.iter().filter(|s| s.kind() == "order").count()
    /// }
    /// ```
    pub fn kind(&self) -> &str {
        &self.kind
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

    /// This handle with its done type forgotten, to keep it beside
    /// resumed ones of other kinds ([`of`](Spawned::of) types it again).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::{AnyKind, Spawned};
    /// fn keep(all: &mut Vec<Spawned<AnyKind>>, started: Spawned<u64>) {
    ///     all.push(started.into_any());
    /// }
    /// ```
    pub fn into_any(self) -> Spawned<AnyKind> {
        Spawned::new(self.key, &self.kind, self.completion, self.receipt)
    }
}

impl<T: DeserializeOwned> Spawned<T> {
    /// Waits for the process to finish, and gives what it finished with.
    ///
    /// # Errors
    ///
    /// [`DurableError::Failed`] if a step failed or panicked;
    /// [`DurableError::Suspended`] if the scheduler shut down first (it
    /// resumes on recovery); [`DurableError::Codec`] if it finished with
    /// a value that does not decode as a `T`.
    ///
    /// # Examples
    ///
    /// See [`Durability`].
    pub fn wait(self) -> Result<T, DurableError> {
        decode_ending(self.completion.wait())
    }

    /// As [`wait`](Spawned::wait), for at most `timeout`:
    /// `Err(DurableError::TimedOut)` if the process still runs then (the
    /// handle can wait again; see [`DurableError::is_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`wait`](Spawned::wait), and [`DurableError::TimedOut`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use sched_durable::Spawned;
    /// # use std::time::Duration;
    /// fn within_a_second(mut spawned: Spawned<u64>) -> Option<u64> {
    ///     spawned.wait_timeout(Duration::from_secs(1)).ok()
    /// }
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<T, DurableError> {
        match self.completion.wait_timeout(timeout) {
            Err(ExitError::TimedOut) => Err(DurableError::TimedOut),
            result => decode_ending(result),
        }
    }
}

impl Spawned<AnyKind> {
    /// This resumed handle, typed as a `D`'s: its `wait` then gives a
    /// `D::Done`.
    ///
    /// # Errors
    ///
    /// [`DurableError::WrongKind`] (with the handle's key and kind) when
    /// the process is not a `D`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched_durable::prelude::*;
    /// use sched_durable::{AnyKind, Spawned};
    ///
    /// struct Tally(u64);
    /// impl Durable for Tally {
    ///     const KIND: &'static str = "tally";
    ///     type Args = ();
    ///     type Message = u64;
    ///     type Done = u64;
    ///     fn create(_: ()) -> Self { Tally(0) }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events.typed::<Self>() {
    ///             if let Event::Message(n) = event {
    ///                 self.0 += n;
    ///                 out.finish(self.0);
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// fn totals(resumed: Vec<Spawned<AnyKind>>) -> Result<Vec<u64>, DurableError> {
    ///     resumed.into_iter().map(|s| s.of::<Tally>()?.wait()).collect()
    /// }
    /// ```
    pub fn of<D: Durable>(self) -> Result<Spawned<D::Done>, DurableError> {
        if &*self.kind != D::KIND {
            return Err(DurableError::WrongKind {
                key: self.key.to_string(),
                kind: self.kind.to_string(),
                asked: D::KIND,
            });
        }
        Ok(Spawned::new(
            self.key,
            &self.kind,
            self.completion,
            self.receipt,
        ))
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
