//! Cluster names only their owner can write. A real `nats-server` gives
//! each node a user limited to `NatsConfig::permissions`, and an
//! administrator `NatsConfig::admin_permissions` to make the bucket once.
//! An intruder holding node 3's credentials tries to overwrite and delete
//! node 2's name, to register a name pointing at node 1's process, and to
//! delete or purge the bucket: each is refused by the server, or ignored
//! by the readers and counted in `names_forged`; `whereis` and `register`
//! keep working. A legitimate node 3 can still register, take over a
//! lapsed name, and release its own.

mod support;

use std::sync::Arc;
use std::time::Duration;

use relay_nats::async_nats::{self, jetstream, ConnectOptions, HeaderMap};
use relay_nats::{ClusterNameError, ClusterNames, NatsConfig, NatsTransport};
use sched::prelude::*;
use support::*;

const WAIT: Duration = Duration::from_secs(30);

/// Waits for cancel.
struct Idle;
impl Process for Idle {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        if events.any(|e| matches!(e, Event::Cancel)) {
            out.finish(());
        }
        Ok(())
    }
}

/// Users `node1` to `node3` with the permissions their transports
/// document, `admin` with the bucket's setup permissions.
fn authorization() -> String {
    let config = NatsConfig::new("nats://unused").cluster_names(NAMES);
    let quoted = |subjects: &[String]| {
        subjects
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut users = Vec::new();
    for node in 1..=3 {
        let allowed = config.permissions(node);
        users.push(format!(
            "{{ user: node{node}, password: p{node}, permissions: {{ publish: [{}], subscribe: [{}] }} }}",
            quoted(&allowed.publish),
            quoted(&allowed.subscribe)
        ));
    }
    let admin = config.admin_permissions();
    users.push(format!(
        "{{ user: admin, password: a, permissions: {{ publish: [{}], subscribe: [{}] }} }}",
        quoted(&admin.publish),
        quoted(&admin.subscribe)
    ));
    format!("authorization {{ users: [ {} ] }}\n", users.join(",\n"))
}

fn credentials(user: &str, password: &str) -> ConnectOptions {
    ConnectOptions::with_user_and_password(user.into(), password.into())
        .reconnect_delay_callback(|_| Duration::from_millis(50))
}

/// A started node `node` at `url` as user `node<node>`, with `lease`.
fn node(url: &str, node: u32, lease: Duration) -> (Scheduler, Arc<NatsTransport>) {
    let config = NatsConfig::new(url)
        .codec(codec())
        .options(credentials(&format!("node{node}"), &format!("p{node}")))
        .failure_detector(HEARTBEAT, DOWN_AFTER)
        .cluster_names(NAMES)
        .name_lease(lease);
    let transport = Arc::new(NatsTransport::connect(config).expect("connected"));
    let scheduler = Scheduler::builder()
        .workers(2)
        .node(node)
        .remote(transport.clone())
        .build();
    scheduler.start();
    (scheduler, transport)
}

/// The administrator makes the bucket; a node's credentials cannot.
fn make_bucket(server: &NatsServer) {
    let as_node = NatsConfig::new(server.url())
        .cluster_names(NAMES)
        .options(credentials("node3", "p3"));
    assert!(matches!(
        ClusterNames::create_bucket(as_node),
        Err(ClusterNameError::Unavailable(_))
    ));
    let admin = NatsConfig::new(server.url())
        .cluster_names(NAMES)
        .options(credentials("admin", "a"));
    ClusterNames::create_bucket(admin).expect("the administrator makes the bucket");
}

/// A client with node 3's credentials, speaking JetStream by hand.
struct Intruder {
    runtime: tokio::runtime::Runtime,
    jetstream: jetstream::Context,
}

impl Intruder {
    fn connect(server: &NatsServer) -> Intruder {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let url = server.url();
        // The context spawns its acknowledgement task: in the runtime.
        let jetstream = runtime.block_on(async {
            let client = async_nats::connect_with_options(url, credentials("node3", "p3"))
                .await
                .expect("node 3's credentials connect");
            jetstream::new(client)
        });
        Intruder { runtime, jetstream }
    }

    /// Publishes to the bucket's stream and waits for its acknowledgement:
    /// the sequence, or why not (a subject the server refuses gets no
    /// acknowledgement).
    fn publish(
        &self,
        subject: &str,
        headers: &[(&str, &str)],
        payload: &str,
    ) -> Result<u64, String> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, *value);
        }
        let subject = subject.to_owned();
        let payload = payload.to_owned();
        self.runtime.block_on(async {
            let publish = async {
                let ack = self
                    .jetstream
                    .publish_with_headers(subject, map, payload.into())
                    .await
                    .map_err(|e| e.to_string())?;
                ack.await.map(|a| a.sequence).map_err(|e| e.to_string())
            };
            tokio::time::timeout(Duration::from_secs(5), publish)
                .await
                .unwrap_or_else(|_| Err("no acknowledgement".into()))
        })
    }
}

