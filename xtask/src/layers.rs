//! `cargo xtask layers`: holds each crate of [`CRATES`] to its ladders:
//! every crate under `crates/` (`sched-deque`, `sched-mpsc`,
//! `sched-relay`, `sched-core`, `sched`, `relay-nats`, `sched-durable`,
//! `sched-durable-jetstream`, `sched-top`, and `sched-examples`, whose
//! library is its root alone); a test fails on a crate folder left out.
//!
//! A crate declares its ladder: each top-level module (a file, or a
//! folder taken as one) stands on a floor, ground floor first, and code
//! may use only what stands below its own floor, unless the arrow is one
//! of the ladder's named exceptions, each with its reason (the crate's
//! page in `docs/internals/` draws the same ladder). A floor of such a
//! ladder never holds two modules that use each other, and the only
//! circles among the modules are the ones the exceptions close.
//!
//! A crate may hold a folder to a ladder of its own too: inside
//! `sched-core`'s `engine/`, each sub-module (one file, or one folder's
//! `mod.rs` or file) stands on a floor of a second ladder, by the same
//! rule. `sched-core`'s own ladder, of its folders, is the one ladder that
//! lets a folder use another on its own floor ([`Ladder::along`]).
//!
//! The check reads every path into the crate (`crate::..`, `super::..`,
//! `self::..`, and a module's own child modules, grouped `{..}` imports
//! expanded) in the library's code, follows `use` re-exports to the file
//! that defines the name, and reports each arrow against a ladder. An
//! inline module (`mod name { .. }`) stands in the file that declares it;
//! a name that one of the root's takes from another crate (`sched`'s
//! `stats`, re-exporting `sched-core`'s) draws no arrow.
//! Comments, doc links, strings and test code are not code the library
//! runs, and are skipped: files that hold only tests or loom models, and
//! any item under a test-only `#[cfg(..)]` (`test`, or `all(.., test, ..)`),
//! such as an inline `mod tests { .. }`. Code after such an item is read.
//! A method called on a value is no path, and draws no arrow: `impl`
//! blocks of one type may stand on several floors.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::workspace::root;

/// Every crate the check holds to its ladders.
const CRATES: &[Crate<'static>] = &[
    SCHED_CORE,
    RELAY_NATS,
    DURABLE,
    DURABLE_JETSTREAM,
    DEQUE,
    MPSC,
    RELAY,
    SCHED,
    SCHED_TOP,
    EXAMPLES,
];

/// A crate and the ladders its code keeps.
#[derive(Debug, Clone, Copy)]
struct Crate<'a> {
    /// Its package, as messages name it.
    name: &'a str,
    /// Its folder under `crates/`.
    dir: &'a str,
    /// The internals page that draws its ladders.
    doc: &'a str,
    /// Top-level modules outside every ladder: the crate root (`lib`, it
    /// re-exports), test code that drives every floor.
    outside: &'a [&'a str],
    /// The crate's own ladder first (its [`Ladder::folder`] empty), then
    /// any folder's.
    ladders: &'a [Ladder<'a>],
}

/// Floors of modules, ground floor first, and the named exceptions.
#[derive(Debug, Clone, Copy)]
struct Ladder<'a> {
    /// The constant that holds the floors, for messages.
    name: &'a str,
    /// What stands on it: empty for the crate's top-level modules (a
    /// folder is one module), or a top-level folder (`engine`) whose
    /// sub-modules each stand on a floor: a file (`hooks` is
    /// `engine/hooks.rs`), a folder's `mod.rs` (`names` is
    /// `engine/names/mod.rs`) or a folder's file (`names::table`). The
    /// folder's own `mod.rs` stands on no floor: a path through one of its
    /// re-exports counts as an arrow to the file that defines the name.
    folder: &'a str,
    floors: &'a [&'a [&'a str]],
    /// Whether a module may use another on its own floor, not only below.
    along: bool,
    exceptions: &'a [Exception],
}

/// An arrow that the ladder allows although its target does not stand
/// below its source: it closes a circle among the crate's files, and
/// says which names tie it and why it stays.
#[derive(Debug)]
struct Exception {
    /// As the ladder names it (`hooks`, not `engine::hooks`).
    from: &'static str,
    to: &'static str,
    /// The names `from` may take from `to` (`self`: the module itself);
    /// any other name is an arrow like any other.
    names: &'static [&'static str],
    why: &'static str,
}

// ---------------------------------------------------------------- sched-core

const SCHED_CORE: Crate<'static> = Crate {
    name: "sched-core",
    dir: "sched-core",
    doc: "docs/internals/sched-core.md",
    outside: &["lib", "loom_models"],
    ladders: &[
        Ladder {
            name: "LADDER",
            folder: "",
            floors: LADDER,
            along: true,
            exceptions: &[],
        },
        Ladder {
            name: "ENGINE_LADDER",
            folder: "engine",
            floors: ENGINE_LADDER,
            along: false,
            exceptions: ENGINE_EXCEPTIONS,
        },
    ],
};

/// `sched-core`'s folders (and root files), ground floor first. A folder
/// may use its own floor and the ones below.
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

/// The sub-modules of `engine/`, ground floor first. Each may use only
/// what stands on a LOWER floor; an arrow to its own floor or above is
/// allowed only as an [`Exception`] below. `engine/mod.rs` declares the
/// sub-modules and re-exports their public types; it stands on no floor.
const ENGINE_LADDER: &[&[&str]] = &[
    // 1. Leaves: they name nothing of the engine. `commands` only declares
    //    its files.
    &[
        "clock",
        "commands",
        "commands::abandoned",
        "control",
        "figures",
        "ids",
        "in_records",
        "intercept",
        "live",
        "names::table",
        "remote::protocol",
        "stats",
    ],
    // 2. State the shared state holds that names one other engine file
    //    (`hooks` names `Context`: the one exception).
    &["histogram", "hooks", "remote::table"],
    // 3. The state every worker, completer and handle shares.
    &["shared"],
    // 4. The engine seen from running code (`repr(transparent)` over
    //    `Shared`); what needs only the shared state.
    &["context", "registration", "remote::ask"],
    // 5. What needs `Context`.
    &[
        "admission",
        "commands::completer",
        "long_steps",
        "remote::control",
        "shutdown",
        "upgrade",
    ],
    // 6. The actor features, introspection, the command handlers, the
    //    remote receiver, routing.
    &[
        "commands::handler",
        "groups",
        "introspect",
        "links",
        "monitors",
        "remote",
        "routing",
        "spawn",
    ],
    // 7. What uses a file of floor 6: typed handlers (`commands::handler`),
    //    remote monitors and links (`monitors`, `links`), and the targets
    //    of a send or an ask beyond a PID (`routing`'s `Target`): names,
    //    delayed sends, asks, a resolved process.
    &[
        "ask",
        "commands::typed",
        "names",
        "remote::relations",
        "resolved",
        "timers",
    ],
    // 8. One step's view of the engine: the one implementation of the
    //    step interface, a call into each feature; and a right to answer
    //    made apart or passed on, over the asks.
    &["forward", "stepping"],
];

/// The named exceptions of the engine's ladder, as few as the code
/// allows (`docs/internals/sched-core.md` lists the same). An exception
/// that no arrow takes any more fails the check, so the list cannot keep
/// a circle the code has dropped.
const ENGINE_EXCEPTIONS: &[Exception] = &[Exception {
    from: "hooks",
    to: "context",
    names: &["Context"],
    why: "the lifecycle hooks are the user's callbacks, and each is handed the \
          `&Context` of its engine; the shared state holds them (`Shared::hooks`) and \
          `Context` is `Shared` itself (`repr(transparent)`), so `shared` -> `hooks` -> \
          `context` -> `shared` is a circle. `Hooks` generic over the context it hands \
          out (as `control.rs` is over the state it is part of) would make `hooks` a leaf",
}];

