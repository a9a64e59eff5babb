//! The result of a steal attempt.

/// What a steal attempt found.
///
/// # Examples
///
/// ```
/// use deque::{Steal, Worker};
///
/// let w = Worker::new();
/// let s = w.stealer();
/// assert_eq!(s.steal(), Steal::Empty);
/// w.push(1);
/// assert_eq!(s.steal(), Steal::Success(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a stolen item is dropped if the result is ignored"]
pub enum Steal<T> {
    /// The deque had nothing to steal.
    Empty,
    /// An item was stolen.
    Success(T),
    /// The attempt lost a race (against another stealer or the owner) and
    /// should be retried; the deque may or may not hold items.
    Retry,
}

impl<T> Steal<T> {
    /// The stolen item, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::Steal;
    /// assert_eq!(Steal::Success(3).success(), Some(3));
    /// assert_eq!(Steal::<u8>::Retry.success(), None);
    /// ```
    pub fn success(self) -> Option<T> {
        match self {
            Steal::Success(item) => Some(item),
            Steal::Empty | Steal::Retry => None,
        }
    }

    /// Whether the deque was found empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::Steal;
    /// assert!(Steal::<u8>::Empty.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        matches!(self, Steal::Empty)
    }

    /// Whether the attempt should be retried.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::Steal;
    /// assert!(Steal::<u8>::Retry.is_retry());
    /// ```
    pub fn is_retry(&self) -> bool {
        matches!(self, Steal::Retry)
    }

    /// Whether an item was stolen.
    ///
    /// # Examples
    ///
    /// ```
    /// use deque::Steal;
    /// assert!(Steal::Success(()).is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        matches!(self, Steal::Success(_))
    }
}
