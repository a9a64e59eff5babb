//! The error a failed push returns.

use std::fmt;

/// Why [`Producer::push`](crate::Producer::push) refused an item.
///
/// The item is never dropped: it travels back inside the error and
/// [`into_inner`](PushError::into_inner) recovers it.
///
/// # Examples
///
/// ```
/// let (tx, mut rx) = mpsc::queue::<u32>();
/// rx.close();
/// let err = tx.push(7).unwrap_err();
/// assert!(err.is_closed());
/// assert_eq!(err.into_inner(), 7);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum PushError<T> {
    /// The queue was closed (its process finished) and accepts nothing more.
    Closed(T),
    /// The queue was [reset](crate::Consumer::reset) for a later use since
    /// this producer was created: the producer belongs to an earlier
    /// generation and may never deliver into the new one.
    Stale(T),
}

impl<T> PushError<T> {
    /// Returns the item that could not be pushed.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue::<String>();
    /// rx.close();
    /// let item = tx.push("hello".to_string()).unwrap_err().into_inner();
    /// assert_eq!(item, "hello");
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            PushError::Closed(item) | PushError::Stale(item) => item,
        }
    }

    /// `true` if the push failed because the queue is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = mpsc::queue::<u8>();
    /// rx.close();
    /// assert!(tx.push(1).unwrap_err().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, PushError::Closed(_))
    }

    /// `true` if the push failed because the producer belongs to an earlier
    /// use of a queue that has since been reset.
    ///
    /// # Examples
    ///
    /// ```
    /// let (old, mut rx) = mpsc::queue::<u8>();
    /// rx.reset();
    /// assert!(old.push(1).unwrap_err().is_stale());
    /// ```
    pub fn is_stale(&self) -> bool {
        matches!(self, PushError::Stale(_))
    }
}

impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Closed(_) => f.write_str("Closed(..)"),
            PushError::Stale(_) => f.write_str("Stale(..)"),
        }
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Closed(_) => f.write_str("push on a closed event queue: its consumer has finished"),
            PushError::Stale(_) => f.write_str(
                "push from a stale producer: the event queue was reset for a later use after this producer was created",
            ),
        }
    }
}

impl<T> std::error::Error for PushError<T> {}