// ---------------------------------------------------------------- relay-nats

const RELAY_NATS: Crate<'static> = Crate {
    name: "relay-nats",
    dir: "relay-nats",
    doc: "docs/internals/relay-nats.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "RELAY_NATS_LADDER",
        folder: "",
        floors: RELAY_NATS_LADDER,
        along: false,
        exceptions: &[],
    }],
};

/// `relay-nats`'s files, ground floor first; each uses only files on
/// lower floors, with no exception.
const RELAY_NATS_LADDER: &[&[&str]] = &[
    // 1. Leaves: the errors, the counters, the frame numbers, a lease's
    //    clock.
    &["error", "lease_clock", "sequence", "stats"],
    // 2. What names only the errors: the frame's bytes, who is up, the
    //    key-value bucket.
    &["kv", "membership", "wire"],
    // 3. Payloads to frames and back.
    &["codec"],
    // 4. What the user configures.
    &["config"],
    // 5. What the sending side and the transport's thread share, and the
    //    commands queued to the thread.
    &["shared"],
    // 6. What the shared state does beside the thread: renewing the names
    //    this node holds, symmetric loss, the farewells of a leave.
    &["farewell", "leases", "reset"],
    // 7. The transport's thread.
    &["io"],
    // 8. The handle the engine sends through.
    &["transport"],
    // 9. Cluster names, over the handle.
    &["names"],
    // 10. `Scheduler::builder().nats(..)`.
    &["scheduler_ext"],
    // 11. Keyed processes, over the cluster names and the leases' clocks.
    &["keyed"],
    // 12. Figures for the tools (features `live`, `metrics`).
    &["live", "metrics"],
];

// ------------------------------------------------------------------- durable

const DURABLE: Crate<'static> = Crate {
    name: "sched-durable",
    dir: "durable",
    doc: "docs/internals/durable.md",
    // `src/bin/` holds the `sched-journal` tool: a crate of its own, which
    // reaches the library by its name, never by `crate::`.
    outside: &["lib", "bin"],
    ladders: &[Ladder {
        name: "DURABLE_LADDER",
        folder: "",
        floors: DURABLE_LADDER,
        along: false,
        exceptions: DURABLE_EXCEPTIONS,
    }],
};

/// `sched-durable`'s modules (`store/` one of them), ground floor first.
const DURABLE_LADDER: &[&[&str]] = &[
    // 1. One error type.
    &["error"],
    // 2. A journal record, a receipt, the stores.
    &["receipt", "record", "store"],
    // 3. What a step is handed (`Events`), read from a record.
    &["event"],
    // 3. The user's side (`Durable`, `Output`), group commit, what became
    //    of a process.
    &["commit", "process", "status"],
    // 4. The journal's clock; the bookkeeping beside the user's state.
    &["clock", "state"],
    // 5. Replay; the channel between durable processes (beside the
    //    runner: the exception below).
    &["channel", "recovery"],
    // 6. The engine process that runs one durable process; inspection.
    &["inspect", "runner"],
    // 7. The handle.
    &["durability"],
    // 8. Figures of the handle (features `live`, `metrics`); the plain
    //    process that stands for a durable one.
    &["live", "metrics", "stand_in"],
];

/// The named exceptions of `sched-durable`'s ladder.
const DURABLE_EXCEPTIONS: &[Exception] = &[Exception {
    from: "channel",
    to: "runner",
    names: &["Envelope", "Shared"],
    why: "the channel and the runner are the two halves of one protocol: the runner \
          holds each receiver's `Inbound` and admits every `Envelope` through it \
          (`Inbound::receive` asks the store through the runners' `Shared` on first \
          contact), and the outbox deliveries (`channel::deliver`) find a receiver's \
          runner in `Shared`'s directory and send it an `Envelope`; both types live in \
          `runner.rs`",
}];

// --------------------------------------------------------- durable-jetstream

const DURABLE_JETSTREAM: Crate<'static> = Crate {
    name: "sched-durable-jetstream",
    dir: "durable-jetstream",
    doc: "docs/internals/durable-jetstream.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "DURABLE_JETSTREAM_LADDER",
        folder: "",
        floors: DURABLE_JETSTREAM_LADDER,
        along: false,
        exceptions: &[],
    }],
};

/// `sched-durable-jetstream`'s files, ground floor first; each uses only
/// files on lower floors, with no exception.
const DURABLE_JETSTREAM_LADDER: &[&[&str]] = &[
    // 1. Leaves: the two errors; what a stream message holds.
    &["error", "message"],
    // 2. A read of the stream, assembled into journals and an outbox.
    &["scan"],
    // 3. This incarnation: its connection, what it owns, publishing and
    //    reading.
    &["incarnation"],
    // 4. What it does: a fenced append; leases; recovery (takeovers, the
    //    outbox, forget, discard). Methods of the incarnation, each file
    //    apart.
    //    Watching the stream for other writers' sends.
    &["append", "lease", "recovery", "watch"],
    // 5. The handle: its thread, and `sched-durable`'s `Store`.
    &["store"],
    // 6. Opening one.
    &["builder"],
];

// --------------------------------------------------------------------- deque

const DEQUE: Crate<'static> = Crate {
    name: "sched-deque",
    dir: "deque",
    doc: "docs/internals/deque.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "DEQUE_LADDER",
        folder: "",
        floors: DEQUE_LADDER,
        along: false,
        exceptions: DEQUE_EXCEPTIONS,
    }],
};

/// `sched-deque`'s files, ground floor first.
const DEQUE_LADDER: &[&[&str]] = &[
    // 1. Leaves: positions and the packed word, a steal's outcome, the
    //    atomics (loom's under `cfg(loom)`).
    &["position", "steal", "sync"],
    // 2. The ring of slots.
    &["buffer"],
    // 3. The state the owner and its stealers share.
    &["inner"],
    // 4. The owner's handle (beside the stealers': the exception below).
    &["worker"],
    // 5. The stealers' handle.
    &["stealer"],
];

/// The named exceptions of `sched-deque`'s ladder.
const DEQUE_EXCEPTIONS: &[Exception] = &[Exception {
    from: "worker",
    to: "stealer",
    names: &["Stealer"],
    why: "the two handles of one deque: the owner hands out its stealers \
          (`Worker::stealer`), and a stealer steals half into the thief's own `Worker` \
          (`Stealer::steal_half_into` pushes onto it), so `worker` -> `stealer` -> \
          `worker` is a circle",
}];

// ---------------------------------------------------------------------- mpsc

const MPSC: Crate<'static> = Crate {
    name: "sched-mpsc",
    dir: "mpsc",
    doc: "docs/internals/mpsc.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "MPSC_LADDER",
        folder: "",
        floors: MPSC_LADDER,
        along: false,
        exceptions: &[],
    }],
};

/// `sched-mpsc`'s modules (`queue/` one of them), ground floor first;
/// each uses only modules on lower floors, with no exception.
const MPSC_LADDER: &[&[&str]] = &[
    // 1. Leaves: the error a push returns, the atomics (loom's under
    //    `cfg(loom)`).
    &["error", "sync"],
    // 2. The queue: blocks, cursors, the producer and consumer handles.
    &["queue"],
];

// --------------------------------------------------------------------- relay

const RELAY: Crate<'static> = Crate {
    name: "sched-relay",
    dir: "relay",
    doc: "docs/internals/relay.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "RELAY_LADDER",
        folder: "",
        floors: RELAY_LADDER,
        along: false,
        exceptions: RELAY_EXCEPTIONS,
    }],
};

