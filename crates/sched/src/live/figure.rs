//! Figures of other libraries, carried in a snapshot beside the engine's.

use serde::{Deserialize, Deserializer, Serialize};

/// A figure of another library, served beside the engine's in
/// [`Snapshot::figures`](super::Snapshot::figures): which library it comes from (its `source`,
/// `"journal"`), its name within it, its value, its [`Unit`] and its
/// [`Kind`] (a counter's rate is meaningful, a gauge's is not).
///
/// A value that is not finite (NaN, an infinity) is written as `null` and
/// reads back as NaN: "no value", which `sched-top` shows as `-`.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Kind, Unit};
///
/// let records = Figure::counter("journal", "records", 1_204.0, Unit::Count);
/// assert_eq!(records.kind, Kind::Counter);
/// let sync_p99 = Figure::gauge("journal", "sync p99", 0.004, Unit::Seconds);
/// assert_eq!((sync_p99.source.as_str(), sync_p99.name.as_str()), ("journal", "sync p99"));
/// assert_eq!((sync_p99.value, sync_p99.unit, sync_p99.kind), (0.004, Unit::Seconds, Kind::Gauge));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Figure {
    /// The library (or part of the application) it comes from:
    /// `sched-top` groups figures by it.
    pub source: String,
    /// What it measures, within its source (`"records"`, `"sync p99"`).
    pub name: String,
    /// Its value, in [`unit`](Figure::unit)s.
    #[serde(deserialize_with = "number_or_nan")]
    pub value: f64,
    /// What its value counts.
    pub unit: Unit,
    /// Whether it is a total that only grows (a counter) or a level that
    /// goes up and down (a gauge).
    pub kind: Kind,
}

impl Figure {
    /// A counter: a total since the start that only grows (records
    /// written, bytes, syncs). A client may show its rate, from two
    /// snapshots.
    ///
    /// # Examples
    ///
    /// See [`Figure`].
    pub fn counter(
        source: impl Into<String>,
        name: impl Into<String>,
        value: f64,
        unit: Unit,
    ) -> Figure {
        Figure {
            source: source.into(),
            name: name.into(),
            value,
            unit,
            kind: Kind::Counter,
        }
    }

    /// A gauge: a level now (processes running, a store's size, a
    /// latency percentile), shown as it is.
    ///
    /// # Examples
    ///
    /// See [`Figure`].
    pub fn gauge(
        source: impl Into<String>,
        name: impl Into<String>,
        value: f64,
        unit: Unit,
    ) -> Figure {
        Figure {
            source: source.into(),
            name: name.into(),
            value,
            unit,
            kind: Kind::Gauge,
        }
    }
}

/// What a [`Figure`]'s value counts: on the wire `"count"`, `"bytes"` or
/// `"seconds"`. A unit this version does not know (from a newer endpoint)
/// reads as [`Count`](Unit::Count), a plain number.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Unit};
///
/// let size = Figure::gauge("journal", "store size", 1_572_864.0, Unit::Bytes);
/// assert_eq!(size.unit, Unit::Bytes);
/// assert_eq!(Unit::default(), Unit::Count);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Seconds (a latency, a time spent); fractions of a second are
    /// fractions (`0.004` is 4 ms).
    Seconds,
    /// A plain number (records, processes, syncs). Last, as what any
    /// other name reads as.
    #[default]
    #[serde(other)]
    Count,
}

/// Whether a [`Figure`] is a running total or a level: on the wire
/// `"counter"` or `"gauge"`. A kind this version does not know reads as
/// [`Gauge`](Kind::Gauge) (shown as it is, no rate).
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::live::{Figure, Kind, Unit};
///
/// assert_eq!(Figure::counter("journal", "syncs", 80.0, Unit::Count).kind, Kind::Counter);
/// assert_eq!(Kind::default(), Kind::Gauge);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// A total since the start, that only grows.
    Counter,
    /// A level now, up or down. Last, as what any other name reads as.
    #[default]
    #[serde(other)]
    Gauge,
}

/// Reads a number, or `null` (what JSON makes of a value that is not
/// finite) as NaN.
fn number_or_nan<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::NAN))
}

/// The callback that gives a snapshot its [`Figure`]s.
pub(super) type FigureFn = dyn Fn() -> Vec<Figure> + Send + Sync;
