//! `sched-journal`: reads an embedded journal store (a `RedbStore` file)
//! that no node has open.
//!
//! ```text
//! sched-journal <store> list            every process: key, type, running or ended
//! sched-journal <store> show <key>      its records: time, inputs, effects
//! sched-journal <store> export <key>    its journal as JSON (Inspection::to_json)
//! sched-journal <store> outbox          sends not yet taken by their receivers
//! sched-journal <store> compact         rewrite the log without forgotten journals
//! ```

use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use sched_durable::store::{RedbStore, Store};
use sched_durable::{Inspection, RecordedEffect, RecordedInput};

const USAGE: &str =
    "usage: sched-journal <store> (list | show <key> | export <key> | outbox | compact)";

fn body(bytes: &[u8]) -> String {
    if bytes.len() <= 16 {
        format!("{bytes:02x?}")
    } else {
        format!("{:02x?}.. ({} bytes)", &bytes[..16], bytes.len())
    }
}

fn input(input: &RecordedInput) -> String {
    match input {
        RecordedInput::Start => "start".into(),
        RecordedInput::Message {
            from: Some((key, seq)),
            body: b,
        } => {
            format!("message #{seq} from {key:?} {}", body(b))
        }
        RecordedInput::Message {
            from: None,
            body: b,
        } => format!("message from outside {}", body(b)),
        RecordedInput::Timer(tag) => format!("timer {tag}"),
        RecordedInput::Completion { tag, result: Ok(b) } => format!("answer to {tag}: {}", body(b)),
        RecordedInput::Completion {
            tag,
            result: Err(f),
        } => format!("no answer to {tag}: {f:?}"),
    }
}

fn effect(effect: &RecordedEffect) -> String {
    match effect {
        RecordedEffect::Send { to, seq, body: b } => format!("send #{seq} to {to:?} {}", body(b)),
        RecordedEffect::Timer { tag, deadline_ms } => {
            let at = UNIX_EPOCH + Duration::from_millis(*deadline_ms);
            format!("timer {tag} due {at:?}")
        }
        RecordedEffect::CancelTimer(tag) => format!("cancel timer {tag}"),
        RecordedEffect::Command { id, tag, data } => {
            format!("command {id} tagged {tag} {}", body(data))
        }
        RecordedEffect::Done(b) => format!("done {}", body(b)),
        RecordedEffect::Failed(why) => format!("failed: {why}"),
    }
}

fn run(args: &[String]) -> Result<String, String> {
    let (path, command) = match args {
        [path, command, ..] => (path, command.as_str()),
        _ => return Err(USAGE.into()),
    };
    let store = RedbStore::open(path).map_err(|e| e.to_string())?;
    let journal = |key: Option<&String>| -> Result<Inspection, String> {
        let key = key.ok_or(USAGE)?;
        let journal = store
            .journal(key)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no journal has key {key:?}"))?;
        Inspection::from_journal(&journal).map_err(|e| e.to_string())
    };
    let mut out = String::new();
    match command {
        "list" => {
            for (key, kind, ended) in store.processes().map_err(|e| e.to_string())? {
                let state = if ended { "ended" } else { "running" };
                out += &format!("{key}\t{kind}\t{state}\n");
            }
        }
        "show" => {
            let j = journal(args.get(2))?;
            let state = if j.ended { "ended" } else { "running" };
            out += &format!(
                "{} ({}, {state}, {} records)\n",
                j.key,
                j.kind,
                j.records.len()
            );
            for (n, record) in j.records.iter().enumerate() {
                out += &format!("#{n} at {} ms\n", record.at_ms);
                for i in &record.inputs {
                    out += &format!("  <- {}\n", input(i));
                }
                for e in &record.effects {
                    out += &format!("  -> {}\n", effect(e));
                }
            }
        }
        "export" => out = journal(args.get(2))?.to_json() + "\n",
        "outbox" => {
            for send in store.outbox().map_err(|e| e.to_string())? {
                out += &format!(
                    "{} -> {} #{} {}\n",
                    send.from,
                    send.to,
                    send.seq,
                    body(&send.body)
                );
            }
        }
        "compact" => {
            let dropped = store.compact().map_err(|e| e.to_string())?;
            out += &format!("dropped {dropped} bytes of log\n");
        }
        _ => return Err(USAGE.into()),
    }
    Ok(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sched-journal: {e}");
            ExitCode::FAILURE
        }
    }
}