/// `sched-relay`'s files, ground floor first.
const RELAY_LADDER: &[&[&str]] = &[
    // 1. The process identifier; a receipt (names nothing of the crate:
    //    the package it rides on holds it, not the other way).
    &["pid", "receipt"],
    // 2. What names only PIDs: the shim (its map is keyed by PID), a
    //    refused registration; the inline body (beside the package: the
    //    exception below).
    &["inline", "register_error", "sync"],
    // 3. Handing out PIDs; the message package.
    &["allocator", "package"],
    // 4. What names packages: a typed address, a failed send.
    &["addr", "send_error"],
    // 5. What packages are sent to.
    &["receiver"],
    // 6. Where packages go: other nodes, the routing table.
    &["remote", "router"],
];

/// The named exceptions of `sched-relay`'s ladder.
const RELAY_EXCEPTIONS: &[Exception] = &[Exception {
    from: "inline",
    to: "package",
    names: &["Payload"],
    why: "the two bodies of one package: a package holds a small value inline \
          (`Body::Inline`) or boxed as a `Payload` (`Box<dyn Any + Send>`, defined in \
          `package.rs`), and an inline value moves out into a `Payload` \
          (`Inline::into_box`) and borrows its `Send + !Sync` marker, so `package` -> \
          `inline` -> `package` is a circle; `Payload` defined in `inline.rs` would \
          make `inline` a leaf",
}];

// --------------------------------------------------------------------- sched

const SCHED: Crate<'static> = Crate {
    name: "sched",
    dir: "sched",
    doc: "docs/internals/sched.md",
    outside: &["lib"],
    ladders: &[Ladder {
        name: "SCHED_LADDER",
        folder: "",
        floors: SCHED_LADDER,
        along: false,
        exceptions: SCHED_EXCEPTIONS,
    }],
};

/// `sched`'s modules (`live/` and `supervisor/` each one), ground floor
/// first. The facade's root re-exports `sched-core`'s names in inline
/// modules (`stats`, `engine`, ..), outside the ladder.
const SCHED_LADDER: &[&[&str]] = &[
    // 1. What builds on the engine alone: a command call with retries,
    //    the live endpoint, the metrics publisher, supervision.
    &["call", "live", "metrics", "supervisor"],
    // 2. The scheduler users hold (beside its builder: the exception
    //    below).
    &["scheduler"],
    // 3. Its builder.
    &["builder"],
];

/// The named exceptions of `sched`'s ladder.
const SCHED_EXCEPTIONS: &[Exception] = &[Exception {
    from: "scheduler",
    to: "builder",
    names: &["SchedulerBuilder"],
    why: "the two names of one handle: `Scheduler::builder()` returns a \
          `SchedulerBuilder`, which is `sched_core::Builder<Scheduler>`, the engine's \
          builder that builds a `Scheduler`, so `scheduler` -> `builder` -> \
          `scheduler` is a circle; the alias declared in `scheduler.rs` would leave \
          `builder.rs` nothing",
}];

// ----------------------------------------------------------------- sched-top

const SCHED_TOP: Crate<'static> = Crate {
    name: "sched-top",
    dir: "sched-top",
    doc: "docs/internals/sched-top.md",
    // `src/main.rs` is the `sched-top` program: a crate of its own, which
    // reaches the library by its name, never by `crate::`.
    outside: &["lib", "main"],
    ladders: &[Ladder {
        name: "SCHED_TOP_LADDER",
        folder: "",
        floors: SCHED_TOP_LADDER,
        along: false,
        exceptions: &[],
    }],
};

/// `sched-top`'s files, ground floor first; each uses only files on lower
/// floors, with no exception.
const SCHED_TOP_LADDER: &[&[&str]] = &[
    // 1. Leaves: the command line, the fetching thread, snapshots to rows.
    &["cli", "fetch", "view"],
    // 2. The program's state.
    &["app"],
    // 3. Drawing it, and the keys.
    &["ui"],
];

// ------------------------------------------------------------ sched-examples

const EXAMPLES: Crate<'static> = Crate {
    name: "sched-examples",
    dir: "examples",
    doc: "docs/internals/development.md",
    // Its library is the root alone (the examples are under `examples/`).
    outside: &["lib"],
    ladders: &[Ladder {
        name: "EXAMPLES_LADDER",
        folder: "",
        floors: &[],
        along: false,
        exceptions: &[],
    }],
};

pub(crate) fn layers() -> Result<(), String> {
    let mut broken = Vec::new();
    for krate in CRATES {
        let src = root().join("crates").join(krate.dir).join("src");
        let mut files = BTreeMap::new();
        read_tree(&src, &src, &mut files)?;
        match check(&files, krate) {
            Ok(summary) => eprintln!("{summary}"),
            Err(problems) => broken.push(problems),
        }
    }
    if broken.is_empty() {
        Ok(())
    } else {
        Err(broken.join("\n"))
    }
}

/// Every `.rs` file under `dir`, by its path under `src` (with `/`).
fn read_tree(src: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            read_tree(src, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let text = fs::read_to_string(&path).map_err(|e| format!("reading {rel}: {e}"))?;
            out.insert(rel, text);
        }
    }
    Ok(())
}

impl Ladder<'_> {
    /// The rung a module stands on in this ladder, if the ladder holds it:
    /// its top-level module, or its path under [`Ladder::folder`].
    fn unit(&self, module: &[String]) -> Option<String> {
        if self.folder.is_empty() {
            module.first().cloned()
        } else if module.len() > 1 && module[0] == self.folder {
            Some(module[1..].join("::"))
        } else {
            None
        }
    }

    /// A rung as messages name it (`engine::hooks`, `io`).
    fn shown(&self, unit: &str) -> String {
        if self.folder.is_empty() {
            unit.to_string()
        } else {
            format!("{}::{unit}", self.folder)
        }
    }

    /// The ladder as messages name it.
    fn title(&self, krate: &Crate<'_>) -> String {
        if self.folder.is_empty() {
            format!("{}'s ladder", krate.name)
        } else {
            format!("the {}'s ladder", self.folder)
        }
    }
}

/// What one ladder saw over a tree.
#[derive(Default)]
struct Tally {
    /// The arrows between two of its rungs.
    arrows: BTreeSet<(String, String)>,
    /// Those an exception allows.
    excepted: BTreeSet<(String, String)>,
    /// How many arrows each exception allowed.
    used: Vec<usize>,
}

