//! Finding the workspace's crates and what each one needs.

use std::fs;
use std::path::{Path, PathBuf};

/// One crate under `crates/`.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// The package name (what `cargo -p` takes).
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
}

impl Member {
    /// Whether the crate has loom models (`tests/loom.rs`).
    pub(crate) fn has_loom_models(&self) -> bool {
        self.dir.join("tests").join("loom.rs").is_file()
    }

    /// Whether any source file of the crate's library contains `unsafe`
    /// code, which is what miri is for.
    pub(crate) fn has_unsafe_code(&self) -> bool {
        sources_contain(&self.dir.join("src"), "unsafe ")
    }
}

fn sources_contain(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            sources_contain(&path, needle)
        } else {
            path.extension().is_some_and(|e| e == "rs")
                && fs::read_to_string(&path).is_ok_and(|text| text.contains(needle))
        }
    })
}

/// The workspace root: the parent of this crate's manifest directory.
pub(crate) fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .expect("xtask sits one level below the workspace root")
        .to_path_buf()
}

/// Every crate under `crates/`, sorted by name.
pub(crate) fn members() -> Vec<Member> {
    let mut members: Vec<Member> = fs::read_dir(root().join("crates"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().join("Cargo.toml").is_file())
                .map(|e| Member {
                    name: package_name(&e.path().join("Cargo.toml"))
                        .unwrap_or_else(|| e.file_name().to_string_lossy().into_owned()),
                    dir: e.path(),
                })
                .collect()
        })
        .unwrap_or_default();
    members.sort_by(|a, b| a.name.cmp(&b.name));
    members
}

/// The `name` of a manifest's `[package]`.
fn package_name(manifest: &Path) -> Option<String> {
    let text = fs::read_to_string(manifest).ok()?;
    let package = text.split("[package]").nth(1)?;
    package.lines().find_map(|line| {
        let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_string())
    })
}

/// The crates a command applies to: the one named, or all that `keep`
/// selects when none is named. Naming a crate that does not exist is an
/// error that lists the ones that do.
pub(crate) fn select(
    named: Option<&str>,
    keep: impl Fn(&Member) -> bool,
) -> Result<Vec<Member>, String> {
    let all = members();
    match named {
        Some(name) => all
            .iter()
            .find(|m| m.name == name || m.dir.file_name().is_some_and(|d| d == name))
            .cloned()
            .map(|m| vec![m])
            .ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
                format!(
                    "no crate `{name}` under crates/ (known: {})",
                    known.join(", ")
                )
            }),
        None => Ok(all.into_iter().filter(|m| keep(m)).collect()),
    }
}
