//! The command line: `sched-top [ADDR] [--interval-ms N] [--top N]`.

use std::time::Duration;

/// What `sched-top --help` prints.
///
/// # Examples
///
/// ```
/// assert!(sched_top::cli::USAGE.contains("--interval-ms"));
/// ```
pub const USAGE: &str = "\
usage: sched-top [ADDR] [--interval-ms N] [--top N]

Attaches to a scheduler's live endpoint (sched::live::serve, feature `live`)
and shows its workers, histograms and top processes, refreshing.

  ADDR              the endpoint, host:port (default 127.0.0.1:7207)
  --interval-ms N   refresh every N ms (default 1000; 100 to 60000)
  --top N           processes per top list (default 10; at most 1000)
  -h, --help        this text
  -V, --version     the version

keys: q or Esc quits
";

/// The options of a run.
///
/// # Examples
///
/// ```
/// use sched_top::cli::{parse, Parsed};
///
/// let Ok(Parsed::Run(args)) = parse(["--interval-ms", "250"].map(String::from)) else { panic!() };
/// assert_eq!(args.addr, "127.0.0.1:7207");
/// assert_eq!(args.interval.as_millis(), 250);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The endpoint's address.
    pub addr: String,
    /// Time between two snapshots.
    pub interval: Duration,
    /// Processes per top list.
    pub top: usize,
}

/// What the command line asks for.
///
/// # Examples
///
/// ```
/// use sched_top::cli::{parse, Parsed};
///
/// assert_eq!(parse(["--help".to_string()]), Ok(Parsed::Help));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Run with these options.
    Run(Args),
    /// Print [`USAGE`].
    Help,
    /// Print the version.
    Version,
}

/// Reads the arguments (without the program's name).
///
/// # Errors
///
/// An unknown option, a missing or bad value, or a second address: the
/// message says which.
///
/// # Examples
///
/// ```
/// use sched_top::cli::{parse, Parsed};
///
/// let Ok(Parsed::Run(args)) = parse(["127.0.0.1:9000", "--top", "5"].map(String::from)) else {
///     panic!()
/// };
/// assert_eq!((args.addr.as_str(), args.top), ("127.0.0.1:9000", 5));
/// assert!(parse(["--interval-ms", "soon"].map(String::from)).is_err());
/// ```
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut addr: Option<String> = None;
    let mut interval = Duration::from_millis(1000);
    let mut top = sched::live::DEFAULT_TOP;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "-V" | "--version" => return Ok(Parsed::Version),
            "--interval-ms" => {
                let ms: u64 = number(args.next(), "--interval-ms")?;
                if !(100..=60_000).contains(&ms) {
                    return Err(format!("--interval-ms {ms}: give 100 to 60000"));
                }
                interval = Duration::from_millis(ms);
            }
            "--top" => {
                top = number(args.next(), "--top")?;
                if !(1..=sched::live::MAX_TOP).contains(&top) {
                    return Err(format!("--top {top}: give 1 to {}", sched::live::MAX_TOP));
                }
            }
            option if option.starts_with('-') => return Err(format!("unknown option `{option}`")),
            _ if addr.is_some() => return Err(format!("a second address `{arg}`")),
            _ => addr = Some(arg),
        }
    }
    Ok(Parsed::Run(Args {
        addr: addr.unwrap_or_else(|| sched::live::DEFAULT_ADDR.to_string()),
        interval,
        top,
    }))
}

fn number<T: std::str::FromStr>(value: Option<String>, option: &str) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{option} needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("{option} {value}: not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(args: &[&str]) -> Result<Parsed, String> {
        parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn defaults() {
        assert_eq!(
            parse_all(&[]),
            Ok(Parsed::Run(Args {
                addr: "127.0.0.1:7207".into(),
                interval: Duration::from_secs(1),
                top: 10,
            }))
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        assert!(parse_all(&["--interval-ms"])
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_all(&["--interval-ms", "5"])
            .unwrap_err()
            .contains("100 to 60000"));
        assert!(parse_all(&["--top", "0"]).unwrap_err().contains("--top 0"));
        assert!(parse_all(&["--frobnicate"])
            .unwrap_err()
            .contains("--frobnicate"));
        assert!(parse_all(&["a:1", "b:2"]).unwrap_err().contains("b:2"));
        assert_eq!(parse_all(&["-V"]), Ok(Parsed::Version));
    }
}
