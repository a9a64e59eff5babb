//! `cargo xtask doors`: counts the public surface a user meets, against
//! the targets of the one-verb-per-act plan (printed by `cargo xtask ci`,
//! never failing it: the counts are a progress report).
//!
//! What it counts, over `sched-core` and `sched`'s library code (comments,
//! strings and test modules skipped):
//! - **spawn doors**: public inherent methods named `spawn` or `spawn_*`, plus, for
//!   each type that derefs to `Context`, `Context`'s again (callable
//!   through the deref);
//! - **send** and **ask definitions**: public inherent methods named
//!   `send`, `post`, `tell` (or `send_*`, ...), and `ask`, `query` (or
//!   `ask_*`, ...);
//! - **`Output` / `Context` methods**: public inherent methods of each,
//!   and the files they are spread over;
//! - **`impl Shared` files**: files holding an inherent `impl Shared`;
//! - **flat root names**: names `sched`'s crate root re-exports with
//!   `pub use` outside its modules, and how many of them are hidden
//!   (`#[doc(hidden)]`);
//! - **prelude names**: names `sched::prelude` re-exports (what a glob
//!   import brings into a program's scope);
//! - **handler registrations**: public builder methods that register a
//!   command handler (`handler`, `*_handler`, `handler_*`).
//!
//! Like `layers`, it reads the sources with a small scanner instead of a
//! parser, so that `cargo xtask` keeps building in seconds with no
//! dependency.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::workspace::root;

/// One public inherent method: its type, its name and its file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Method {
    ty: String,
    name: String,
    file: String,
}

/// The figures, and the targets they are held to.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    spawn_definitions: usize,
    spawn_doors: usize,
    send_definitions: usize,
    ask_definitions: usize,
    output_methods: usize,
    output_files: usize,
    context_methods: usize,
    context_files: usize,
    shared_files: usize,
    root_names: usize,
    hidden_root_names: usize,
    prelude_names: usize,
    handler_registrations: usize,
    /// Every public inherent method counted, for `--list`.
    methods: Vec<Method>,
}

/// Prints the counts beside their targets.
pub(crate) fn doors(list: bool) -> Result<(), String> {
    let counts = count(&root())?;
    if list {
        for m in &counts.methods {
            println!("{}::{}  {}", m.ty, m.name, m.file);
        }
    }
    let rows: [(&str, String, &str); 11] = [
        (
            "spawn doors (definitions)",
            format!("{} ({})", counts.spawn_doors, counts.spawn_definitions),
            "<= 3",
        ),
        (
            "send definitions",
            counts.send_definitions.to_string(),
            "<= 4",
        ),
        (
            "ask definitions",
            counts.ask_definitions.to_string(),
            "<= 4",
        ),
        (
            "Output methods (files)",
            format!("{} ({})", counts.output_methods, counts.output_files),
            "<= 25",
        ),
        (
            "Context methods (files)",
            format!("{} ({})", counts.context_methods, counts.context_files),
            "<= 25",
        ),
        ("impl Shared files", counts.shared_files.to_string(), "<= 2"),
        ("flat root names", counts.root_names.to_string(), "<= 40"),
        (
            "hidden root names",
            counts.hidden_root_names.to_string(),
            "0",
        ),
        ("prelude names", counts.prelude_names.to_string(), "<= 28"),
        (
            "handler registrations",
            counts.handler_registrations.to_string(),
            "1",
        ),
        ("", String::new(), ""),
    ];
    println!("| figure | now | target |");
    println!("|---|---|---|");
    for (name, now, target) in rows.iter().filter(|r| !r.0.is_empty()) {
        println!("| {name} | {now} | {target} |");
    }
    Ok(())
}

