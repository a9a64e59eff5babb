//! `cargo xtask sizes` (a CI step): no function longer than a screen and a half, no
//! source file longer than one concept needs, outside a listed exception.
//!
//! What it measures, over every crate's library code (`crates/*/src`):
//! - **functions**: from the line of `fn` to the line of its closing
//!   brace, comments and blank lines included (what a reader scrolls
//!   through); a nested function counts in its parent too;
//! - **files**: their lines, test-only items (`#[cfg(test)]`,
//!   `#[cfg(all(test, ..))]`, an inline `mod tests { .. }`) left out, so a
//!   file is not pushed over by the tests kept beside its code.
//!
//! A function over [`MAX_FN_LINES`] or a file over [`MAX_FILE_LINES`]
//! fails the check unless [`EXCEPTIONS`] names it with its reason. An
//! exception that no longer needs to be one (the function or file got
//! shorter, or is gone) fails too, so the list stays true.
//!
//! Like `layers` and `doors`, it scans the sources instead of parsing
//! them, so `cargo xtask` needs no dependency.

use std::fs;

use crate::doors::{remove_test_items_keeping_lines, rust_files, strip_comments_only};
use crate::workspace::root;

/// The longest a function may be, in lines.
pub(crate) const MAX_FN_LINES: usize = 100;
/// The longest a source file may be, in lines outside its tests.
pub(crate) const MAX_FILE_LINES: usize = 800;

/// A function or file allowed past its limit: where it is (a file path
/// from the workspace root, and for a function `::name`), and why it
/// stays as it is.
struct Exception {
    what: &'static str,
    why: &'static str,
}

/// The kept exceptions, each with its one-line reason.
const EXCEPTIONS: &[Exception] = &[];

/// One finding: a function or file past its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Long {
    /// `path` or `path::function`.
    what: String,
    lines: usize,
    limit: usize,
}

/// Checks every crate's library sources against the limits.
pub(crate) fn sizes() -> Result<(), String> {
    let root = root();
    let mut found = Vec::new();
    let crates = fs::read_dir(root.join("crates")).map_err(|e| e.to_string())?;
    let mut dirs: Vec<_> = crates
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        for path in rust_files(&dir)? {
            let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let rel = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            found.extend(measure(&rel, &text));
        }
    }
    let report = judge(&found, EXCEPTIONS);
    println!(
        "sizes: {} functions over {MAX_FN_LINES} lines and {} files over {MAX_FILE_LINES}, \
         {} of them listed exceptions",
        found.iter().filter(|l| l.limit == MAX_FN_LINES).count(),
        found.iter().filter(|l| l.limit == MAX_FILE_LINES).count(),
        EXCEPTIONS.len()
    );
    report
}