/// Holds the source tree `files` (path under `src` -> text) to the
/// ladders of `krate`: a summary, or every broken rung.
fn check(files: &BTreeMap<String, String>, krate: &Crate<'_>) -> Result<String, String> {
    let mut modules = BTreeSet::new();
    let mut aliases = BTreeMap::new();
    let mut inline = BTreeSet::new();
    let mut scans = Vec::new();
    for (rel, text) in files {
        let module = file_module(rel);
        let scan = scan(text, &module);
        modules.insert(module.clone());
        inline.extend(scan.inline.iter().cloned());
        aliases.extend(scan.aliases.iter().cloned());
        scans.push((rel, module, scan));
    }
    modules.extend(inline.iter().cloned());
    let tree = Tree {
        modules,
        inline,
        aliases,
    };

    let mut problems = Vec::new();
    let mut tallies: Vec<Tally> = krate
        .ladders
        .iter()
        .map(|ladder| Tally {
            used: vec![0; ladder.exceptions.len()],
            ..Tally::default()
        })
        .collect();
    for (rel, module, scan) in &scans {
        let top = module.first().map(String::as_str).unwrap_or("lib");
        if krate.outside.contains(&top) || is_test_file(rel) {
            continue;
        }
        // The file's rung and floor on each ladder that holds it.
        let mut rungs = Vec::new();
        for (at, ladder) in krate.ladders.iter().enumerate() {
            let Some(unit) = ladder.unit(module) else {
                continue;
            };
            match floor(ladder.floors, &unit) {
                Some(floor) => rungs.push((at, unit, floor)),
                None => problems.push(format!(
                    "`{}` (src/{rel}) stands on no floor of {}: add it to {} in \
                     xtask/src/layers.rs and to {}",
                    ladder.shown(&unit),
                    ladder.title(krate),
                    ladder.name,
                    krate.doc
                )),
            }
        }
        // Off the crate's own ladder: its arrows are not read.
        if krate.ladders.first().is_some_and(|l| l.folder.is_empty())
            && rungs.first().is_none_or(|(at, ..)| *at != 0)
        {
            continue;
        }
        for (line, path) in &scan.paths {
            // The file the path reaches, and the name it takes there.
            let (mut target, item) = tree.resolve(path);
            // An inline module stands in the file that declares it. One of
            // the root's (`sched`'s `pub mod stats { pub use sched_core::..; }`)
            // holds a name the root takes from another crate (its own names
            // are followed through its `use`s): the root stands outside.
            let inline = tree.inline.contains(&target);
            while tree.inline.contains(&target) {
                target.pop();
            }
            if inline && target.is_empty() && krate.outside.contains(&"lib") {
                continue;
            }
            if target.is_empty() {
                problems.push(format!(
                    "src/{rel}:{line}: `{}` names no module of the crate (name the \
                     module, not a name at the root; give a new module a floor in \
                     xtask/src/layers.rs)",
                    path.join("::")
                ));
                continue;
            }
            let arrow = Arrow {
                rel,
                line: *line,
                path,
                target: &target,
                item: &item,
            };
            for (at, from, from_floor) in &rungs {
                let ladder = &krate.ladders[*at];
                if let Some(problem) =
                    arrow.against(krate, ladder, from, *from_floor, &mut tallies[*at])
                {
                    problems.push(problem);
                }
            }
        }
    }
    for (ladder, tally) in krate.ladders.iter().zip(&tallies) {
        for (exception, count) in ladder.exceptions.iter().zip(&tally.used) {
            if *count == 0 {
                problems.push(format!(
                    "the exception `{}` -> `{}` ({}) is no longer taken: remove it from \
                     the exceptions of {} in xtask/src/layers.rs and from {}",
                    ladder.shown(exception.from),
                    ladder.shown(exception.to),
                    exception.names.join(", "),
                    ladder.title(krate),
                    krate.doc
                ));
            }
        }
    }
    let mut summary = Vec::new();
    for (ladder, tally) in krate.ladders.iter().zip(&tallies) {
        let units: BTreeSet<String> = scans
            .iter()
            .filter(|(rel, module, _)| {
                let top = module.first().map(String::as_str).unwrap_or("lib");
                !is_test_file(rel) && !krate.outside.contains(&top)
            })
            .filter_map(|(_, module, _)| ladder.unit(module))
            .collect();
        for name in ladder.floors.iter().flat_map(|f| f.iter()) {
            if !units.contains(*name) {
                problems.push(format!(
                    "`{}` stands on {} but no file holds it: remove or rename it in {} \
                     and {}",
                    ladder.shown(name),
                    ladder.title(krate),
                    ladder.name,
                    krate.doc
                ));
            }
        }
        let mut line = format!(
            "{}: {} {} on {} floors, {} arrows between them, {} of them by a named \
             exception{}",
            ladder.title(krate),
            units.len(),
            if ladder.folder.is_empty() {
                "modules"
            } else {
                "files"
            },
            ladder.floors.len(),
            tally.arrows.len(),
            tally.excepted.len(),
            if ladder.along {
                " (a module may use its own floor)"
            } else {
                ""
            }
        );
        for exception in ladder.exceptions {
            line.push_str(&format!(
                "\n  {} -> {} ({}): {}",
                ladder.shown(exception.from),
                ladder.shown(exception.to),
                exception.names.join(", "),
                exception.why
            ));
        }
        summary.push(line);
    }
    if problems.is_empty() {
        Ok(summary.join("\n"))
    } else {
        Err(format!(
            "the ladders of {} are broken:\n  {}",
            krate.name,
            problems.join("\n  ")
        ))
    }
}

/// One path of a file's code, to the module `target` (not the root),
/// where it takes `item`.
struct Arrow<'s> {
    rel: &'s str,
    line: usize,
    path: &'s [String],
    target: &'s [String],
    item: &'s str,
}

impl Arrow<'_> {
    /// Holds the arrow against `ladder`, on which its file stands at
    /// rung `from` on floor `from_floor`: what is wrong, if anything.
    fn against(
        &self,
        krate: &Crate<'_>,
        ladder: &Ladder<'_>,
        from: &str,
        from_floor: usize,
        tally: &mut Tally,
    ) -> Option<String> {
        let (rel, line, item) = (self.rel, self.line, self.item);
        if ladder.folder.is_empty() {
            if krate.outside.contains(&self.target[0].as_str()) {
                return None;
            }
        } else if self.target[0] != ladder.folder {
            return None;
        } else if self.target.len() == 1 {
            return Some(format!(
                "src/{rel}:{line}: `{}` names `{}/mod.rs`, which stands on no floor: \
                 name the file that defines `{item}`, or re-export it there",
                self.path.join("::"),
                ladder.folder,
            ));
        }
        let to = ladder.unit(self.target).expect("a target the ladder holds");
        if to == from {
            return None;
        }
        tally.arrows.insert((from.to_string(), to.clone()));
        let Some(to_floor) = floor(ladder.floors, &to) else {
            return Some(format!(
                "src/{rel}:{line}: `{}` stands on no floor of {}: add it to {} in \
                 xtask/src/layers.rs",
                ladder.shown(&to),
                ladder.title(krate),
                ladder.name
            ));
        };
        if to_floor < from_floor || (ladder.along && to_floor == from_floor) {
            return None;
        }
        let excepted = ladder
            .exceptions
            .iter()
            .position(|e| e.from == from && e.to == to && e.names.contains(&item));
        if let Some(at) = excepted {
            tally.used[at] += 1;
            tally.excepted.insert((from.to_string(), to));
            return None;
        }
        let (from, to) = (ladder.shown(from), ladder.shown(&to));
        Some(if ladder.along {
            format!(
                "src/{rel}:{line}: `{from}` reaches up to `{to}` (`{}`)",
                self.path.join("::")
            )
        } else {
            format!(
                "src/{rel}:{line}: `{from}` (floor {}) uses `{item}` of `{to}` (floor {}), \
                 which does not stand below it: give `{from}` a floor above `{to}` in {} \
                 (xtask/src/layers.rs and {}), or, where that closes a circle, break the \
                 circle",
                from_floor + 1,
                to_floor + 1,
                ladder.name,
                krate.doc
            )
        })
    }
}

fn floor(ladder: &[&[&str]], module: &str) -> Option<usize> {
    ladder.iter().position(|floor| floor.contains(&module))
}

/// Files that hold only tests (unit tests beside the code, loom models).
fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.ends_with("tests.rs") || name.ends_with("_loom.rs") || name == "loom.rs"
}

/// The module path of a file under `src`: `lib.rs` is the root,
/// `engine/mod.rs` is `engine`, `engine/names/table.rs` is
/// `engine::names::table`.
fn file_module(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
        parts.pop();
    }
    parts
}