fn count(root: &Path) -> Result<Counts, String> {
    let mut methods = BTreeSet::new();
    let mut shared_files = BTreeSet::new();
    let mut derefs_to_context = BTreeSet::new();
    for dir in ["crates/sched-core/src", "crates/sched/src"] {
        for file in rust_files(&root.join(dir))? {
            let text = fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let relative = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .to_string_lossy()
                .into_owned();
            if relative.contains("loom_models") {
                continue;
            }
            let code = strip(&text);
            for (ty, name) in public_inherent_methods(&code) {
                if ty == "Shared" {
                    shared_files.insert(relative.clone());
                }
                methods.insert(Method {
                    ty,
                    name,
                    file: relative.clone(),
                });
            }
            if impls_shared(&code) {
                shared_files.insert(relative.clone());
            }
            derefs_to_context.extend(deref_targets(&code, "Context"));
        }
    }
    let named = |prefixes: &[&str]| -> Vec<&Method> {
        methods
            .iter()
            .filter(|m| prefixes.iter().any(|p| is_verb(&m.name, p)))
            .collect()
    };
    let spawns = named(&["spawn"]);
    let context_spawns = spawns.iter().filter(|m| m.ty == "Context").count();
    let of = |ty: &str| -> (usize, usize) {
        let mine: Vec<&Method> = methods.iter().filter(|m| m.ty == ty).collect();
        let names: BTreeSet<&str> = mine.iter().map(|m| m.name.as_str()).collect();
        let files: BTreeSet<&str> = mine.iter().map(|m| m.file.as_str()).collect();
        (names.len(), files.len())
    };
    let (output_methods, output_files) = of("Output");
    let (context_methods, context_files) = of("Context");
    let facade = strip_comments_only(&read(&root.join("crates/sched/src/lib.rs"))?);
    let (root_names, hidden_root_names) = root_reexports(&facade);
    let handler_registrations = methods
        .iter()
        .filter(|m| m.ty.starts_with("Builder"))
        .filter(|m| {
            m.name == "handler" || m.name.ends_with("_handler") || is_verb(&m.name, "handler")
        })
        .count();
    Ok(Counts {
        spawn_definitions: spawns.len(),
        spawn_doors: spawns.len() + context_spawns * derefs_to_context.len(),
        send_definitions: named(&["send", "post", "tell"]).len(),
        ask_definitions: named(&["ask", "query"]).len(),
        output_methods,
        output_files,
        context_methods,
        context_files,
        shared_files: shared_files.len(),
        root_names,
        hidden_root_names,
        prelude_names: prelude_names(&facade),
        handler_registrations,
        methods: methods
            .iter()
            .filter(|m| {
                matches!(m.ty.as_str(), "Output" | "Context" | "Scheduler" | "Shared")
                    || ["spawn", "send", "post", "tell", "ask", "query"]
                        .iter()
                        .any(|p| is_verb(&m.name, p))
            })
            .cloned()
            .collect(),
    })
}

/// How many names the `pub mod prelude { .. }` of `code` re-exports: one
/// per `pub use path::Name;`, one per name in a `pub use path::{A, B};`.
fn prelude_names(code: &str) -> usize {
    let Some(start) = code.find("pub mod prelude {") else {
        return 0;
    };
    let body = &code[start + "pub mod prelude {".len()..];
    let body = &body[..body.find('}').map_or(body.len(), |at| {
        // The block ends at the first `}` not closing a `{A, B}` group.
        let mut depth = 0usize;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => return i,
                '}' => depth -= 1,
                _ => {}
            }
        }
        at
    })];
    body.split(';')
        .filter_map(|statement| statement.trim().strip_prefix("pub use"))
        .map(|path| match (path.find('{'), path.rfind('}')) {
            (Some(open), Some(close)) => path[open + 1..close]
                .split(',')
                .filter(|name| !name.trim().is_empty())
                .count(),
            _ => 1,
        })
        .sum()
}

