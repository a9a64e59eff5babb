//! Receipts: how code outside learns that what it handed a durable
//! process is durable.
//!
//! An [`Ack`] travels with the input (a message told from outside, or a
//! spawn's start) and is settled by the runner once the record holding
//! the input is durable, or with the reason it never will be. An `Ack`
//! dropped unsettled (the process ended before the input was stepped, or
//! the message was never taken) settles its receipt with
//! [`DurableError::NotKept`]: a receipt never waits forever for an input
//! nobody holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::DurableError;

struct Slot {
    result: Mutex<Option<Result<(), DurableError>>>,
    settled: Condvar,
}

/// The sending side: settled once.
pub(crate) struct Ack {
    slot: Option<Arc<Slot>>,
    key: Arc<str>,
}

impl Ack {
    pub(crate) fn settle(mut self, result: Result<(), DurableError>) {
        if let Some(slot) = self.slot.take() {
            *slot.result.lock() = Some(result);
            slot.settled.notify_all();
        }
    }
}

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            *slot.result.lock() = Some(Err(DurableError::NotKept(self.key.to_string())));
            slot.settled.notify_all();
        }
    }
}

/// Says when an input handed to a durable process is durable: after
/// [`wait_timeout`](Receipt::wait_timeout) returns `Ok`, a crash of the node no longer
/// loses it.
///
/// # Examples
///
/// See [`Durability::send`](crate::Durability::send).
pub struct Receipt {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipt")
            .field("settled", &self.slot.result.lock().is_some())
            .finish()
    }
}

impl Receipt {
    pub(crate) fn pair(key: Arc<str>) -> (Ack, Receipt) {
        let slot = Arc::new(Slot {
            result: Mutex::new(None),
            settled: Condvar::new(),
        });
        (
            Ack {
                slot: Some(slot.clone()),
                key,
            },
            Receipt { slot },
        )
    }

    /// A receipt that is settled `Ok` already (a resumed process is
    /// durable).
    pub(crate) fn settled(key: Arc<str>) -> Receipt {
        let (ack, receipt) = Receipt::pair(key);
        ack.settle(Ok(()));
        receipt
    }

    /// Waits until the input is durable, or `timeout` passes.
    ///
    /// # Errors
    ///
    /// [`DurableError::TimedOut`] if `timeout` passed first (the input may
    /// still become durable); [`DurableError::Store`] if the write
    /// failed; [`DurableError::InDoubt`] if a shutdown suspended the
    /// process while the input's record was being written (it may be
    /// durable: a recovery applies it if it is);
    /// [`DurableError::NotKept`] if the process ended, or a shutdown
    /// suspended it, before the input was written (it never will be).
    ///
    /// # Examples
    ///
    /// See [`Durability::send`](crate::Durability::send).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), DurableError> {
        // A timeout too long to add waits as long as it takes.
        let deadline = Instant::now().checked_add(timeout);
        let mut result = self.slot.result.lock();
        while result.is_none() {
            match deadline {
                Some(deadline) => {
                    if self
                        .slot
                        .settled
                        .wait_until(&mut result, deadline)
                        .timed_out()
                    {
                        break;
                    }
                }
                None => self.slot.settled.wait(&mut result),
            }
        }
        result.clone().unwrap_or(Err(DurableError::TimedOut))
    }

    /// Whether the input is durable already (`Some(Ok)`), will never be
    /// (`Some(Err)`), or is not yet known (`None`).
    ///
    /// # Examples
    ///
    /// See [`Durability::send`](crate::Durability::send).
    pub fn try_result(&self) -> Option<Result<(), DurableError>> {
        self.slot.result.lock().clone()
    }
}