/// The crate's modules (one per file, and the inline ones) and the names
/// its `use` items bring into a module, to follow a path to the file that
/// defines it.
struct Tree {
    modules: BTreeSet<Vec<String>>,
    /// The inline modules (`mod name { .. }`), which stand in their file.
    inline: BTreeSet<Vec<String>>,
    /// `module::name` -> the absolute path it stands for.
    aliases: BTreeMap<Vec<String>, Vec<String>>,
}

impl Tree {
    /// The file module an absolute path ends in, and the name it takes
    /// from there (`self` when it names the module itself).
    fn resolve(&self, path: &[String]) -> (Vec<String>, String) {
        let mut path = path.to_vec();
        let mut current = Vec::new();
        let mut at = 0;
        let mut hops = 0;
        while at < path.len() {
            let mut next = current.clone();
            next.push(path[at].clone());
            if self.modules.contains(&next) {
                current = next;
                at += 1;
                continue;
            }
            match self.aliases.get(&next) {
                Some(target) if hops < 16 && target != &next => {
                    hops += 1;
                    let mut whole = target.clone();
                    whole.extend_from_slice(&path[at + 1..]);
                    path = whole;
                    current.clear();
                    at = 0;
                }
                _ => break,
            }
        }
        let item = path.get(at).cloned().unwrap_or_else(|| "self".to_string());
        (current, item)
    }
}

/// What one file says about the crate's paths.
#[derive(Debug, Default)]
struct Scan {
    /// Every path into the crate in the file's code, absolute, with its
    /// (1-based) line.
    paths: Vec<(usize, Vec<String>)>,
    /// Names its `use` items bring in: `module::name` -> absolute path.
    aliases: Vec<(Vec<String>, Vec<String>)>,
    /// Its inline modules (`mod name { .. }` outside test code), absolute.
    inline: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

impl Token {
    fn is(&self, word: &str) -> bool {
        matches!(&self.tok, Tok::Ident(w) if w == word)
    }

    fn is_punct(&self, c: char) -> bool {
        self.tok == Tok::Punct(c)
    }
}

/// Rust source as tokens: identifiers (keywords included), `::` and
/// single punctuation, with comments, strings, chars and numbers left
/// out.
fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips a quoted literal whose opening quote is at `i`, escapes read.
    let skip_quoted = |i: &mut usize, line: &mut usize, quote: char| {
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' {
                *i += 1;
            }
            if chars.get(*i) == Some(&'\n') {
                *line += 1;
            }
            *i += 1;
        }
        *i += 1;
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            skip_quoted(&mut i, &mut line, '"');
        } else if c == '\'' {
            if next == Some('\\') || chars.get(i + 2) == Some(&'\'') {
                skip_quoted(&mut i, &mut line, '\'');
            } else {
                // A lifetime or a label.
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let prefix = word == "r" || word == "br" || word == "b" || word == "c";
            if prefix && chars.get(i) == Some(&'"') && word != "r" && word != "br" {
                skip_quoted(&mut i, &mut line, '"');
            } else if word == "b" && chars.get(i) == Some(&'\'') {
                skip_quoted(&mut i, &mut line, '\'');
            } else if (word == "r" || word == "br") && matches!(chars.get(i), Some('"') | Some('#'))
            {
                let mut hashes = 0;
                while chars.get(i + hashes) == Some(&'#') {
                    hashes += 1;
                }
                if chars.get(i + hashes) == Some(&'"') {
                    // A raw string: up to `"` and as many `#`.
                    i += hashes + 1;
                    loop {
                        match chars.get(i) {
                            None => break,
                            Some('"') if (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) => {
                                i += hashes + 1;
                                break;
                            }
                            Some(ch) => {
                                if *ch == '\n' {
                                    line += 1;
                                }
                                i += 1;
                            }
                        }
                    }
                } else {
                    // A raw identifier, `r#name`.
                    i += 1;
                    let start = i;
                    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                        i += 1;
                    }
                    out.push(Token {
                        tok: Tok::Ident(chars[start..i].iter().collect()),
                        line,
                    });
                }
            } else {
                out.push(Token {
                    tok: Tok::Ident(word),
                    line,
                });
            }
        } else if c == ':' && next == Some(':') {
            out.push(Token {
                tok: Tok::Colons,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                line,
            });
            i += 1;
        }
    }
    out
}

/// Whether the attribute's tokens (inside `#[..]`) are a `cfg` that holds
/// only in tests: `cfg(test)`, or `cfg(all(.., test, ..))`.
fn is_test_cfg(attr: &[Token]) -> bool {
    let words: Vec<&Tok> = attr.iter().map(|t| &t.tok).collect();
    let [Tok::Ident(cfg), Tok::Punct('('), inner @ .., Tok::Punct(')')] = words.as_slice() else {
        return false;
    };
    if cfg != "cfg" {
        return false;
    }
    let is_test = |arg: &[&Tok]| matches!(arg, [Tok::Ident(w)] if w == "test");
    if is_test(inner) {
        return true;
    }
    let [Tok::Ident(all), Tok::Punct('('), args @ .., Tok::Punct(')')] = inner else {
        return false;
    };
    if all != "all" {
        return false;
    }
    // The top-level arguments of `all(..)`.
    let mut depth = 0;
    let mut start = 0;
    for (at, tok) in args.iter().enumerate() {
        match tok {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => depth -= 1,
            Tok::Punct(',') if depth == 0 => {
                if is_test(&args[start..at]) {
                    return true;
                }
                start = at + 1;
            }
            _ => {}
        }
    }
    is_test(&args[start..])
}

/// The tokens without the items under a test-only `#[cfg(..)]`: an inline
/// test module, a test helper, a test-only `use`. Only that item is left
/// out; what follows it is read.
fn without_test_items(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if !(tokens[i].is_punct('#') && tokens.get(i + 1).is_some_and(|t| t.is_punct('['))) {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let end = matching(&tokens, i + 1);
        if !is_test_cfg(&tokens[i + 2..end.min(tokens.len())]) {
            out.extend_from_slice(&tokens[i..(end + 1).min(tokens.len())]);
            i = end + 1;
            continue;
        }
        // The test-only item: past its other attributes, to its end.
        let mut at = end + 1;
        while at < tokens.len()
            && tokens[at].is_punct('#')
            && tokens.get(at + 1).is_some_and(|t| t.is_punct('['))
        {
            at = matching(&tokens, at + 1) + 1;
        }
        i = item_end(&tokens, at);
    }
    out
}