/// What of `found` the exceptions do not cover, and which exceptions
/// cover nothing: an error listing both, or `Ok`.
fn judge(found: &[Long], exceptions: &[Exception]) -> Result<(), String> {
    let mut problems = Vec::new();
    for long in found {
        if !exceptions.iter().any(|e| e.what == long.what) {
            problems.push(format!(
                "{} is {} lines (limit {}): split it into named pieces, or list it in \
                 xtask/src/sizes.rs with the reason it stays",
                long.what, long.lines, long.limit
            ));
        }
    }
    for exception in exceptions {
        debug_assert!(!exception.why.is_empty());
        if !found.iter().any(|l| l.what == exception.what) {
            problems.push(format!(
                "{} is listed as an exception but is within its limit (or gone): \
                 remove it from the list",
                exception.what
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The functions and the file of `text` (at `rel`) past their limits.
fn measure(rel: &str, text: &str) -> Vec<Long> {
    let code = remove_test_items_keeping_lines(&strip_comments_only(text));
    let mut found = Vec::new();
    let outside_tests = lines_outside_tests(text, &code);
    if outside_tests > MAX_FILE_LINES {
        found.push(Long {
            what: rel.to_string(),
            lines: outside_tests,
            limit: MAX_FILE_LINES,
        });
    }
    for (name, lines) in functions(&code) {
        if lines > MAX_FN_LINES {
            found.push(Long {
                what: format!("{rel}::{name}"),
                lines,
                limit: MAX_FN_LINES,
            });
        }
    }
    found
}

/// The file's lines minus those of its test-only items (which the
/// stripped `code` marks line by line: it keeps every newline).
fn lines_outside_tests(text: &str, code: &str) -> usize {
    let in_tests = code.lines().filter(|l| l.contains(TEST_MARK)).count();
    text.lines().count() - in_tests
}

/// What [`remove_test_items_keeping_lines`] leaves on each line of a test
/// item, so a line count can tell them from lines that were blank.
pub(crate) const TEST_MARK: &str = "\u{1}";

/// Each function of `code` (comments and strings blanked, newlines kept)
/// with its length in lines, from its `fn` to its closing brace.
fn functions(code: &str) -> Vec<(String, usize)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ").map(|i| from + i) {
        from = at + 3;
        let word_start = at == 0 || !is_ident(bytes[at - 1]);
        if !word_start {
            continue;
        }
        let name: String = code[at + 3..]
            .trim_start()
            .chars()
            .take_while(|&c| c.is_alphanumeric() || c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` before any `;` (a declaration
        // without a body, in a trait, ends at its `;`).
        let rest = &code[at..];
        let (Some(open), semi) = (rest.find('{'), rest.find(';')) else {
            continue;
        };
        if semi.is_some_and(|s| s < open) {
            continue;
        }
        let Some(close) = matching(code, at + open) else {
            continue;
        };
        let lines = code[at..=close].matches('\n').count() + 1;
        out.push((name, lines));
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The index of the brace closing the one at `open`.
fn matching(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(lines: usize) -> String {
        let mut s = String::from("fn long() {\n");
        for i in 0..lines.saturating_sub(2) {
            s.push_str(&format!("    let _x{i} = {i};\n"));
        }
        s.push_str("}\n");
        s
    }

    #[test]
    fn a_function_is_measured_from_its_fn_to_its_closing_brace() {
        let code = format!(
            "// header\n{}\nfn short() {{ let s = \"{{\"; }}\n",
            body(101)
        );
        let found = measure("a.rs", &code);
        assert_eq!(
            found,
            vec![Long {
                what: "a.rs::long".into(),
                lines: 101,
                limit: MAX_FN_LINES
            }]
        );
        assert!(measure("a.rs", &body(100)).is_empty());
    }

    #[test]
    fn tests_and_trait_declarations_are_not_measured() {
        let code = format!(
            "trait T {{ fn declared(&self); }}\n#[cfg(test)]\nmod tests {{\n{}}}\n",
            body(150)
        );
        assert!(measure("a.rs", &code).is_empty());
    }

    #[test]
    fn a_file_is_measured_without_its_tests() {
        let mut code = String::new();
        for i in 0..790 {
            code.push_str(&format!("const C{i}: u8 = 0;\n"));
        }
        code.push_str("#[cfg(test)]\nmod tests {\n");
        for i in 0..50 {
            code.push_str(&format!("    const T{i}: u8 = 0;\n"));
        }
        code.push_str("}\n");
        assert!(measure("a.rs", &code).is_empty(), "790 lines and tests");
        for i in 0..20 {
            code.push_str(&format!("const D{i}: u8 = 0;\n"));
        }
        let found = measure("a.rs", &code);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].lines, 810);
    }

    #[test]
    fn an_exception_covers_its_finding_and_a_stale_one_fails() {
        let found = vec![Long {
            what: "a.rs::long".into(),
            lines: 120,
            limit: MAX_FN_LINES,
        }];
        let listed = [Exception {
            what: "a.rs::long",
            why: "one match over every kind",
        }];
        assert!(judge(&found, &listed).is_ok());
        assert!(judge(&found, &[])
            .unwrap_err()
            .contains("a.rs::long is 120 lines"));
        let stale = judge(&[], &listed).unwrap_err();
        assert!(stale.contains("within its limit"), "{stale}");
    }
}
