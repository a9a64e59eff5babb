//! Helpers of the benches that print their own tables (not criterion's).

/// The median of `values` (the upper one of an even count).
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
