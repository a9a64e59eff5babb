//! `cargo xtask bench`: run the comparison benchmarks and report ratios.
//!
//! Criterion leaves, for every benchmark, `new/benchmark.json` (its group,
//! function and parameter) and `new/estimates.json` (its statistics) under
//! `target/criterion`. Every group compares the function `ours` with its
//! peers on the same workload in the same run; the report pairs them and
//! prints our median, how stable it was (the slowest sample over the median
//! one, from `new/sample.json`), the peer's median and the ratio (ours /
//! peer, below 1 means faster), then writes the same table as Markdown and the ratios as
//! an SVG bar chart under `target/bench-report/`.
//!
//! The benches with harnesses of their own (`workflow`: wall, CPU and peak
//! heap; `burst`: latencies under a burst) print their tables and also
//! append their medians to `target/bench-report/extra/<bench>.tsv`; the
//! report adds them as a second table, with the load average each run
//! began at.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use crate::cmd::run;
use crate::workspace::root;

/// One measured benchmark.
#[derive(Debug, Clone)]
struct Measurement {
    /// The workload: the criterion group, plus its parameter if any.
    workload: String,
    /// `ours` or the peer's name.
    function: String,
    /// Median time of one iteration, in nanoseconds.
    median_ns: f64,
    /// The slowest sample's time per iteration over the median sample's
    /// (from `new/sample.json`): how stable the measurement was.
    spread: Option<f64>,
}

/// One line of the report.
#[derive(Debug, Clone)]
struct Row {
    workload: String,
    peer: String,
    ours_ns: f64,
    peer_ns: f64,
    /// Our max / median per iteration, if the samples were there.
    ours_spread: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.ours_ns / self.peer_ns
    }
}

/// Runs the suite (`quick`: short warm-up and measurement) and writes the
/// report.
pub(crate) fn bench(quick: bool) -> Result<(), String> {
    let criterion_dir = root().join("target").join("criterion");
    // Old results of benchmarks that no longer exist would pollute the
    // report; start clean.
    let extra_dir = root().join("target").join("bench-report").join("extra");
    for dir in [&criterion_dir, &extra_dir] {
        if dir.exists() {
            fs::remove_dir_all(dir)
                .map_err(|e| format!("could not clear {}: {e}", dir.display()))?;
        }
    }
    let mut args = vec![
        "bench",
        "--package",
        "benches",
        "--benches",
        "--",
        "--noplot",
    ];
    if quick {
        args.extend(["--warm-up-time", "0.5", "--measurement-time", "1"]);
    }
    let envs: &[(&str, &str)] = if quick { &[("BENCH_QUICK", "1")] } else { &[] };
    run("cargo", &args, envs)?;
    report(&criterion_dir)
}

/// Writes the report from the results of the last run, without running.
pub(crate) fn report_last_run() -> Result<(), String> {
    report(&root().join("target").join("criterion"))
}

/// Reads criterion's results and writes the report.
fn report(criterion_dir: &Path) -> Result<(), String> {
    let measurements = collect(criterion_dir)?;
    let rows = pair(&measurements);
    if rows.is_empty() {
        return Err(format!(
            "no benchmark pairs `ours` vs a peer under {}",
            criterion_dir.display()
        ));
    }
    let out = root().join("target").join("bench-report");
    let mut table = markdown(&rows);
    let extra = extra_figures(&out.join("extra"))?;
    if !extra.is_empty() {
        table.push('\n');
        table.push_str(&extra_markdown(&extra));
    }
    println!("{table}");
    fs::create_dir_all(&out).map_err(|e| format!("could not create {}: {e}", out.display()))?;
    let md = out.join("report.md");
    let svg = out.join("ratios.svg");
    let body = format!(
        "# Benchmark report\n\nRatio = our median / peer median in the same run \
         (below 1: we are faster). Our max / median: the slowest sample's time \
         per iteration over the median sample's (how stable ours was).\n\n\
         {table}\n![ratios](ratios.svg)\n"
    );
    fs::write(&md, body).map_err(|e| format!("could not write {}: {e}", md.display()))?;
    fs::write(&svg, chart(&rows)).map_err(|e| format!("could not write {}: {e}", svg.display()))?;
    println!("wrote {} and {}", md.display(), svg.display());
    Ok(())
}

