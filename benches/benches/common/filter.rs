//! Whether `cargo bench` asked for another bench than this probe.
//!
//! `cargo bench` passes `--bench` and criterion's options to every bench
//! binary; a positional argument that is not part of this probe's name is a
//! filter for another bench. Values of the options that take one (`0.5` in
//! `--warm-up-time 0.5`) are not filters.

/// Whether a filter on the command line excludes the probe `name`.
pub(crate) fn another_bench_asked_for(name: &str) -> bool {
    const TAKES_A_VALUE: [&str; 6] = [
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--profile-time",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().enumerate().any(|(i, arg)| {
        let is_value = i > 0 && TAKES_A_VALUE.contains(&args[i - 1].as_str());
        !arg.starts_with('-') && !is_value && !name.contains(arg.as_str())
    })
}