fn key(name: &str, node: u32) -> String {
    format!("$KV.{NAMES}.{name}.n{node}")
}

fn refused(errors: Vec<String>) -> bool {
    errors.iter().any(|e| e.contains("Permissions Violation"))
}

#[test]
fn an_intruder_with_node_3s_credentials_cannot_take_forge_or_delete_names() {
    let Some(server) = NatsServer::start_with_config(&authorization()) else {
        return;
    };
    make_bucket(&server);
    let lease = Duration::from_secs(2);
    let (one, t1) = node(&server.url(), 1, lease);
    let (two, t2) = node(&server.url(), 2, lease);
    let names1 = ClusterNames::new(&one, t1.clone()).unwrap();
    let names2 = ClusterNames::new(&two, t2.clone()).unwrap();
    let db = two.spawn(Idle).unwrap().pid();
    names2.register("db", db).unwrap();
    assert_eq!(names1.whereis("db").unwrap(), Some(db));
    let on_one = one.spawn(Idle).unwrap().pid();
    let intruder = Intruder::connect(&server);
    let run_of_2 = "1"; // any incarnation: the PID is what matters

    // (1) Node 2's name: overwrite or delete its claim or lease, or the
    // whole name as an older version kept it: refused by the server.
    let forged_holder = format!("3.1@{run_of_2}");
    for subject in [
        key("db", 2),
        format!("{}.l", key("db", 2)),
        format!("$KV.{NAMES}.db"),
    ] {
        assert!(
            refused(server.publish_raw_as(
                Some(("node3", "p3")),
                &subject,
                forged_holder.as_bytes()
            )),
            "{subject}"
        );
        let delete = intruder.publish(&subject, &[("KV-Operation", "DEL")], "");
        assert!(delete.is_err(), "{subject}: {delete:?}");
    }
    // A claim of its own: with the proof, refused while node 2 holds the
    // name; without it, stored but ignored (and counted), even with a
    // lease naming it.
    let proof = [
        ("Nats-Expected-Last-Subject-Sequence", "0"),
        (
            "Nats-Expected-Last-Subject-Sequence-Subject",
            &*format!("$KV.{NAMES}.db.*.l"),
        ),
    ];
    let proven = intruder.publish(&key("db", 3), &proof, &forged_holder);
    assert!(proven.is_err(), "{proven:?}");
    let unproven = intruder
        .publish(&key("db", 3), &[], &forged_holder)
        .expect("node 3 may write its own key");
    intruder
        .publish(
            &format!("{}.l", key("db", 3)),
            &[("Nats-TTL", "60s")],
            &unproven.to_string(),
        )
        .expect("and its own lease");
    // A roll-up on its own key would purge the whole stream: refused.
    let rollup = intruder.publish(&key("db", 3), &[("Nats-Rollup", "all")], "");
    assert!(rollup.is_err(), "{rollup:?}");
    assert_eq!(names1.whereis("db").unwrap(), Some(db), "still node 2's");
    assert_eq!(names2.whereis("db").unwrap(), Some(db));
    assert!(t1.stats().names_forged >= 1, "{:?}", t1.stats());

    // (2) A name pointing at node 1's process: on node 1's key refused;
    // on its own key, with a valid proof (the name is free), stored but
    // ignored by every reader, and counted.
    let at_one = format!("{}.{}@1", on_one.node(), on_one.id());
    assert!(refused(server.publish_raw_as(
        Some(("node3", "p3")),
        &key("forged", 1),
        at_one.as_bytes()
    )));
    let forged_proof = [
        ("Nats-Expected-Last-Subject-Sequence", "0"),
        (
            "Nats-Expected-Last-Subject-Sequence-Subject",
            &*format!("$KV.{NAMES}.forged.*.l"),
        ),
    ];
    let claim = intruder
        .publish(&key("forged", 3), &forged_proof, &at_one)
        .expect("node 3 may write its own key");
    intruder
        .publish(
            &format!("{}.l", key("forged", 3)),
            &[("Nats-TTL", "60s")],
            &claim.to_string(),
        )
        .expect("and its own lease");
    let before = t1.stats().names_forged;
    assert_eq!(names1.whereis("forged").unwrap(), None);
    assert_eq!(names2.whereis("forged").unwrap(), None);
    assert!(t1.stats().names_forged > before, "{:?}", t1.stats());

    // (3) The bucket's stream: delete, purge, update, delete a message,
    // or make another: refused by the server.
    let stream = format!("KV_{NAMES}");
    for api in ["DELETE", "PURGE", "UPDATE", "MSG.DELETE", "CREATE"] {
        let subject = format!("$JS.API.STREAM.{api}.{stream}");
        assert!(
            refused(server.publish_raw_as(Some(("node3", "p3")), &subject, b"{}")),
            "{subject}"
        );
    }
    assert!(refused(server.publish_raw_as(
        Some(("node3", "p3")),
        "$JS.API.STREAM.DELETE.OTHER",
        b"{}"
    )));
    // Everything still works.
    assert_eq!(names1.whereis("db").unwrap(), Some(db));
    let cache = one.spawn(Idle).unwrap().pid();
    names1.register("cache", cache).unwrap();
    assert_eq!(names2.whereis("cache").unwrap(), Some(cache));
    assert_eq!(
        names1.register("db", cache),
        Err(ClusterNameError::Taken {
            name: "db".into(),
            by: db
        })
    );
    assert_eq!(t2.stats().names_lost, 0);
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
}