fn collect(dir: &Path) -> Result<Vec<Measurement>, String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "new") {
                    if let Some(m) = read_measurement(&path)? {
                        found.push(m);
                    }
                } else {
                    stack.push(path);
                }
            }
        }
    }
    found.sort_by(|a, b| (&a.workload, &a.function).cmp(&(&b.workload, &b.function)));
    Ok(found)
}

fn read_measurement(new_dir: &Path) -> Result<Option<Measurement>, String> {
    let read = |name: &str| -> Result<Option<String>, String> {
        let p: PathBuf = new_dir.join(name);
        match fs::read_to_string(&p) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("could not read {}: {e}", p.display())),
        }
    };
    let (Some(meta), Some(estimates)) = (read("benchmark.json")?, read("estimates.json")?) else {
        return Ok(None);
    };
    let group = json_string(&meta, "group_id")
        .ok_or_else(|| format!("no group_id in {}", new_dir.display()))?;
    // `BenchmarkId::from_parameter("ours")` leaves the function empty and
    // puts the name in the parameter.
    let (function, workload) = match (
        json_string(&meta, "function_id"),
        json_string(&meta, "value_str"),
    ) {
        (Some(function), Some(value)) => (function, format!("{group}/{value}")),
        (Some(function), None) => (function, group),
        (None, Some(value)) => (value, group),
        (None, None) => (String::new(), group),
    };
    let median_ns = median_point_estimate(&estimates)
        .ok_or_else(|| format!("no median in {}", new_dir.display()))?;
    let spread = read("sample.json")?.as_deref().and_then(sample_spread);
    Ok(Some(Measurement {
        workload,
        function,
        median_ns,
        spread,
    }))
}

/// Max over median of the per-iteration times in criterion's
/// `sample.json` (`{"iters":[..],"times":[..]}`).
fn sample_spread(json: &str) -> Option<f64> {
    let numbers = |key: &str| -> Option<Vec<f64>> {
        let start = json.find(&format!("\"{key}\":["))? + key.len() + 4;
        let end = start + json[start..].find(']')?;
        json[start..end]
            .split(',')
            .map(|n| n.trim().parse::<f64>().ok())
            .collect()
    };
    let (iters, times) = (numbers("iters")?, numbers("times")?);
    let mut per: Vec<f64> = times
        .iter()
        .zip(&iters)
        .filter(|(_, &n)| n > 0.0)
        .map(|(t, n)| t / n)
        .collect();
    if per.is_empty() {
        return None;
    }
    per.sort_by(f64::total_cmp);
    let median = per[per.len() / 2];
    let max = per[per.len() - 1];
    (median > 0.0).then(|| max / median)
}

/// The string value of `"key":"value"` in criterion's flat JSON (`None` for
/// a missing key or a `null`).
fn json_string(json: &str, key: &str) -> Option<String> {
    let start = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &json[start..];
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

/// `median.point_estimate` from criterion's `estimates.json`.
fn median_point_estimate(json: &str) -> Option<f64> {
    let median = &json[json.find("\"median\":")?..];
    let at = median.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    let number: String = median[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
        .collect();
    number.parse().ok()
}

/// One figure of a bench with a harness of its own (see the module docs).
#[derive(Debug, Clone, PartialEq)]
struct Extra {
    bench: String,
    figure: String,
    unit: String,
    ours: f64,
    peer_name: String,
    peer: f64,
    loads: String,
}

/// The figures under `dir` (`<bench>.tsv` files), in file-name order; none
/// if the directory is missing (those benches did not run).
fn extra_figures(dir: &Path) -> Result<Vec<Extra>, String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
        .collect();
    files.sort();
    let mut figures = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file)
            .map_err(|e| format!("could not read {}: {e}", file.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            figures.push(
                parse_extra(line)
                    .ok_or_else(|| format!("unreadable line in {}: {line}", file.display()))?,
            );
        }
    }
    Ok(figures)
}