/// Whether `name` is the verb `verb` or a variant of it (`send`,
/// `send_after`), not a word that starts with it (`asker`).
fn is_verb(name: &str, verb: &str) -> bool {
    name == verb
        || name
            .strip_prefix(verb)
            .is_some_and(|rest| rest.starts_with('_'))
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `text` with comments, string and char literals blanked, and test
/// modules (`#[cfg(test)]`, `#[cfg(all(test, ..))]` items) removed.
/// Whether `code` holds an inherent `impl` of `Shared`, named plainly or
/// by a path (`impl crate::engine::shared::Shared {`).
fn impls_shared(code: &str) -> bool {
    code.match_indices("impl").any(|(at, _)| {
        let starts_word = code[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        let rest = &code[at + "impl".len()..];
        let Some(rest) = rest.strip_prefix(char::is_whitespace) else {
            return false;
        };
        let ty = rest
            .trim_start()
            .split(['{', '<'])
            .next()
            .unwrap_or("")
            .trim();
        starts_word && (ty == "Shared" || ty.ends_with("::Shared"))
    })
}

fn strip(text: &str) -> String {
    let code = strip_comments_only(text);
    remove_test_items(&code)
}

/// `text` with comments and string literals blanked (newlines kept).
pub(crate) fn strip_comments_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(text.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(text.len(), |n| i + n + 2);
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            i = end;
        } else if let Some(raw) = rest.strip_prefix("r#\"") {
            let end = raw.find("\"#").map_or(text.len(), |n| i + 3 + n + 2);
            out.push_str("\"\"");
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            i = end;
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.extend(text[i..j.min(text.len())].chars().filter(|&c| c == '\n'));
            i = (j + 1).min(text.len());
        } else if bytes[i] == b'\'' && is_char_literal(rest) {
            let end = rest[1..].find('\'').map_or(text.len(), |n| i + 1 + n + 1);
            out.push_str("' '");
            i = end;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Whether `rest` (starting at a `'`) opens a char literal rather than a
/// lifetime: `'x'` or `'\..'`.
fn is_char_literal(rest: &str) -> bool {
    let mut chars = rest.chars().skip(1);
    matches!(
        (chars.next(), chars.next()),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// `code` without the items under a test-only `#[cfg(..)]`.
fn remove_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut done = 0;
    for range in test_items(code) {
        out.push_str(&code[done..range.start]);
        done = range.end;
    }
    out.push_str(&code[done..]);
    out
}

/// Where the items under a test-only `#[cfg(..)]` are in `code`, in
/// order: each from its attribute to its `;` or the brace closing its
/// first `{`.
fn test_items(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    let mut from = 0;
    loop {
        let rest = &code[from..];
        let next = ["#[cfg(test)]", "#[cfg(all(test"]
            .iter()
            .filter_map(|m| rest.find(m))
            .min();
        let Some(at) = next else {
            return found;
        };
        let after = &rest[at..];
        let end = match (after.find('{'), after.find(';')) {
            (Some(open), Some(semi)) if semi < open => semi + 1,
            (Some(open), _) => matching_brace(after, open).map_or(after.len(), |c| c + 1),
            (None, Some(semi)) => semi + 1,
            (None, None) => after.len(),
        };
        found.push(from + at..from + at + end);
        from += at + end;
    }
}

/// `code` with each line of a test-only item (as [`remove_test_items`]
/// finds them) replaced by [`TEST_MARK`](crate::sizes::TEST_MARK), every
/// newline kept: line numbers stay those of the file.
pub(crate) fn remove_test_items_keeping_lines(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut done = 0;
    for range in test_items(code) {
        out.push_str(&code[done..range.start]);
        let lines = code[range.clone()].matches('\n').count();
        out.push_str(crate::sizes::TEST_MARK);
        for _ in 0..lines {
            out.push('\n');
            out.push_str(crate::sizes::TEST_MARK);
        }
        done = range.end;
    }
    out.push_str(&code[done..]);
    out
}

/// The index of the brace closing the one at `open`.
fn matching_brace(text: &str, open: usize) -> Option<usize> {
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

/// (type, method) for each `pub fn` directly inside an inherent `impl`
/// (not `impl Trait for Type`) of `code`.
fn public_inherent_methods(code: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(at) = find_word(code, "impl", search) {
        search = at + 4;
        let Some(open) = code[at..].find('{').map(|o| at + o) else {
            break;
        };
        let header = &code[at + 4..open];
        if header.contains(';') || header.contains(" for ") || header.contains("\nfor ") {
            continue;
        }
        let Some(ty) = self_type(header) else {
            continue;
        };
        let Some(close) = matching_brace(code, open) else {
            break;
        };
        let body = &code[open + 1..close];
        found.extend(
            top_level_pub_fns(body)
                .into_iter()
                .map(|name| (ty.clone(), name)),
        );
    }
    found
}

/// The self type's last path segment of an `impl` header (generics and
/// lifetimes dropped): `impl<'a> crate::Output<'a>` is `Output`.
fn self_type(header: &str) -> Option<String> {
    let header = header.trim();
    // Skip the impl's own generics.
    let header = if header.starts_with('<') {
        let mut depth = 0usize;
        let mut end = 0;
        for (i, c) in header.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        &header[end..]
    } else {
        header
    };
    let path = header.split(['<', ' ', '\n']).find(|s| !s.is_empty())?;
    let last = path.rsplit("::").next()?.trim();
    (!last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| last.to_owned())
}

/// The names of the `pub fn`s at the top level of an impl's body.
fn top_level_pub_fns(body: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let bytes = body.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b'p' if depth == 0 && body[i..].starts_with("pub fn ") && word_start(body, i) => {
                let name: String = body[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            _ => {}
        }
        i += 1;
    }
    names
}

fn word_start(text: &str, at: usize) -> bool {
    at == 0 || !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
}

/// The first occurrence of `word` (as a whole word) in `text` from `from`.
fn find_word(text: &str, word: &str, from: usize) -> Option<usize> {
    let mut start = from;
    while let Some(at) = text[start..].find(word).map(|i| start + i) {
        let end = at + word.len();
        let after_ok = !text[end..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
        if word_start(text, at) && after_ok {
            return Some(at);
        }
        start = end;
    }
    None
}

/// The types of `code` that implement `Deref<Target = target>`.
fn deref_targets(code: &str, target: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(at) = code[search..].find("Deref for ").map(|i| search + i) {
        search = at + 10;
        let ty: String = code[search..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let block_end = code[search..]
            .find("fn deref")
            .map_or(code.len(), |i| search + i);
        let block = &code[search..block_end];
        if block.contains(&format!("type Target = {target};"))
            || block.contains(&format!("type Target = sched_core::{target};"))
            || block.contains(&format!("type Target = crate::{target};"))
        {
            found.push(ty);
        }
    }
    found
}

/// (names, hidden names) the crate root re-exports with `pub use` outside
/// its inline modules.
fn root_reexports(code: &str) -> (usize, usize) {
    let mut names = 0;
    let mut hidden = 0;
    let mut depth = 0usize;
    let mut pending_hidden = false;
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        if rest.starts_with('{') {
            depth += 1;
        } else if rest.starts_with('}') {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && rest.starts_with("#[doc(hidden)]") {
            pending_hidden = true;
        } else if depth == 0 && rest.starts_with("pub use ") && word_start(code, i) {
            let end = rest.find(';').map_or(code.len(), |e| i + e);
            let statement = &code[i + 8..end];
            let count = reexported_names(statement);
            names += count;
            if pending_hidden {
                hidden += count;
            }
            pending_hidden = false;
            i = end;
            continue;
        } else if depth == 0 && rest.starts_with("pub mod ") {
            pending_hidden = false;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    (names, hidden)
}

/// How many names a `use` tree brings in (`a::{B, C as D}` is 2; a glob
/// counts 1; `self` inside braces names the module).
fn reexported_names(statement: &str) -> usize {
    match statement.find('{') {
        None => 1,
        Some(open) => {
            let inner = statement[open + 1..].trim_end();
            let inner = inner.strip_suffix('}').unwrap_or(inner);
            top_level_parts(inner)
                .into_iter()
                .filter(|part| !part.trim().is_empty())
                .map(|part| reexported_names(part.trim()))
                .sum()
        }
    }
}

/// `text` split at its commas outside braces.
fn top_level_parts(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impl_of_shared_by_any_path_is_counted_and_a_trait_impl_is_not() {
        assert!(impls_shared("impl Shared {\n}"));
        assert!(impls_shared("impl Shared\n{\n}"));
        assert!(impls_shared("impl crate::engine::shared::Shared {}"));
        assert!(!impls_shared("impl Debug for Shared {}"));
        assert!(!impls_shared("impl SharedState {}"));
        assert!(!impls_shared("fn simpl Shared {}"));
    }

    #[test]
    fn inherent_methods_are_counted_and_trait_impls_are_not() {
        let code = strip(
            r#"
            impl<'a> crate::Output<'a> {
                /// pub fn in_a_comment()
                pub fn send(&mut self) { let s = "pub fn in_a_string"; { } }
                fn private(&self) {}
                pub fn spawn_with(&self) {}
            }
            impl Process for Output<'_> { pub fn not_inherent() {} }
            impl Context { pub fn ask(&self) {} }
            #[cfg(test)]
            mod tests { impl Context { pub fn in_a_test() {} } }
            "#,
        );
        let found = public_inherent_methods(&code);
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|(t, n)| (t.as_str(), n.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("Output", "send"),
                ("Output", "spawn_with"),
                ("Context", "ask")
            ]
        );
    }

    #[test]
    fn the_prelude_counts_each_name_of_each_use() {
        let code = "pub mod prelude {\n    pub use crate::{A, B};\n    pub use relay::C;\n    pub use core::{D, E, F,};\n}\npub mod other { pub use x::{G, H}; }";
        assert_eq!(prelude_names(code), 6);
        assert_eq!(prelude_names("pub mod elsewhere {}"), 0);
    }

    #[test]
    fn a_verb_is_counted_with_its_variants_and_not_in_other_words() {
        assert!(is_verb("ask", "ask"));
        assert!(is_verb("send_after", "send"));
        assert!(!is_verb("asker", "ask"));
        assert!(!is_verb("spawned", "spawn"));
    }

    #[test]
    fn root_reexports_count_names_and_hidden_ones() {
        let code = strip_comments_only(
            "pub use a::{B, C as D};\n#[doc(hidden)]\npub use e::{F, G::{H, I}};\npub mod m { pub use x::Y; }\npub use z::W;\n",
        );
        assert_eq!(root_reexports(&code), (6, 3));
    }

    #[test]
    fn the_deref_target_is_found() {
        let code = "impl std::ops::Deref for Scheduler {\n    type Target = Context;\n    fn deref(&self) -> &Context { &self.cx }\n}";
        assert_eq!(deref_targets(code, "Context"), ["Scheduler"]);
    }
}