#[test]
fn a_legitimate_node_3_registers_takes_over_a_lapsed_name_and_releases_its_own() {
    let Some(server) = NatsServer::start_with_config(&authorization()) else {
        return;
    };
    make_bucket(&server);
    let lease = Duration::from_secs(2);
    let proxy = FaultyProxy::start(server.port);
    let (one, t1) = node(&server.url(), 1, lease);
    let (two, t2) = node(&proxy.url(), 2, lease);
    let (three, t3) = node(&server.url(), 3, lease);
    let names1 = ClusterNames::new(&one, t1.clone()).unwrap();
    let names2 = ClusterNames::new(&two, t2.clone()).unwrap();
    let names3 = ClusterNames::new(&three, t3.clone()).unwrap();

    // Registers a name of its own; it holds across renewals.
    let own = three.spawn(Idle).unwrap().pid();
    names3.register("jobs.queue", own).unwrap();
    std::thread::sleep(lease * 2);
    assert_eq!(names1.whereis("jobs.queue").unwrap(), Some(own));

    // Node 2 holds "db", then is cut off from the server: once its lease
    // lapses, node 3 takes the name over; node 2 learns it lost it.
    let db = two.spawn(Idle).unwrap().pid();
    names2.register("db", db).unwrap();
    let taker = three.spawn(Idle).unwrap().pid();
    assert_eq!(
        names3.register("db", taker),
        Err(ClusterNameError::Taken {
            name: "db".into(),
            by: db
        })
    );
    proxy.stall(Duration::from_secs(3600));
    wait_until("node 2's lease to lapse", WAIT, || {
        names3.register("db", taker).is_ok()
    });
    assert_eq!(names1.whereis("db").unwrap(), Some(taker));
    proxy.stall(Duration::ZERO);
    wait_until("node 2 to learn it lost the name", WAIT, || {
        t2.stats().names_lost == 1
    });
    wait_until("node 2 to see the new holder", WAIT, || {
        names2.whereis("db").ok() == Some(Some(taker))
    });
    std::thread::sleep(lease * 2);
    assert_eq!(names1.whereis("db").unwrap(), Some(taker), "kept");

    // Releases its own: gone for every node, and free to claim again.
    assert!(names3.unregister("jobs.queue", own).unwrap());
    assert_eq!(names1.whereis("jobs.queue").unwrap(), None);
    let next = one.spawn(Idle).unwrap().pid();
    names1.register("jobs.queue", next).unwrap();
    assert_eq!(names3.whereis("jobs.queue").unwrap(), Some(next));
    assert_eq!(t3.stats().names_lost, 0);
    assert_eq!((t1.stats().names_forged, t3.stats().names_forged), (0, 0));
    one.shutdown(Duration::from_millis(200));
    two.shutdown(Duration::from_millis(200));
    three.shutdown(Duration::from_millis(200));
}