/// The index of the bracket that closes the one at `open` (or the end).
fn matching(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0i32;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        match token.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return at;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The index just past the item (or statement, field, match arm) that
/// starts at `start`: past its `;`, past the `}` of its body, or at the
/// `,` or closing bracket that ends it inside a list.
fn item_end(tokens: &[Token], start: usize) -> usize {
    const ITEMS: &[&str] = &[
        "pub",
        "fn",
        "impl",
        "mod",
        "struct",
        "enum",
        "trait",
        "union",
        "use",
        "const",
        "static",
        "type",
        "unsafe",
        "async",
        "extern",
        "macro_rules",
    ];
    let is_item = tokens
        .get(start)
        .is_some_and(|t| ITEMS.iter().any(|w| t.is(w)));
    let is_use = tokens[start..]
        .iter()
        .take(6)
        .take_while(|t| !t.is_punct('{') && !t.is_punct(';'))
        .any(|t| t.is("use"));
    let mut depth = 0i32;
    for (at, token) in tokens.iter().enumerate().skip(start) {
        match token.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth < 0 {
                    return at;
                }
                if depth == 0 && token.is_punct('}') && !is_use {
                    return at + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return at + 1,
            Tok::Punct(',') if depth == 0 && !is_item => return at + 1,
            _ => {}
        }
    }
    tokens.len()
}

/// The paths into the crate in `text`, a file of the module `module`.
fn scan(text: &str, module: &[String]) -> Scan {
    let tokens = without_test_items(lex(text));
    let mut scan = Scan::default();
    // The module's own child modules (`mod name;`), which a path may name
    // bare.
    let children: BTreeSet<&str> = tokens
        .windows(3)
        .filter_map(|w| match (&w[1].tok, &w[2].tok) {
            (Tok::Ident(name), Tok::Punct(';')) if w[0].is("mod") => Some(name.as_str()),
            _ => None,
        })
        .collect();
    // Inline modules (`mod name { .. }`) opened around the current token,
    // one entry per open brace.
    let mut braces: Vec<Option<String>> = Vec::new();
    let mut in_use = false;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        match &token.tok {
            Tok::Punct('{') => {
                let before = |back: usize| i.checked_sub(back).map(|p| &tokens[p]);
                let name = match (before(2), before(1)) {
                    (
                        Some(m),
                        Some(Token {
                            tok: Tok::Ident(name),
                            ..
                        }),
                    ) if m.is("mod") => Some(name.clone()),
                    _ => None,
                };
                if let Some(name) = &name {
                    let mut inline = module.to_vec();
                    inline.extend(braces.iter().flatten().cloned());
                    inline.push(name.clone());
                    scan.inline.push(inline);
                }
                braces.push(name);
                i += 1;
                continue;
            }
            Tok::Punct('}') => {
                braces.pop();
                i += 1;
                continue;
            }
            Tok::Punct(';') => {
                in_use = false;
                i += 1;
                continue;
            }
            Tok::Ident(word) if word == "use" => {
                in_use = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let Tok::Ident(first) = &token.tok else {
            i += 1;
            continue;
        };
        let starts_path = tokens.get(i + 1).is_some_and(|t| t.tok == Tok::Colons);
        let after_path_or_macro = i > 0
            && (tokens[i - 1].tok == Tok::Colons
                || tokens[i - 1].is_punct('$')
                || tokens[i - 1].is_punct('.'));
        let inline: Vec<String> = braces.iter().flatten().cloned().collect();
        let ours = matches!(first.as_str(), "crate" | "super" | "self")
            || (inline.is_empty() && children.contains(first.as_str()));
        if !starts_path || after_path_or_macro || !ours {
            i += 1;
            continue;
        }
        let mut here = module.to_vec();
        here.extend(inline);
        let mut leaves = Vec::new();
        i = use_tree(&tokens, i, Vec::new(), &mut leaves);
        for (line, segments, alias) in leaves {
            let mut absolute = here.clone();
            for segment in &segments {
                match segment.as_str() {
                    "crate" => absolute.clear(),
                    "super" => {
                        absolute.pop();
                    }
                    "self" => {}
                    _ => absolute.push(segment.clone()),
                }
            }
            if in_use {
                let name = alias.or_else(|| {
                    segments
                        .iter()
                        .rev()
                        .find(|s| !matches!(s.as_str(), "self" | "*"))
                        .cloned()
                });
                if let Some(name) = name.filter(|n| n != "_") {
                    if !segments.iter().any(|s| s == "*") {
                        let mut key = here.clone();
                        key.push(name);
                        scan.aliases.push((key, absolute.clone()));
                    }
                }
            }
            absolute.retain(|s| s != "*");
            scan.paths.push((line, absolute));
        }
    }
    scan
}

/// Reads the path (or `use` tree) that starts at `i`, onto `prefix`;
/// pushes each leaf (its line, its segments, its `as` name) and returns
/// the index past it.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<(usize, Vec<String>, Option<String>)>,
) -> usize {
    let mut line = tokens.get(i).map_or(0, |t| t.line);
    loop {
        match tokens.get(i).map(|t| &t.tok) {
            Some(Tok::Ident(segment)) => {
                prefix.push(segment.clone());
                line = tokens[i].line;
                i += 1;
            }
            Some(Tok::Punct('*')) => {
                prefix.push("*".to_string());
                leaves.push((tokens[i].line, prefix, None));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match tokens.get(i) {
                        None => return i,
                        Some(t) if t.is_punct('}') => return i + 1,
                        Some(t) if t.is_punct(',') => i += 1,
                        Some(_) => i = use_tree(tokens, i, prefix.clone(), leaves),
                    }
                }
            }
            _ => {
                leaves.push((line, prefix, None));
                return i;
            }
        }
        if tokens.get(i).is_some_and(|t| t.tok == Tok::Colons) {
            i += 1;
            continue;
        }
        let alias = match (tokens.get(i), tokens.get(i + 1)) {
            (
                Some(a),
                Some(Token {
                    tok: Tok::Ident(name),
                    ..
                }),
            ) if a.is("as") => {
                i += 2;
                Some(name.clone())
            }
            _ => None,
        };
        leaves.push((line, prefix, alias));
        return i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine's ladder of the small crate: `engine/{a,b,c}.rs` on three
    /// floors, where `a` may take `C` from `c` (the one exception).
    const SMALL_ENGINE: Ladder<'static> = Ladder {
        name: "ENGINE_LADDER",
        folder: "engine",
        floors: &[&["a"], &["b"], &["c"]],
        along: false,
        exceptions: &[Exception {
            from: "a",
            to: "c",
            names: &["C"],
            why: "a test",
        }],
    };

    /// A small crate for synthetic trees: its folders on three floors (a
    /// folder may use its own floor, as in `sched-core`), and the engine's
    /// ladder.
    const SMALL: Crate<'static> = Crate {
        name: "small",
        dir: "small",
        doc: "docs/internals/small.md",
        outside: &["lib"],
        ladders: &[
            Ladder {
                name: "LADDER",
                folder: "",
                floors: &[&["sync"], &["engine"], &["worker"]],
                along: true,
                exceptions: &[],
            },
            SMALL_ENGINE,
        ],
    };

    /// A tree of the small ladder that keeps it (the exception taken), with
    /// `extra` appended to the file `file`.
    fn tree(file: &str, extra: &str) -> BTreeMap<String, String> {
        let mut files: BTreeMap<String, String> = [
            ("lib.rs", "mod engine;\nmod sync;\nmod worker;\n"),
            ("sync.rs", "pub(crate) struct S;\n"),
            (
                "engine/mod.rs",
                "pub(crate) mod a;\npub(crate) mod b;\npub(crate) mod c;\npub use c::C;\n",
            ),
            (
                "engine/a.rs",
                "use crate::sync::S;\nuse super::C;\npub struct A;\n",
            ),
            ("engine/b.rs", "use super::a::A;\npub struct B;\n"),
            (
                "engine/c.rs",
                "use crate::engine::b::B;\npub struct C;\npub struct D;\n",
            ),
            ("worker/mod.rs", "use crate::engine::C;\n"),
        ]
        .into_iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
        files
            .get_mut(file)
            .expect("a file of the tree")
            .push_str(extra);
        files
    }

    fn paths(text: &str, module: &[&str]) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        scan(text, &module)
            .paths
            .into_iter()
            .map(|(_, p)| p.join("::"))
            .collect()
    }

    #[test]
    fn a_tree_that_keeps_the_ladder_passes() {
        let summary = check(&tree("engine/c.rs", ""), &SMALL).expect("it keeps the ladder");
        assert!(
            summary.contains("3 files on 3 floors, 3 arrows"),
            "{summary}"
        );
    }

    #[test]
    fn an_arrow_up_the_engine_s_ladder_fails() {
        let broken = check(&tree("engine/b.rs", "use super::c::D;\n"), &SMALL).unwrap_err();
        assert!(
            broken.contains(
                "src/engine/b.rs:3: `engine::b` (floor 2) uses `D` of `engine::c` (floor 3)"
            ),
            "{broken}"
        );
    }

    #[test]
    fn an_arrow_along_one_floor_of_the_engine_fails() {
        let ladders = [
            SMALL.ladders[0],
            Ladder {
                floors: &[&["a"], &["b", "c"]],
                ..SMALL_ENGINE
            },
        ];
        let rules = Crate {
            ladders: &ladders,
            ..SMALL
        };
        let broken = check(&tree("engine/c.rs", ""), &rules).unwrap_err();
        assert!(
            broken.contains("`engine::c` (floor 2) uses `B` of `engine::b` (floor 2)"),
            "{broken}"
        );
    }

    #[test]
    fn an_exception_allows_only_the_names_it_lists() {
        let broken = check(&tree("engine/a.rs", "use super::c::D;\n"), &SMALL).unwrap_err();
        assert!(broken.contains("uses `D` of `engine::c`"), "{broken}");
        assert!(!broken.contains("uses `C` of"), "{broken}");
    }

    #[test]
    fn an_exception_no_arrow_takes_fails() {
        let mut files = tree("engine/c.rs", "");
        files.insert("engine/a.rs".to_string(), "pub struct A;\n".to_string());
        let broken = check(&files, &SMALL).unwrap_err();
        assert!(
            broken.contains("the exception `engine::a` -> `engine::c` (C) is no longer taken"),
            "{broken}"
        );
    }

    #[test]
    fn an_import_after_an_inline_test_module_is_read() {
        let extra = "#[cfg(all(test, not(loom)))]\nmod tests {\n    use super::super::c::D;\n}\n\
                     fn later(d: crate::engine::c::D) -> crate::engine::c::D { d }\n";
        let broken = check(&tree("engine/b.rs", extra), &SMALL).unwrap_err();
        assert!(broken.contains("src/engine/b.rs:7:"), "{broken}");
        assert!(!broken.contains("src/engine/b.rs:5:"), "{broken}");
        // The same module without the code after it: the test's import is
        // exempt.
        let only_tests = "#[cfg(test)]\nmod tests {\n    use super::super::c::D;\n}\n";
        check(&tree("engine/b.rs", only_tests), &SMALL).expect("test imports are exempt");
    }

    #[test]
    fn a_folder_reaching_up_fails_after_a_test_module_too() {
        let extra =
            "#[cfg(test)]\nmod tests {\n    use crate::worker::W;\n}\nuse crate::worker::W;\n";
        let broken = check(&tree("sync.rs", extra), &SMALL).unwrap_err();
        assert!(
            broken.contains("src/sync.rs:6: `sync` reaches up to `worker`"),
            "{broken}"
        );
        assert!(!broken.contains("src/sync.rs:4:"), "{broken}");
    }

    #[test]
    fn a_file_off_the_engine_s_ladder_fails() {
        let mut files = tree("engine/c.rs", "");
        files.insert("engine/d.rs".to_string(), "use super::a::A;\n".to_string());
        let broken = check(&files, &SMALL).unwrap_err();
        assert!(
            broken.contains("`engine::d` (src/engine/d.rs) stands on no floor"),
            "{broken}"
        );
        let mut files = tree("engine/c.rs", "");
        files.remove("engine/b.rs");
        files.insert("engine/c.rs".to_string(), "pub struct C;\n".to_string());
        let broken = check(&files, &SMALL).unwrap_err();
        assert!(
            broken.contains("`engine::b` stands on the engine's ladder but no file holds it"),
            "{broken}"
        );
    }

    #[test]
    fn re_exports_are_followed_to_the_file_that_defines_the_name() {
        // `engine/mod.rs` re-exports `C`; `b` reaches it as `super::C`.
        let broken = check(&tree("engine/b.rs", "fn f(_: &super::C) {}\n"), &SMALL).unwrap_err();
        assert!(
            broken.contains("`engine::b` (floor 2) uses `C` of `engine::c`"),
            "{broken}"
        );
    }

    #[test]
    fn the_real_ladder_fails_on_a_new_arrow_up_it() {
        let src = root().join("crates").join("sched-core").join("src");
        let mut files = BTreeMap::new();
        read_tree(&src, &src, &mut files).expect("sched-core's sources");
        files
            .get_mut("engine/stats.rs")
            .expect("engine/stats.rs")
            .push_str("\nfn forbidden(_: &crate::engine::shared::Shared) {}\n");
        let broken = check(&files, &SCHED_CORE).unwrap_err();
        assert!(
            broken.contains("uses `Shared` of `engine::shared`")
                && broken.contains("src/engine/stats.rs:"),
            "{broken}"
        );
    }

    #[test]
    fn reads_paths_in_code_and_skips_comments_strings_and_tests() {
        let text = "use crate::engine::shared::Shared;\n\
                    // crate::worker in a comment\n\
                    /// [`X`](crate::timer::X)\n\
                    /* crate::table /* nested */ crate::table */\n\
                    let s = \"crate::table\"; let r = r#\"crate::\"table\"#; let c = '{';\n\
                    let x = crate::record::extras(y); // crate::table\n\
                    let m = $crate::table::X; let f = x.crate_y;\n\
                    #[cfg(test)]\n\
                    mod tests {\n\
                    use crate::runqueue::local;\n\
                    }\n\
                    use crate::contract::{down::Down, event::{Event, CommandError}};\n";
        assert_eq!(
            paths(text, &["worker"]),
            vec![
                "engine::shared::Shared",
                "record::extras",
                "contract::down::Down",
                "contract::event::Event",
                "contract::event::CommandError"
            ]
        );
    }

    #[test]
    fn relative_paths_are_made_absolute() {
        let text = "mod child;\nuse super::shared::Shared;\nuse self::child::X;\n\
                    use child::Y;\nfn f() { super::super::timer::fire(); other::Z; }\n";
        assert_eq!(
            paths(text, &["engine", "names"]),
            vec![
                "engine::shared::Shared",
                "engine::names::child::X",
                "engine::names::child::Y",
                "timer::fire"
            ]
        );
    }

    #[test]
    fn a_test_module_declared_elsewhere_does_not_end_the_scan() {
        let text = "#[cfg(all(test, not(loom)))]\nmod slot_tests;\nuse crate::engine::Shared;\n";
        assert_eq!(paths(text, &["record"]), vec!["engine::Shared"]);
    }

    #[test]
    fn only_a_cfg_that_needs_test_marks_test_code() {
        let cfg = |attr: &str| is_test_cfg(&lex(attr));
        assert!(cfg("cfg(test)"));
        assert!(cfg("cfg(all(test, not(loom)))"));
        assert!(cfg("cfg(all(loom, test))"));
        assert!(!cfg("cfg(not(test))"));
        assert!(!cfg("cfg(any(test, loom))"));
        assert!(!cfg("cfg(loom)"));
        assert!(!cfg("cfg_attr(test, derive(Debug))"));
        let text = "#[cfg(not(test))]\nuse crate::timer::A;\n#[cfg(test)]\nuse crate::timer::B;\n\
                    #[cfg(test)]\nfn helper() { crate::timer::C; }\nstruct S {\n    #[cfg(test)]\n    \
                    c: crate::timer::D,\n    e: crate::timer::E,\n}\n";
        assert_eq!(paths(text, &["worker"]), vec!["timer::A", "timer::E"]);
    }

    #[test]
    fn every_module_stands_on_one_floor() {
        for krate in CRATES {
            for ladder in krate.ladders {
                let mut seen = BTreeSet::new();
                for floor in ladder.floors {
                    for module in *floor {
                        assert!(seen.insert(*module), "{module} stands on two floors");
                    }
                }
            }
        }
    }

    #[test]
    fn every_exception_joins_two_rungs_and_does_not_point_down() {
        for krate in CRATES {
            for ladder in krate.ladders {
                for e in ladder.exceptions {
                    let from =
                        floor(ladder.floors, e.from).expect("its source stands on the ladder");
                    let to = floor(ladder.floors, e.to).expect("its target stands on the ladder");
                    assert!(
                        to > from || (to == from && !ladder.along),
                        "{} -> {} points down: it needs no exception",
                        e.from,
                        e.to
                    );
                    assert!(!e.names.is_empty() && !e.why.is_empty());
                }
            }
        }
    }

    /// A crate whose top-level modules stand on a strict ladder, as
    /// `relay-nats`'s and `sched-durable`'s do: `a` below `b` and `c`, one
    /// floor; `c` may take `B` from `b`.
    const STRICT: Crate<'static> = Crate {
        name: "strict",
        dir: "strict",
        doc: "docs/internals/strict.md",
        outside: &["lib"],
        ladders: &[Ladder {
            name: "STRICT_LADDER",
            folder: "",
            floors: &[&["a"], &["b", "c"]],
            along: false,
            exceptions: &[Exception {
                from: "c",
                to: "b",
                names: &["B"],
                why: "a test",
            }],
        }],
    };

    fn strict_tree(file: &str, extra: &str) -> BTreeMap<String, String> {
        let mut files: BTreeMap<String, String> = [
            ("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::C;\n"),
            ("a.rs", "pub struct A;\n"),
            ("b.rs", "use crate::a::A;\npub struct B;\n"),
            ("c.rs", "use crate::b::B;\npub struct C;\n"),
        ]
        .into_iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
        files
            .get_mut(file)
            .expect("a file of the tree")
            .push_str(extra);
        files
    }

    #[test]
    fn a_strict_crate_ladder_holds_its_top_level_modules() {
        let summary = check(&strict_tree("a.rs", ""), &STRICT).expect("it keeps the ladder");
        assert!(
            summary.contains("strict's ladder: 3 modules on 2 floors, 2 arrows between them, 1 of them by a named exception"),
            "{summary}"
        );
        // Along one floor, without the exception.
        let broken = check(&strict_tree("b.rs", "use crate::c::C;\n"), &STRICT).unwrap_err();
        assert!(
            broken.contains("src/b.rs:3: `b` (floor 2) uses `C` of `c` (floor 2)"),
            "{broken}"
        );
        // Up, through the crate root's re-export.
        let broken = check(&strict_tree("a.rs", "fn f(_: crate::C) {}\n"), &STRICT).unwrap_err();
        assert!(
            broken.contains("src/a.rs:2: `a` (floor 1) uses `C` of `c` (floor 2)"),
            "{broken}"
        );
        // A module the ladder does not hold.
        let mut files = strict_tree("a.rs", "");
        files.insert("d.rs".to_string(), "pub struct D;\n".to_string());
        let broken = check(&files, &STRICT).unwrap_err();
        assert!(
            broken.contains("`d` (src/d.rs) stands on no floor of strict's ladder"),
            "{broken}"
        );
    }

    #[test]
    fn an_arrow_up_relay_nats_s_ladder_fails() {
        let src = root().join("crates").join("relay-nats").join("src");
        let mut files = BTreeMap::new();
        read_tree(&src, &src, &mut files).expect("relay-nats's sources");
        check(&files, &RELAY_NATS).expect("relay-nats keeps its ladder");
        // The circle the ladder broke: the thread reaching up to the names.
        files
            .get_mut("io.rs")
            .expect("io.rs")
            .push_str("\nfn forbidden(_: &crate::names::ClusterNames) {}\n");
        let broken = check(&files, &RELAY_NATS).unwrap_err();
        assert!(
            broken.contains("`io` (floor 7) uses `ClusterNames` of `names` (floor 9)")
                && broken.contains("src/io.rs:"),
            "{broken}"
        );
    }

    #[test]
    fn the_real_durable_ladder_fails_on_an_arrow_its_exception_does_not_name() {
        let src = root().join("crates").join("durable").join("src");
        let mut files = BTreeMap::new();
        read_tree(&src, &src, &mut files).expect("sched-durable's sources");
        files
            .get_mut("channel.rs")
            .expect("channel.rs")
            .push_str("\nfn forbidden(_: crate::runner::Tell) {}\n");
        let broken = check(&files, &DURABLE).unwrap_err();
        assert!(
            broken.contains("`channel` (floor 6) uses `Tell` of `runner` (floor 7)"),
            "{broken}"
        );
    }

    #[test]
    fn an_arrow_up_relay_s_ladder_fails() {
        let src = root().join("crates").join("relay").join("src");
        let mut files = BTreeMap::new();
        read_tree(&src, &src, &mut files).expect("sched-relay's sources");
        check(&files, &RELAY).expect("sched-relay keeps its ladder");
        // The identifier reaching up to the table that routes by it.
        files
            .get_mut("pid.rs")
            .expect("pid.rs")
            .push_str("\nfn forbidden(_: &crate::router::Router) {}\n");
        let broken = check(&files, &RELAY).unwrap_err();
        assert!(
            broken.contains("`pid` (floor 1) uses `Router` of `router` (floor 6)")
                && broken.contains("src/pid.rs:"),
            "{broken}"
        );
        // The inline body may take only `Payload` from the package.
        let src = files.get_mut("inline.rs").expect("inline.rs");
        src.truncate(src.rfind("\nfn forbidden").unwrap_or(src.len()));
        src.push_str("\nfn forbidden(_: crate::package::Package) {}\n");
        let broken = check(&files, &RELAY).unwrap_err();
        assert!(
            broken.contains("`inline` (floor 2) uses `Package` of `package` (floor 3)"),
            "{broken}"
        );
    }

    #[test]
    fn every_crate_under_crates_is_checked() {
        let dirs = fs::read_dir(root().join("crates")).expect("crates/");
        for dir in dirs.flatten() {
            if !dir.path().join("src").is_dir() {
                continue;
            }
            let name = dir.file_name().to_string_lossy().into_owned();
            assert!(
                CRATES.iter().any(|krate| krate.dir == name),
                "crates/{name} has no ladder in CRATES (xtask/src/layers.rs)"
            );
        }
    }

    #[test]
    fn a_name_the_root_takes_from_another_crate_in_an_inline_module_draws_no_arrow() {
        // The root re-exports in inline modules, as `sched`'s does.
        let root = "pub mod stats {\n    pub use other::Histogram;\n}\n\
                    pub mod prelude {\n    pub use crate::b::B;\n}\n";
        let mut files = strict_tree("lib.rs", root);
        files
            .get_mut("a.rs")
            .expect("a.rs")
            .push_str("fn f(_: &crate::stats::Histogram) {}\n");
        check(&files, &STRICT).expect("`stats::Histogram` is no module of ours");
        // A name one of them takes from a module of ours is followed to the
        // file that defines it.
        files
            .get_mut("a.rs")
            .expect("a.rs")
            .push_str("fn g(_: crate::prelude::B) {}\n");
        let broken = check(&files, &STRICT).unwrap_err();
        assert!(
            broken.contains("`a` (floor 1) uses `B` of `b` (floor 2)"),
            "{broken}"
        );
    }
}
