//! A node of `keyed_os.rs` other than node 1, run in a child process by
//! [`crate::peer::Peer`]: it registers the kind and runs its share of the
//! keys until told to quit, and tells its counters when asked.

use std::io::BufRead;
use std::time::Duration;

use sched::prelude::*;

use std::sync::atomic::Ordering;

use crate::common::{keyed_node, Reports, UNREPORTED};
use crate::peer::{NODE, PEER, PREFIX, URL};

fn say(line: &str) {
    println!("{PREFIX}{line}");
}

pub(crate) fn run(role: &str) {
    assert_eq!(role, "keyed", "no such role: {role}");
    let url = std::env::var(URL).expect("the server's URL");
    let node: u32 = std::env::var(NODE)
        .expect("a node")
        .parse()
        .expect("a number");
    let collector: u64 = std::env::var(PEER)
        .expect("the collector")
        .parse()
        .expect("a number");
    let keyed = keyed_node(&url, node, Reports::At(Pid::new(1, collector)));
    say("ready");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "stats" => {
                let s = keyed.sharding.stats();
                let t = keyed.transport.stats();
                say(&format!(
                    "stats {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
                    s.shards_held,
                    s.keys_live,
                    s.fenced,
                    s.fenced_processes,
                    s.refused,
                    s.started,
                    s.buffered,
                    t.unconfirmed,
                    t.abandoned,
                    t.fenced,
                    t.lost,
                    t.slow_consumer,
                    UNREPORTED.load(Ordering::Relaxed),
                    keyed.scheduler.stats().dead_letters,
                    t.names_lost,
                    s.shards_lost,
                    t.publish_failed
                ));
            }
            "quit" | "" => break,
            other => panic!("no such command: {other}"),
        }
    }
    keyed.scheduler.shutdown(Duration::from_millis(500));
    say("end");
}
