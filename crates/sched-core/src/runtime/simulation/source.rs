//! Where a simulation's decisions come from: a seed, or a script of
//! earlier decisions to replay.
//!
//! Every decision a simulation makes (which worker takes the next turn,
//! whether a message is delayed and for how long, whether a handler
//! fails) is one *draw*: a number below the count of options. A run
//! records every draw it made, in order, as its [`Script`]. Replaying a
//! script makes the same draws, so the same run; a draw past the end of a
//! script is zero. Zero is always the plainest option (the first
//! candidate, no fault), which is what makes scripts shrinkable: a
//! shorter script, or one with smaller numbers, is a run with fewer
//! faults and fewer detours.

use std::fmt;
use std::str::FromStr;

/// Where a simulation's decisions come from.
///
/// # Examples
///
/// ```
/// use sched::sim::{Script, Source};
///
/// let seeded = Source::Seed(42);
/// let replayed = Source::Script("3 0 1".parse::<Script>().unwrap());
/// assert_ne!(format!("{seeded:?}"), format!("{replayed:?}"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Decisions drawn from a pseudo-random generator seeded with this.
    Seed(u64),
    /// Decisions replayed from an earlier run's script (zero past its
    /// end).
    Script(Script),
}

impl From<u64> for Source {
    fn from(seed: u64) -> Source {
        Source::Seed(seed)
    }
}

impl From<Script> for Source {
    fn from(script: Script) -> Source {
        Source::Script(script)
    }
}

/// The decisions a simulated run made, in order: what replays it.
///
/// Its text form (`Display` and `FromStr`) is the numbers separated by
/// spaces, so a failing run's script can be printed, kept in a test and
/// parsed back.
///
/// # Examples
///
/// ```
/// use sched::sim::Script;
///
/// let script: Script = "2 0 7".parse().unwrap();
/// assert_eq!(script.len(), 3);
/// assert_eq!(script.to_string(), "2 0 7");
/// assert_eq!(Script::from(vec![2, 0, 7]), script);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Script(pub(crate) Vec<u32>);

impl Script {
    /// How many decisions it holds.
    ///
    /// # Examples
    ///
    /// See [`Script`].
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no decision (replaying it makes the plainest run:
    /// every draw zero).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sched::sim::Script::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The decisions, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// let script = sched::sim::Script::from(vec![1, 2]);
    /// assert_eq!(script.draws(), &[1, 2]);
    /// ```
    pub fn draws(&self) -> &[u32] {
        &self.0
    }
}

impl From<Vec<u32>> for Script {
    fn from(draws: Vec<u32>) -> Script {
        Script(draws)
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, draw) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{draw}")?;
        }
        Ok(())
    }
}

/// A script's text was not numbers separated by whitespace.
///
/// # Examples
///
/// ```
/// let error = "1 x".parse::<sched::sim::Script>().unwrap_err();
/// assert!(error.to_string().contains("\"x\""));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseScriptError {
    word: String,
}

impl fmt::Display for ParseScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a script is numbers below 2^32, found {:?}", self.word)
    }
}

impl std::error::Error for ParseScriptError {}

impl FromStr for Script {
    type Err = ParseScriptError;

    fn from_str(text: &str) -> Result<Script, ParseScriptError> {
        text.split_whitespace()
            .map(|word| {
                word.parse::<u32>().map_err(|_| ParseScriptError {
                    word: word.to_owned(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Script)
    }
}

/// The draws of one run: from a seed or a script, each one recorded.
#[derive(Debug)]
pub(crate) struct Choices {
    from: Origin,
    recorded: Vec<u32>,
}

#[derive(Debug)]
enum Origin {
    /// SplitMix64's state.
    Seed(u64),
    Script {
        draws: Vec<u32>,
        at: usize,
    },
}

impl Choices {
    pub(crate) fn new(source: Source) -> Choices {
        let from = match source {
            Source::Seed(seed) => Origin::Seed(seed),
            Source::Script(script) => Origin::Script {
                draws: script.0,
                at: 0,
            },
        };
        Choices {
            from,
            recorded: Vec::new(),
        }
    }

    /// A number below `options` (zero, without a draw, when there is one
    /// option or none: a decision with no alternative is not recorded, so
    /// scripts hold only real choices).
    pub(crate) fn draw(&mut self, options: u32) -> u32 {
        if options <= 1 {
            return 0;
        }
        let raw = match &mut self.from {
            Origin::Seed(state) => {
                // SplitMix64: one add and a mix per draw, and every seed
                // gives a full-period sequence.
                *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                (z ^ (z >> 31)) as u32
            }
            Origin::Script { draws, at } => {
                let raw = draws.get(*at).copied().unwrap_or(0);
                *at += 1;
                raw
            }
        };
        let draw = raw % options;
        self.recorded.push(draw);
        draw
    }

    /// Whether something with probability `p` (0 to 1) happens: zero, the
    /// plainest draw, is "no".
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        const SCALE: u32 = 1 << 20;
        let threshold = ((1.0 - p.min(1.0)) * f64::from(SCALE)) as u32;
        self.draw(SCALE) >= threshold
    }

    /// What was drawn so far.
    pub(crate) fn script(&self) -> Script {
        Script(self.recorded.clone())
    }

    /// How many draws were made.
    #[cfg(test)]
    pub(crate) fn drawn(&self) -> usize {
        self.recorded.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_replays_the_draws_it_recorded() {
        let mut seeded = Choices::new(Source::Seed(7));
        let first: Vec<u32> = (1..50).map(|n| seeded.draw(n)).collect();
        let mut replay = Choices::new(Source::Script(seeded.script()));
        let again: Vec<u32> = (1..50).map(|n| replay.draw(n)).collect();
        assert_eq!(first, again);
        assert_eq!(replay.script(), seeded.script());
    }

    #[test]
    fn single_options_are_not_recorded_and_past_the_end_is_zero() {
        let mut choices = Choices::new(Source::Script(Script(vec![5])));
        assert_eq!(choices.draw(1), 0);
        assert_eq!(choices.draw(3), 2);
        assert_eq!(choices.draw(3), 0);
        assert_eq!(choices.drawn(), 2);
        assert!(!choices.chance(0.5), "zero is no");
    }

    #[test]
    fn seeds_differ_and_chance_follows_its_probability() {
        let mut a = Choices::new(Source::Seed(1));
        let mut b = Choices::new(Source::Seed(2));
        let xs: Vec<u32> = (0..32).map(|_| a.draw(1000)).collect();
        let ys: Vec<u32> = (0..32).map(|_| b.draw(1000)).collect();
        assert_ne!(xs, ys);
        let hits = (0..10_000).filter(|_| a.chance(0.25)).count();
        assert!((2000..3000).contains(&hits), "{hits} of 10000 at p = 0.25");
        assert!((0..100).all(|_| a.chance(1.0)));
    }

    #[test]
    fn scripts_round_trip_through_text() {
        let script = Script(vec![0, 4_000_000_000, 12]);
        assert_eq!(script.to_string().parse::<Script>().unwrap(), script);
        assert!("".parse::<Script>().unwrap().is_empty());
        assert!("-1".parse::<Script>().is_err());
    }
}
