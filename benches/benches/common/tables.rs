//! Helpers of the benches that print their own tables (not criterion's).

/// The median of `values` (the upper one of an even count).
#[allow(dead_code)] // Not every bench that includes this takes medians.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The 1-minute load average (from `/proc/loadavg`), as printed there, or
/// `?` where that file is missing.
#[allow(dead_code)] // Not every bench that includes this prints the load.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// One figure of a bench with its own harness, for `cargo xtask bench`'s
/// report: ours and the peer's medians (in `unit`), and the load averages
/// the runs began at.
#[allow(dead_code)] // Not every bench that includes this reports figures.
pub(crate) struct Figure<'a> {
    pub(crate) name: String,
    pub(crate) unit: &'a str,
    pub(crate) ours: f64,
    pub(crate) peer: f64,
    pub(crate) peer_name: &'a str,
    pub(crate) loads: &'a [String],
}

/// Appends `figures` of `bench` to `target/bench-report/extra/<bench>.tsv`
/// (one tab-separated line each: bench, figure, unit, ours, peer name,
/// peer, load averages), where `cargo xtask bench` reads them into its
/// report beside criterion's pairs. A file that cannot be written is said
/// on stderr and skipped: the printed table is the bench's main output.
#[allow(dead_code)] // Not every bench that includes this reports figures.
pub(crate) fn record(bench: &str, figures: &[Figure<'_>]) {
    use std::io::Write as _;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("bench-report").join("extra");
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("{bench}.tsv")))?;
        for f in figures {
            writeln!(
                file,
                "{bench}\t{}\t{}\t{}\t{}\t{}\t{}",
                f.name,
                f.unit,
                f.ours,
                f.peer_name,
                f.peer,
                f.loads.join(" ")
            )?;
        }
        Ok(())
    });
    if let Err(e) = written {
        eprintln!(
            "could not record {bench}'s figures under {}: {e}",
            dir.display()
        );
    }
}
