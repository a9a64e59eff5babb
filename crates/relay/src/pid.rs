//! Process identifiers, their textual form, and a generator of fresh ones.

use std::error::Error;
use std::fmt;
use std::str::FromStr;

/// The identity of a process: a node number and an id unique on that node.
///
/// A `Pid` is 16 bytes, `Copy`, hashable and totally ordered (by node, then
/// by id). The node component is there so that routing beyond one machine can
/// be added later without changing the type users hold; everything local uses
/// node [`Pid::LOCAL_NODE`] (0).
///
/// # Textual form
///
/// A PID is written `<node.id>` in decimal, for example `<0.42>` or
/// `<3.18446744073709551615>`. [`Display`](fmt::Display) (and `Debug`) write
/// exactly that, and [`FromStr`] accepts exactly that: no spaces, no sign, no
/// leading zeros (`0` itself is fine). So the form is canonical: every `Pid`
/// round-trips through `to_string` and `parse`, and every string that parses
/// is the `to_string` of its `Pid`. Malformed text is rejected with a
/// [`ParsePidError`] that says what was wrong.
///
/// # Examples
///
/// ```
/// use sched::Pid;
///
/// let pid = Pid::new(2, 42);
/// assert_eq!(pid.node(), 2);
/// assert_eq!(pid.id(), 42);
/// assert_eq!(pid.to_string(), "<2.42>");
/// assert_eq!("<2.42>".parse::<Pid>(), Ok(pid));
/// assert!(Pid::local(7) < Pid::new(1, 0));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid {
    // Field order gives the derived ordering: node first, then id.
    node: u32,
    id: u64,
}

impl Pid {
    /// The node number of processes on this machine.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// assert_eq!(Pid::local(5).node(), Pid::LOCAL_NODE);
    /// ```
    pub const LOCAL_NODE: u32 = 0;

    /// The source of messages sent from outside any process (`<0.0>`, displayed as `<outside>`). No
    /// allocator hands out id 0, so no process ever has this PID.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::remote::PidAllocator;
    ///
    /// assert_ne!(PidAllocator::new(Pid::LOCAL_NODE).allocate().unwrap(), Pid::OUTSIDE);
    /// ```
    pub const OUTSIDE: Pid = Pid::new(Self::LOCAL_NODE, 0);

    /// The PID with id `id` on node `node`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// let pid = Pid::new(1, 99);
    /// assert_eq!((pid.node(), pid.id()), (1, 99));
    /// ```
    pub const fn new(node: u32, id: u64) -> Self {
        Pid { node, id }
    }

    /// The PID with id `id` on the local node ([`Pid::LOCAL_NODE`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// assert_eq!(Pid::local(3), Pid::new(0, 3));
    /// ```
    pub const fn local(id: u64) -> Self {
        Pid::new(Self::LOCAL_NODE, id)
    }

    /// The node component.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// assert_eq!(Pid::new(4, 1).node(), 4);
    /// ```
    pub const fn node(self) -> u32 {
        self.node
    }

    /// The id component, unique within its node.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// assert_eq!(Pid::new(4, 1).id(), 1);
    /// ```
    pub const fn id(self) -> u64 {
        self.id
    }

    /// Whether this PID is on the local node.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::Pid;
    ///
    /// assert!(Pid::local(1).is_local());
    /// assert!(!Pid::new(1, 1).is_local());
    /// ```
    pub const fn is_local(self) -> bool {
        self.node == Self::LOCAL_NODE
    }
}

/// `<node.id>`, as Erlang prints a PID; [`Pid::OUTSIDE`] (the sender of
/// what code outside any process sends) prints as `<outside>`. Both forms
/// parse back with [`FromStr`].
///
/// # Examples
///
/// ```
/// use relay::Pid;
/// assert_eq!(Pid::new(2, 17).to_string(), "<2.17>");
/// assert_eq!(Pid::OUTSIDE.to_string(), "<outside>");
/// assert_eq!("<outside>".parse::<Pid>(), Ok(Pid::OUTSIDE));
/// ```
impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Pid::OUTSIDE {
            return f.write_str("<outside>");
        }
        write!(f, "<{}.{}>", self.node, self.id)
    }
}

/// `Debug` prints the same compact `<node.id>` form as `Display`, which keeps
/// logs and assertion messages short.
impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Pid {
    type Err = ParsePidError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err(ParsePidError::Empty);
        }
        if text == "<outside>" {
            return Ok(Pid::OUTSIDE);
        }
        let rest = text
            .strip_prefix('<')
            .ok_or(ParsePidError::MissingOpeningBracket)?;
        let (inner, after) = rest
            .split_once('>')
            .ok_or(ParsePidError::MissingClosingBracket)?;
        if !after.is_empty() {
            return Err(ParsePidError::TrailingCharacters);
        }
        let (node, id) = inner
            .split_once('.')
            .ok_or(ParsePidError::MissingSeparator)?;
        let node = parse_decimal(node, u64::from(u32::MAX)).map_err(ParsePidError::InvalidNode)?;
        let id = parse_decimal(id, u64::MAX).map_err(ParsePidError::InvalidId)?;
        let node =
            u32::try_from(node).map_err(|_| ParsePidError::InvalidNode(NumberError::Overflow))?;
        Ok(Pid::new(node, id))
    }
}

