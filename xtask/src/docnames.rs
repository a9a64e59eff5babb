//! `cargo xtask docnames`: the names the docs quote exist in the code.
//!
//! A doc that names a test, a file or a method that was renamed or removed
//! keeps reading as if it were true: a reader follows it to nothing. This
//! check reads every inline code span (`` `...` ``) of `README.md` and
//! `docs/**/*.md` and fails on a span that is:
//!
//! - a **test-like name**: one snake_case word of four parts or more
//!   (`a_flood_in_one_group_does_not_hold_another_back`), which must be
//!   the name of a function somewhere in the workspace's Rust sources
//!   (`fn <name>`);
//! - a **workspace path** (`crates/...`, `benches/...`, `xtask/...`,
//!   `docs/...`, optionally followed by `:line` or `::item`), which must
//!   exist;
//! - any other **snake_case name** (`allocate_pid`), which must be a word
//!   of the sources;
//! - a **path to a member of one of our types** (`Type::member`, the
//!   first segment a type the workspace defines), whose member must be
//!   defined in the sources (a function, constant, field or variant of
//!   that name, anywhere: the check reads words, not types).
//!
//! Anything else (code snippets, names of other crates' items, shell
//! commands) is not checked. The names are gathered as words from the
//! sources, so a name that only occurs in a comment also passes: the
//! check catches names that went away, not every name that moved.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::workspace::root;

/// Folders whose Rust sources define the names the docs may quote.
const SOURCES: &[&str] = &["crates", "benches", "xtask", "examples"];

/// Names the docs quote that are not ours, or are quoted as gone.
const OTHERS: &[&str] = &[
    // async-nats's `ConnectOptions`.
    "with_user_and_password",
    "with_token",
    "with_nkey",
    "with_credentials_file",
    // Symbols in profiles (glibc, the kernel).
    "__lll_lock_wait_private",
    "__lll_lock_wake_private",
    "_int_free",
    "_raw_spin_unlock_irqrestore",
    "finish_task_switch",
    "futex_wake",
    // Removed calls, named by the migration guide.
    "post_after",
    "ask_named",
    "spawn_typed",
    "into_untyped",
];

/// Runs the check over the workspace; fails listing every dangling name.
pub(crate) fn docnames() -> Result<(), String> {
    let root = root();
    let code = Code::read(&root);
    let mut docs = vec![root.join("README.md")];
    collect(&root.join("docs"), "md", &mut docs);
    let mut dangling = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        let text = fs::read_to_string(doc).map_err(|e| format!("{}: {e}", doc.display()))?;
        for (line, span) in spans(&text) {
            match code.check(&root, span) {
                Verdict::Unchecked => {}
                Verdict::Found => checked += 1,
                Verdict::Missing(why) => {
                    let shown = doc.strip_prefix(&root).unwrap_or(doc);
                    dangling.push(format!("{}:{line}: `{span}`: {why}", shown.display()));
                }
            }
        }
    }
    if dangling.is_empty() {
        eprintln!("docnames: {checked} quoted names checked, none dangling");
        Ok(())
    } else {
        Err(format!(
            "{} quoted names in the docs do not exist in the code:\n{}",
            dangling.len(),
            dangling.join("\n")
        ))
    }
}

/// What the sources define, as words.
struct Code {
    /// Names after `fn`.
    functions: HashSet<String>,
    /// Names after `struct`, `enum`, `trait`, `type` and `union`.
    types: HashSet<String>,
    /// Every identifier-like word.
    words: HashSet<String>,
}

impl Code {
    fn read(root: &Path) -> Code {
        let mut files = Vec::new();
        for folder in SOURCES {
            collect(&root.join(folder), "rs", &mut files);
        }
        let mut code = Code {
            functions: HashSet::new(),
            types: HashSet::new(),
            words: HashSet::new(),
        };
        for file in files {
            if let Ok(text) = fs::read_to_string(&file) {
                code.add(&text);
            }
        }
        code
    }

