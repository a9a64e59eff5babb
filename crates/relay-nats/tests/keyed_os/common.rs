//! What node 1 (this process) and the other nodes (children) of
//! `keyed_os.rs` share: the keyed process, its messages and its reports.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_nats::{Format, Keyed, NatsTransport, Sharded, Sharding, ShardingConfig};
use sched::prelude::*;
use serde::{Deserialize, Serialize};

use crate::support::{codec, node_configured};

pub(crate) const KIND: &str = "tally";
pub(crate) const SHARDS: u32 = 64;
/// Short, so that a node stopped for a few seconds is past it.
pub(crate) const LEASE: Duration = Duration::from_millis(1_500);
pub(crate) const BEAT: Duration = Duration::from_millis(250);
pub(crate) const DOWN_AFTER: Duration = Duration::from_secs(2);

/// The `n`th message node 1 sent to key `key`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub(crate) struct Add {
    pub(crate) key: u32,
    pub(crate) n: u32,
}

/// A keyed process read a message: which, where, in which incarnation.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Read {
    pub(crate) key: u32,
    pub(crate) n: u32,
    pub(crate) node: u32,
    pub(crate) incarnation: u64,
}

/// Reads this node's keyed processes could not report to node 1.
pub(crate) static UNREPORTED: AtomicU64 = AtomicU64::new(0);

/// Where node `node`, a child of the test process `parent`, writes down
/// each message its keyed processes read, before they take it: a file
/// outlives a SIGKILL, a report sent as a message may not.
pub(crate) fn reads_file(parent: u32, node: u32) -> PathBuf {
    std::env::temp_dir().join(format!("keyed-os-{parent}-node-{node}.reads"))
}

/// The reads written down in `path` (a line cut short by a kill is
/// left out: its message was not taken yet).
pub(crate) fn reads_written(path: &std::path::Path, node: u32) -> Vec<Read> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut reads = Vec::new();
    for line in text.split_inclusive('\n') {
        let Some(line) = line.strip_suffix('\n') else {
            continue;
        };
        let words: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().expect("numbers"))
            .collect();
        let [key, n, incarnation] = words[..] else {
            panic!("a malformed line in {}: {line:?}", path.display());
        };
        reads.push(Read {
            key: key as u32,
            n: n as u32,
            node,
            incarnation,
        });
    }
    reads
}

/// The process of one key: reports every message it reads to node 1's
/// collector (on a child node, after writing it down in the node's file,
/// before it takes the message: its receipt, which lets the node confirm
/// it to the sender, is told only then); finishes on cancel.
struct Tally {
    collector: Pid,
    node: u32,
    incarnation: u64,
    written: Option<Arc<File>>,
}

impl Process for Tally {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    if let Some(file) = &self.written {
                        let add = m.payload::<Add>().ok_or("not an Add")?;
                        let line = format!("{} {} {}\n", add.key, add.n, self.incarnation);
                        // One write for the line: a kill cuts it whole or
                        // not at all (short of the end, it is left out).
                        (&**file).write_all(line.as_bytes())?;
                    }
                    let add = m.downcast::<Add>().map_err(|_| "not an Add")?;
                    let read = Read {
                        key: add.key,
                        n: add.n,
                        node: self.node,
                        incarnation: self.incarnation,
                    };
                    // A report that cannot go (node 1 unreachable for a
                    // moment) is lost; counted, so that the test can tell
                    // a lost report from a lost message.
                    if out.send(self.collector, read).is_err() {
                        UNREPORTED.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Node 1's collector: keeps every report.
struct Collector(Arc<Mutex<Vec<Read>>>);

impl Process for Collector {
    type Done = ();
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Message(m) => {
                    let read = m.downcast::<Read>().map_err(|_| "not a Read")?;
                    self.0.lock().unwrap().push(read);
                }
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Where a node's keyed processes report what they read.
pub(crate) enum Reports {
    /// To node 1's collector, at this PID.
    At(Pid),
    /// To a collector started on this node (node 1), into this list.
    Here(Arc<Mutex<Vec<Read>>>),
}

/// A keyed node: the scheduler, its transport, its sharding, the kind,
/// and the collector its processes report to.
pub(crate) struct KeyedNode {
    pub(crate) scheduler: Scheduler,
    pub(crate) transport: Arc<NatsTransport>,
    pub(crate) sharding: Sharding,
    pub(crate) tally: Sharded<Add>,
    pub(crate) collector: Pid,
}

pub(crate) fn keyed_node(url: &str, node: u32, reports: Reports) -> KeyedNode {
    let (scheduler, transport) = node_configured(url, node, |c| {
        c.codec(
            codec()
                .register_as::<Keyed<Add>>(KIND, Format::Postcard)
                .register_as::<Read>("read", Format::Postcard)
                .max_message_bytes(1 << 16),
        )
        .name_lease(LEASE)
        .failure_detector(BEAT, DOWN_AFTER)
    });
    let config = ShardingConfig::new()
        .shards(SHARDS)
        .passivate_after(Duration::from_secs(600));
    let (collector, written) = match reports {
        Reports::At(pid) => {
            let path = reads_file(std::os::unix::process::parent_id(), node);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .expect("the reads file opens");
            (pid, Some(Arc::new(file)))
        }
        Reports::Here(list) => (scheduler.spawn(Collector(list)).unwrap().pid(), None),
    };
    let sharding = Sharding::new(&scheduler, Arc::clone(&transport), config).unwrap();
    let incarnations = AtomicU64::new(u64::from(node) << 40);
    let tally = sharding
        .register(&scheduler, KIND, move |_: &str| Tally {
            collector,
            node,
            incarnation: incarnations.fetch_add(1, Ordering::Relaxed),
            written: written.clone(),
        })
        .unwrap();
    KeyedNode {
        scheduler,
        transport,
        sharding,
        tally,
        collector,
    }
}

pub(crate) fn key_name(key: u32) -> String {
    format!("k{key}")
}
