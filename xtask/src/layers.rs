//! `cargo xtask layers`: holds `sched-core`'s folders to their ladder.
//!
//! Each top-level module of `sched-core` stands on a floor, and code may
//! use only what stands on its own floor or below (`docs/internals/sched-core.md`
//! draws the ladder). The check reads every `crate::<module>` path in the
//! library's code (comments, doc links and test-only files are not code
//! the library runs) and reports each use of a higher floor.
//! Any such use fails the check: the ladder has no exception, so no two
//! folders can import each other.

use std::fs;
use std::path::{Path, PathBuf};

use crate::workspace::root;

/// `sched-core`'s folders (and root files), ground floor first.
const LADDER: &[&[&str]] = &[
    &["sync", "panic_guard", "table"],
    &["contract"],
    &["record"],
    &["timer"],
    &["runqueue"],
    &["engine"],
    &["worker"],
    &["runtime"],
];

/// Modules outside the ladder: the crate root (it re-exports), and the
/// loom models (test code that drives every floor).
const OUTSIDE: &[&str] = &["lib", "loom_models"];

/// One use of a higher floor.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Upward {
    file: String,
    target: String,
    line: usize,
    text: String,
}

pub(crate) fn layers() -> Result<(), String> {
    let src = root().join("crates").join("sched-core").join("src");
    let mut upward = Vec::new();
    for file in sources(&src)? {
        let rel = file
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let module = rel.split(['/', '.']).next().unwrap_or_default().to_string();
        if OUTSIDE.contains(&module.as_str()) || is_test_file(&rel) {
            continue;
        }
        let from = floor(&module).ok_or_else(|| {
            format!("`{module}` (src/{rel}) stands on no floor: add it to LADDER in xtask/src/layers.rs")
        })?;
        let text = fs::read_to_string(&file).map_err(|e| format!("reading {rel}: {e}"))?;
        for (line, target) in crate_paths(&text) {
            if target == module || OUTSIDE.contains(&target.as_str()) {
                continue;
            }
            let Some(to) = floor(&target) else {
                return Err(format!(
                    "src/{rel}:{}: `crate::{target}` stands on no floor (name the \
                     module, not a re-export at the root, one `crate::<module>::..` path \
                     per import; give a new module a floor in xtask/src/layers.rs)",
                    line + 1
                ));
            };
            if to > from {
                upward.push(Upward {
                    file: rel.clone(),
                    target,
                    line: line + 1,
                    text: text
                        .lines()
                        .nth(line)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                });
            }
        }
    }
    let problems: Vec<String> = upward
        .iter()
        .map(|u| {
            format!(
                "src/{}:{}: `{}` reaches up to `{}`: {}",
                u.file,
                u.line,
                floor_name(&u.file),
                u.target,
                u.text
            )
        })
        .collect();
    eprintln!("sched-core ladder: {} uses of a higher floor", upward.len());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the ladder of sched-core is broken:\n  {}",
            problems.join("\n  ")
        ))
    }
}

fn floor(module: &str) -> Option<usize> {
    LADDER.iter().position(|floor| floor.contains(&module))
}

fn floor_name(rel: &str) -> &str {
    rel.split(['/', '.']).next().unwrap_or_default()
}

/// Files that hold only tests (unit tests beside the code, loom models).
fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.ends_with("tests.rs") || name.ends_with("_loom.rs") || name == "loom.rs"
}

/// Every `.rs` file under `dir`, sorted.
fn sources(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(sources(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The modules named by `crate::<module>` paths in code lines, with their
/// line index. Comments (doc links included) are skipped, and so is an
/// inline test module (from a `#[cfg(test)]`-like attribute right above a
/// `mod` to the end of the file, where such modules sit).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(") && code.contains("test") {
            let next = lines[i + 1..]
                .iter()
                .map(|l| l.trim_start())
                .find(|l| !l.starts_with("#["));
            let is_mod =
                next.is_some_and(|l| l.starts_with("mod ") || l.starts_with("pub(crate) mod "));
            if is_mod && next.is_some_and(|l| l.ends_with('{')) {
                // An inline test module: the rest of the file is tests.
                break;
            }
        }
        if code.starts_with("//") {
            continue;
        }
        let code = match code.find("//") {
            Some(at) => &code[..at],
            None => code,
        };
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `$crate::` (a macro) is not a path into this crate's modules.
            let preceded_by_dollar = rest[..at].ends_with('$');
            if !preceded_by_dollar {
                // A grouped `crate::{..}` import names no module here: it
                // is read as `{`, which stands on no floor, and fails.
                out.push((
                    i,
                    if name.is_empty() {
                        "{".to_string()
                    } else {
                        name
                    },
                ));
            }
            rest = after;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_in_code_and_skips_comments_and_tests() {
        let text = "use crate::engine::shared::Shared;\n\
                    // crate::worker in a comment\n\
                    /// [`X`](crate::timer::X)\n\
                    let x = crate::record::extras(y); // crate::table\n\
                    #[cfg(test)]\n\
                    mod tests {\n\
                    use crate::runqueue::local;\n\
                    }\n";
        let found: Vec<String> = crate_paths(text).into_iter().map(|(_, m)| m).collect();
        assert_eq!(found, vec!["engine", "record"]);
    }

    #[test]
    fn a_test_module_declared_elsewhere_does_not_end_the_scan() {
        let text = "#[cfg(all(test, not(loom)))]\nmod slot_tests;\nuse crate::engine::Shared;\n";
        let found: Vec<String> = crate_paths(text).into_iter().map(|(_, m)| m).collect();
        assert_eq!(found, vec!["engine"]);
    }

    #[test]
    fn every_folder_stands_on_one_floor() {
        let mut seen = std::collections::BTreeSet::new();
        for floor in LADDER {
            for module in *floor {
                assert!(seen.insert(*module), "{module} stands on two floors");
            }
        }
    }
}