    fn add(&mut self, text: &str) {
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            match pair[0] {
                "fn" => {
                    self.functions.insert(pair[1].to_owned());
                }
                "struct" | "enum" | "trait" | "type" | "union" => {
                    self.types.insert(pair[1].to_owned());
                }
                _ => {}
            }
        }
        self.words.extend(words.into_iter().map(str::to_owned));
    }

    fn check(&self, root: &Path, span: &str) -> Verdict {
        let span = span.trim();
        if let Some(path) = workspace_path(span) {
            return if root.join(path).exists() {
                Verdict::Found
            } else {
                Verdict::Missing("no such file".into())
            };
        }
        if is_test_like(span) && !OTHERS.contains(&span) {
            return if self.functions.contains(span) {
                Verdict::Found
            } else {
                Verdict::Missing("no function of that name".into())
            };
        }
        if span.contains('_') && is_identifier(span) && span == span.to_lowercase() {
            // Any other snake_case name: a word of the code somewhere.
            return if self.words.contains(span) || OTHERS.contains(&span) {
                Verdict::Found
            } else {
                Verdict::Missing("not a name in the code".into())
            };
        }
        let path = span.trim_end_matches("()");
        let segments: Vec<&str> = path.split("::").collect();
        if segments.len() == 2
            && segments.iter().all(|s| is_identifier(s))
            && self.types.contains(segments[0])
        {
            return if self.words.contains(segments[1]) {
                Verdict::Found
            } else {
                Verdict::Missing(format!("`{}` has no member `{}`", segments[0], segments[1]))
            };
        }
        Verdict::Unchecked
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Unchecked,
    Found,
    Missing(String),
}

/// `span`'s file part, when it names a file of the workspace.
fn workspace_path(span: &str) -> Option<&str> {
    let starts = ["crates/", "benches/", "xtask/", "docs/"];
    if !starts.iter().any(|s| span.starts_with(s)) || span.contains(' ') {
        return None;
    }
    // `path:12`, `path::item`, `path#anchor`.
    let end = span.find([':', '#']).unwrap_or(span.len());
    let path = span[..end].trim_end_matches('/');
    // A glob or a placeholder is not one file.
    if path.contains(['*', '<', '{']) {
        return None;
    }
    Some(path)
}

/// One snake_case word of four parts or more: the shape of a test's name.
fn is_test_like(span: &str) -> bool {
    span.split('_').count() >= 4
        && span.split('_').all(|part| !part.is_empty())
        && span
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && span.starts_with(|c: char| c.is_ascii_lowercase())
}

fn is_identifier(s: &str) -> bool {
    s.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The inline code spans of a Markdown text, with their line numbers;
/// fenced blocks are skipped.
fn spans(text: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('`') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('`') else {
                break;
            };
            if close > 0 {
                found.push((number + 1, &after[..close]));
            }
            rest = &after[close + 1..];
        }
    }
    found
}

/// Every file under `dir` ending in `.ext`, skipping build output.
fn collect(dir: &Path, ext: &str, into: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            collect(&path, ext, into);
        } else if path.extension().is_some_and(|e| e == ext) {
            into.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_with(text: &str) -> Code {
        code(text)
    }

    fn code(text: &str) -> Code {
        let mut code = Code {
            functions: HashSet::new(),
            types: HashSet::new(),
            words: HashSet::new(),
        };
        code.add(text);
        code
    }

    #[test]
    fn spans_are_read_outside_fences_with_their_lines() {
        let text = "a `one` and `two`\n```rust\nlet `x` = 1;\n```\n`three`\n";
        assert_eq!(spans(text), [(1, "one"), (1, "two"), (5, "three")]);
    }

    #[test]
    fn a_test_name_must_be_a_function() {
        let code = code("#[test]\nfn a_flood_is_held_back() {}\n");
        let root = Path::new("/nonexistent");
        assert_eq!(code.check(root, "a_flood_is_held_back"), Verdict::Found);
        assert!(matches!(
            code.check(root, "a_flood_is_let_through"),
            Verdict::Missing(_)
        ));
        // Shorter snake_case names need only be words of the code.
        assert!(matches!(
            code.check(root, "max_pending"),
            Verdict::Missing(_)
        ));
        let code = code_with("let max_pending = 1;\n");
        assert_eq!(code.check(root, "max_pending"), Verdict::Found);
    }

    #[test]
    fn a_member_of_our_type_must_exist_and_others_are_not_checked() {
        let code = code("pub struct TransportStats { pub abandoned: u64 }\n");
        let root = Path::new("/nonexistent");
        assert_eq!(
            code.check(root, "TransportStats::abandoned"),
            Verdict::Found
        );
        assert!(matches!(
            code.check(root, "TransportStats::vanished"),
            Verdict::Missing(_)
        ));
        assert_eq!(code.check(root, "tokio::spawn"), Verdict::Unchecked);
        assert_eq!(code.check(root, "let x = 1;"), Verdict::Unchecked);
    }

    #[test]
    fn workspace_paths_must_exist() {
        let code = code("");
        let root = crate::workspace::root();
        assert_eq!(code.check(&root, "xtask/src/docnames.rs"), Verdict::Found);
        assert_eq!(code.check(&root, "xtask/src/main.rs:12"), Verdict::Found);
        assert!(matches!(
            code.check(&root, "xtask/src/gone.rs"),
            Verdict::Missing(_)
        ));
        assert_eq!(code.check(&root, "crates/*/tests"), Verdict::Unchecked);
    }
}
