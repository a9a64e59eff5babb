//! Collecting what the checks found wrong, keeping the report readable
//! when one bug shows up thousands of times.

/// Violations found in one round: the first few in full, all of them
/// counted.
#[derive(Debug, Default)]
pub(crate) struct Violations {
    shown: Vec<String>,
    total: usize,
}

/// How many violations of a round are printed in full.
const SHOWN: usize = 40;

impl Violations {
    pub(crate) fn push(&mut self, what: String) {
        self.total += 1;
        if self.shown.len() < SHOWN {
            self.shown.push(what);
        }
    }

    pub(crate) fn extend(&mut self, all: impl IntoIterator<Item = String>) {
        for what in all {
            self.push(what);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// The violations, one per line, with a count of those left out.
    pub(crate) fn report(&self) -> String {
        let mut text = self.shown.join("\n");
        if self.total > self.shown.len() {
            text.push_str(&format!("\n... and {} more", self.total - self.shown.len()));
        }
        text
    }

    /// Whether some violation contains `needle` (for the checker's tests).
    #[cfg(test)]
    pub(crate) fn mentions(&self, needle: &str) -> bool {
        self.shown.iter().any(|v| v.contains(needle))
    }
}
