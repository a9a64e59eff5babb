//! A node of `keyed_durable_os.rs` other than node 1, run in a child
//! process by [`crate::peer::Peer`]: it runs its share of the accounts
//! until told to quit, tells its counters when asked, and dumps every
//! counter on stderr for a failing test.

use std::io::BufRead;
use std::time::Duration;

use crate::common::node;
use crate::peer::{NODE, PREFIX, URL};

fn say(line: &str) {
    println!("{PREFIX}{line}");
}

pub(crate) fn run(role: &str) {
    assert_eq!(role, "durable", "no such role: {role}");
    let url = std::env::var(URL).expect("the server's URL");
    let n: u32 = std::env::var(NODE)
        .expect("a node")
        .parse()
        .expect("a number");
    let me = node(&url, n, crate::configure);
    say("ready");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "stats" => {
                let sharding = me.sharding.stats();
                let durable = me.durability.stats();
                say(&format!(
                    "stats {} {} {} {} {} {} {}",
                    sharding.shards_held,
                    durable.recovered,
                    sharding.fenced_processes,
                    sharding.keys_live,
                    sharding.fenced,
                    durable.failed_syncs,
                    sharding.buffered
                ));
            }
            "dump" => {
                // Every counter, on stderr (a failing test's output).
                eprintln!(
                    "node {n}: {:?}; {:?}; scheduler: {:?}",
                    me.sharding.stats(),
                    me.durability.stats(),
                    me.scheduler.stats()
                );
                say("dumped");
            }
            "quit" | "" => break,
            other => panic!("no such command: {other}"),
        }
    }
    me.scheduler.shutdown(Duration::from_millis(500));
    say("end");
}