/// One line: bench, figure, unit, ours, peer name, peer, load averages.
fn parse_extra(line: &str) -> Option<Extra> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [bench, figure, unit, ours, peer_name, peer, loads] = fields.as_slice() else {
        return None;
    };
    Some(Extra {
        bench: bench.to_string(),
        figure: figure.to_string(),
        unit: unit.to_string(),
        ours: ours.parse().ok()?,
        peer_name: peer_name.to_string(),
        peer: peer.parse().ok()?,
        loads: loads.to_string(),
    })
}

/// The second table of the report.
fn extra_markdown(figures: &[Extra]) -> String {
    let mut out = String::from(
        "| bench (own harness) | figure (median of the runs) | ours | peer | peer's | ours / peer | load averages |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for f in figures {
        let ratio = if f.peer > 0.0 {
            format!("{:.2}", f.ours / f.peer)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} {} | {} | {:.2} {} | {} | {} |",
            f.bench, f.figure, f.ours, f.unit, f.peer_name, f.peer, f.unit, ratio, f.loads
        );
    }
    out
}

/// Pairs `ours` with every peer of the same workload.
fn pair(measurements: &[Measurement]) -> Vec<Row> {
    let mut by_workload: BTreeMap<&str, Vec<&Measurement>> = BTreeMap::new();
    for m in measurements {
        by_workload.entry(&m.workload).or_default().push(m);
    }
    let mut rows = Vec::new();
    for (workload, ms) in by_workload {
        let Some(ours) = ms.iter().find(|m| m.function == "ours") else {
            continue;
        };
        for peer in ms.iter().filter(|m| m.function != "ours") {
            rows.push(Row {
                workload: workload.to_string(),
                peer: peer.function.clone(),
                ours_ns: ours.median_ns,
                peer_ns: peer.median_ns,
                ours_spread: ours.spread,
            });
        }
    }
    rows
}