/// Parses canonical decimal text (ASCII digits, no sign, no leading zero)
/// into a number no greater than `max`.
fn parse_decimal(text: &str, max: u64) -> Result<u64, NumberError> {
    let digits = text.as_bytes();
    match digits {
        [] => return Err(NumberError::Empty),
        [b'0', _, ..] => {
            return Err(if digits.iter().all(u8::is_ascii_digit) {
                NumberError::LeadingZero
            } else {
                NumberError::InvalidDigit
            })
        }
        _ => {}
    }
    let mut value: u64 = 0;
    let mut overflow = false;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return Err(NumberError::InvalidDigit);
        }
        // Keep scanning after an overflow so that a bad digit later in the
        // text is reported as such rather than as an overflow.
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(byte - b'0')))
        {
            Some(next) if next <= max => value = next,
            _ => overflow = true,
        }
    }
    if overflow {
        Err(NumberError::Overflow)
    } else {
        Ok(value)
    }
}

/// Why a string is not a [`Pid`] in its `<node.id>` textual form.
///
/// The checks run left to right, so the error names the first problem found.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::ParsePidError;
/// use sched::remote::NumberError;
///
/// assert_eq!("".parse::<Pid>(), Err(ParsePidError::Empty));
/// assert_eq!("0.1".parse::<Pid>(), Err(ParsePidError::MissingOpeningBracket));
/// assert_eq!("<0.1".parse::<Pid>(), Err(ParsePidError::MissingClosingBracket));
/// assert_eq!("<01>".parse::<Pid>(), Err(ParsePidError::MissingSeparator));
/// assert_eq!("<0.1> ".parse::<Pid>(), Err(ParsePidError::TrailingCharacters));
/// assert_eq!(
///     "<x.1>".parse::<Pid>(),
///     Err(ParsePidError::InvalidNode(NumberError::InvalidDigit))
/// );
/// assert_eq!(
///     "<0.007>".parse::<Pid>(),
///     Err(ParsePidError::InvalidId(NumberError::LeadingZero))
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParsePidError {
    /// The string is empty.
    Empty,
    /// The string does not start with `<`.
    MissingOpeningBracket,
    /// There is no `>` after the `<`.
    MissingClosingBracket,
    /// Something follows the closing `>`.
    TrailingCharacters,
    /// There is no `.` between the node and the id.
    MissingSeparator,
    /// The node number (before the `.`) is not a valid `u32` in canonical
    /// decimal.
    InvalidNode(NumberError),
    /// The id number (after the `.`) is not a valid `u64` in canonical
    /// decimal.
    InvalidId(NumberError),
}

impl fmt::Display for ParsePidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParsePidError::Empty => f.write_str("empty string is not a PID (expected `<node.id>`)"),
            ParsePidError::MissingOpeningBracket => {
                f.write_str("PID must start with `<` (expected `<node.id>`)")
            }
            ParsePidError::MissingClosingBracket => {
                f.write_str("PID has no closing `>` (expected `<node.id>`)")
            }
            ParsePidError::TrailingCharacters => {
                f.write_str("unexpected characters after the closing `>` of a PID")
            }
            ParsePidError::MissingSeparator => {
                f.write_str("PID has no `.` between node and id (expected `<node.id>`)")
            }
            ParsePidError::InvalidNode(why) => write!(f, "invalid PID node number: {why}"),
            ParsePidError::InvalidId(why) => write!(f, "invalid PID id number: {why}"),
        }
    }
}

impl Error for ParsePidError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ParsePidError::InvalidNode(why) | ParsePidError::InvalidId(why) => Some(why),
            _ => None,
        }
    }
}

/// What was wrong with one number of a PID's textual form.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::message::ParsePidError;
/// use sched::remote::NumberError;
///
/// let err = "<4294967296.0>".parse::<Pid>().unwrap_err();
/// assert_eq!(err, ParsePidError::InvalidNode(NumberError::Overflow));
/// assert_eq!(err.to_string(), "invalid PID node number: number too large");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NumberError {
    /// There are no digits.
    Empty,
    /// A character other than an ASCII digit (this includes signs and
    /// spaces).
    InvalidDigit,
    /// More than one digit and the first is `0`; the textual form is
    /// canonical, so `007` is not accepted for `7`.
    LeadingZero,
    /// The number does not fit its type (`u32` for the node, `u64` for the
    /// id).
    Overflow,
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumberError::Empty => "no digits",
            NumberError::InvalidDigit => "not a decimal digit",
            NumberError::LeadingZero => "leading zero",
            NumberError::Overflow => "number too large",
        })
    }
}

impl Error for NumberError {}

#[cfg(all(test, not(loom)))]
mod tests;