fn human(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| workload | our median | our max / median | peer | peer median | ratio |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in rows {
        let spread = r.ours_spread.map_or("-".to_string(), |x| format!("{x:.2}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} |",
            r.workload,
            human(r.ours_ns),
            spread,
            r.peer,
            human(r.peer_ns),
            r.ratio()
        );
    }
    s
}

/// A horizontal bar per row, on a logarithmic ratio axis centred on 1.
fn chart(rows: &[Row]) -> String {
    const LABEL: f64 = 330.0;
    const BAR_AREA: f64 = 420.0;
    const ROW: f64 = 22.0;
    let width = LABEL + BAR_AREA + 70.0;
    let height = ROW * rows.len() as f64 + 60.0;
    // log2 ratio in [-4, 4] maps onto the bar area; 1.0 sits in the middle.
    let x_of = |ratio: f64| LABEL + BAR_AREA / 2.0 + ratio.log2().clamp(-4.0, 4.0) * BAR_AREA / 8.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">ours / peer (log scale; left of the line is faster)</text>\n"
    );
    let mid = x_of(1.0);
    for (i, r) in rows.iter().enumerate() {
        let y = 35.0 + ROW * i as f64;
        let x = x_of(r.ratio());
        let (left, w) = if x < mid {
            (x, mid - x)
        } else {
            (mid, x - mid)
        };
        let colour = if r.ratio() <= 1.0 {
            "#2a9d8f"
        } else {
            "#e76f51"
        };
        let _ = writeln!(
            svg,
            "<text x=\"10\" y=\"{ty}\">{label}</text>\
             <rect x=\"{left:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{h}\" fill=\"{colour}\"/>\
             <text x=\"{tx:.1}\" y=\"{ty}\">{ratio:.2}</text>",
            ty = y + 13.0,
            label = xml_escape(&format!("{} vs {}", r.workload, r.peer)),
            h = ROW - 6.0,
            tx = LABEL + BAR_AREA + 8.0,
            ratio = r.ratio()
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{mid:.1}\" y1=\"28\" x2=\"{mid:.1}\" y2=\"{y2}\" stroke=\"black\"/>\n</svg>",
        y2 = height - 10.0
    );
    svg
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_harness_figures_are_read_back_and_tabled_with_their_ratio() {
        let line = "workflow\twall\tms\t120.5\ttokio\t100.0\t1.20 1.31 1.25";
        let figure = parse_extra(line).expect("well-formed");
        assert_eq!(figure.bench, "workflow");
        assert_eq!(figure.figure, "wall");
        assert_eq!((figure.ours, figure.peer), (120.5, 100.0));
        let table = extra_markdown(&[figure]);
        assert!(
            table.contains(
                "| workflow | wall | 120.50 ms | tokio | 100.00 ms | 1.21 | 1.20 1.31 1.25 |"
            ),
            "{table}"
        );
        assert!(parse_extra("workflow\twall\tms\tnot a number\ttokio\t1\t").is_none());
        assert!(parse_extra("too\tfew").is_none());
    }

    #[test]
    fn own_harness_figures_are_collected_from_every_file_and_none_when_absent() {
        let dir = std::env::temp_dir().join(format!("xtask-extra-{}", std::process::id()));
        assert_eq!(extra_figures(&dir).unwrap(), Vec::new());
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("burst.tsv"),
            "burst\tbusy load: timer late p50\tms\t1\ttokio\t1\t0.5\n",
        )
        .unwrap();
        fs::write(
            dir.join("workflow.tsv"),
            "workflow\twall\tms\t2\ttokio\t4\t0.5\n\n",
        )
        .unwrap();
        fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let figures = extra_figures(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let names: Vec<&str> = figures.iter().map(|f| f.bench.as_str()).collect();
        assert_eq!(names, ["burst", "workflow"]);
        assert!(extra_markdown(&figures).contains("| 0.50 |"));
    }

    #[test]
    fn reads_criterion_json() {
        let meta =
            r#"{"group_id":"deque/owner","function_id":"ours","value_str":"64","throughput":null}"#;
        assert_eq!(
            json_string(meta, "group_id").as_deref(),
            Some("deque/owner")
        );
        assert_eq!(json_string(meta, "value_str").as_deref(), Some("64"));
        assert_eq!(json_string(meta, "throughput"), None);
        let est = r#"{"mean":{"point_estimate":5.0},"median":{"confidence_interval":{"lower_bound":1.0},"point_estimate":2.5e3,"standard_error":1.0}}"#;
        assert_eq!(median_point_estimate(est), Some(2500.0));
        let sample = r#"{"sampling_mode":"Linear","iters":[1.0,2.0,3.0],"times":[10.0,20.0,60.0]}"#;
        // Per iteration: 10, 10, 20: the slowest is twice the median.
        assert_eq!(sample_spread(sample), Some(2.0));
    }

    #[test]
    fn pairs_ours_with_each_peer_and_computes_ratios() {
        let m = |w: &str, f: &str, ns: f64| Measurement {
            workload: w.into(),
            function: f.into(),
            median_ns: ns,
            spread: Some(1.5),
        };
        let rows = pair(&[
            m("spawn", "ours", 50.0),
            m("spawn", "tokio", 100.0),
            m("spawn", "rayon", 25.0),
            m("alone", "tokio", 1.0),
        ]);
        assert_eq!(rows.len(), 2);
        let ratios: Vec<f64> = rows.iter().map(Row::ratio).collect();
        assert!(ratios.contains(&0.5) && ratios.contains(&2.0));
        let table = markdown(&rows);
        assert!(
            table.contains("| spawn | 50.0 ns | 1.50 | tokio | 100.0 ns | 0.50 |"),
            "{table}"
        );
        let svg = chart(&rows);
        assert!(svg.starts_with("<svg") && svg.contains("spawn vs tokio"));
    }
}
