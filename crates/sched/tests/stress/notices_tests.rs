//! The notice checks pass an accounted round and catch each broken rule.

use sched::prelude::*;

use crate::notices::*;
use crate::violations::Violations;

const A: Pid = Pid::local(1);
const B: Pid = Pid::local(2);
const C: Pid = Pid::local(3);
/// A PID no process of the round had.
const STRAY: Pid = Pid::local(99);

fn party(pid: Pid, reason: ExitReason) -> Party {
    Party {
        pid,
        reason,
        loose: false,
        cancels_seen: 0,
        replied: Vec::new(),
    }
}

fn monitor(serial: u64, watcher: Pid, target: Pid, wait: bool, live: bool) -> MonitorRec {
    MonitorRec {
        serial,
        watcher,
        target,
        wait,
        live,
    }
}

fn down(serial: u64, at: Pid, target: Pid, reason: ExitReason) -> DownRec {
    DownRec {
        serial,
        at,
        target,
        reason,
        dead: false,
    }
}

fn exit(at: Pid, from: Pid, reason: ExitReason) -> ExitRec {
    ExitRec {
        at,
        from,
        reason,
        dead: false,
    }
}

fn reply(serial: u64, at: Pid, answer: Answer) -> ReplyRec {
    ReplyRec {
        serial,
        at,
        answer,
        dead: false,
    }
}

/// A round where everything is accounted for: A watches, links to and
/// asks B and C; C was cancelled.
fn notices() -> Notices {
    use ExitReason::*;
    let mut b = party(B, Error);
    b.replied = vec![20];
    let mut c = party(C, Normal);
    c.cancels_seen = 1;
    let ask = |serial, target, accepted| AskRec {
        serial,
        asker: A,
        target,
        accepted,
    };
    let link = |to, wait, live| LinkRec {
        from: A,
        to,
        wait,
        live,
        seq: 10,
    };
    Notices {
        parties: vec![party(A, Normal), b, c],
        monitors: vec![
            monitor(1, A, B, true, true),
            monitor(2, A, C, false, false),
            monitor(3, A, STRAY, true, false),
            monitor(4, A, A, false, true),
            monitor(5, A, C, false, true),
        ],
        demonitors: vec![(5, true), (2, false)],
        downs: vec![
            down(1, A, B, Error),
            DownRec {
                dead: true,
                ..down(2, A, C, NoProcess)
            },
            down(3, A, STRAY, NoProcess),
        ],
        links: vec![
            link(B, true, true),
            link(C, false, false),
            link(STRAY, true, false),
        ],
        exits: vec![
            exit(A, B, Error),
            exit(A, C, NoProcess),
            exit(A, STRAY, NoProcess),
            exit(C, A, Normal),
        ],
        cancels: vec![
            CancelRec {
                target: C,
                accepted: true,
            },
            CancelRec {
                target: B,
                accepted: false,
            },
        ],
        asks: vec![
            ask(20, B, true),
            ask(21, C, true),
            ask(22, C, true),
            ask(23, STRAY, false),
        ],
        replies: vec![
            reply(20, A, Answer::Value(20)),
            reply(21, A, Answer::NoReply),
            reply(22, A, Answer::Timeout),
        ],
        requests: vec![
            RequestRec {
                serial: 20,
                at: B,
                dead: false,
            },
            RequestRec {
                serial: 21,
                at: C,
                dead: true,
            },
            RequestRec {
                serial: 22,
                at: C,
                dead: false,
            },
        ],
        outside: vec![
            OutsideRec {
                target: B,
                live: true,
                got: Some((B, Error)),
            },
            OutsideRec {
                target: C,
                live: false,
                got: Some((C, NoProcess)),
            },
        ],
        // A unlinked C (serial 5) and saw C's exit after the marker: the
        // link A made to C (serial 10) came after, and explains it.
        late_exits: vec![LateExit {
            at: A,
            from: C,
            reason: NoProcess,
            unlink_seq: 5,
        }],
        unlinks: 1,
        unlinks_racing: 0,
        markers_seen: 1,
        mid_batch_demonitors: 0,
        timers_seen: 0,
        timers_cancelled: 0,
    }
}

#[test]
fn accounted_notices_pass() {
    let mut v = Violations::default();
    let counts = check_notices(&notices(), &mut v);
    assert!(v.is_empty(), "{}", v.report());
    assert_eq!((counts.monitors, counts.downs, counts.exits), (5, 3, 4));
    assert_eq!(
        (counts.asks_accepted, counts.asks_refused, counts.dead),
        (3, 1, 2)
    );
    assert_eq!(counts.late_exits_relinked, 1);
}

#[test]
fn each_broken_rule_is_caught() {
    use ExitReason::*;
    type Break = fn(&mut Notices);
    let cases: Vec<(Break, &str)> = vec![
        // Monitors.
        (|n| n.downs.push(down(1, A, B, Error)), "2 downs"),
        (|n| n.downs.clear(), "saw 0 downs"),
        (|n| n.downs.push(down(4, A, A, Normal)), "on itself"),
        (
            |n| n.downs.push(down(5, A, C, Normal)),
            "demonitor returned true",
        ),
        (|n| n.downs[0].reason = NoProcess, "down with NoProcess"),
        (|n| n.downs[0].reason = Normal, "down with Normal"),
        (|n| n.downs[2].reason = Error, "down with Error"),
        (|n| n.downs[0].at = C, "its down reached"),
        (|n| n.downs.push(down(77, A, B, Error)), "for no monitor"),
        (|n| n.demonitors.push((78, true)), "never set"),
        // Links.
        (|n| n.exits.push(exit(B, C, Normal)), "no link either way"),
        (|n| n.exits.push(exit(A, B, Error)), "a second exit"),
        (|n| n.exits[0].reason = Panicked, "not how it ended"),
        (
            |n| n.exits.push(exit(A, C, NoProcess)),
            "more than its 1 links",
        ),
        (
            |n| n.exits.push(exit(C, A, NoProcess)),
            "more than its 0 links",
        ),
        (|n| n.exits[2].reason = Error, "not how it ended"),
        (|n| n.exits[0].reason = NoProcess, "no real exit"),
        (|n| n.exits.retain(|e| e.from != STRAY), "saw no exit"),
        (
            |n| {
                n.links.push(LinkRec {
                    from: A,
                    to: A,
                    wait: false,
                    live: true,
                    seq: 0,
                });
                n.exits.push(exit(A, A, Normal));
            },
            "from itself",
        ),
        // Unlinks: an exit after the marker with no link since.
        (|n| n.late_exits[0].unlink_seq = 11, "after its unlink"),
        (
            |n| {
                n.late_exits.push(LateExit {
                    at: A,
                    from: B,
                    reason: Error,
                    unlink_seq: 12,
                })
            },
            "after its unlink",
        ),
        // Cancels.
        (|n| n.parties[2].cancels_seen = 2, "saw 2 cancels"),
        (|n| n.parties[1].cancels_seen = 1, "nobody's cancel"),
        // Asks.
        (|n| n.replies.push(reply(22, A, Answer::Timeout)), "replies"),
        (|n| drop(n.replies.remove(0)), "replies"),
        (
            |n| n.replies.push(reply(23, A, Answer::NoReply)),
            "accepted false",
        ),
        (
            |n| n.replies[0].answer = Answer::Value(21),
            "reply ReplyRec",
        ),
        (
            |n| n.parties[1].replied.clear(),
            "the target replied: false",
        ),
        (
            |n| n.parties[2].replied.push(21),
            "the target replied: true",
        ),
        (
            |n| n.replies[0].answer = Answer::Odd("x".into()),
            "reply ReplyRec",
        ),
        (|n| n.replies[0].at = B, "reply ReplyRec"),
        (
            |n| {
                n.requests.remove(0);
            },
            "delivered as []",
        ),
        (|n| n.requests.push(n.requests[1]), "delivered as"),
        (
            |n| {
                n.requests.push(RequestRec {
                    serial: 23,
                    at: STRAY,
                    dead: true,
                })
            },
            "accepted false",
        ),
        (
            |n| n.replies.push(reply(88, A, Answer::Timeout)),
            "a reply for no ask",
        ),
        // Outside monitors.
        (
            |n| n.outside[0].got = Some((B, NoProcess)),
            "outside monitor",
        ),
        (|n| n.outside[1].got = None, "outside monitor"),
    ];
    for (i, (break_it, needle)) in cases.into_iter().enumerate() {
        let mut n = notices();
        break_it(&mut n);
        let mut v = Violations::default();
        check_notices(&n, &mut v);
        assert!(
            v.mentions(needle),
            "case {i}: wanted {needle:?}, got {}",
            v.report()
        );
    }
}

#[test]
fn loose_processes_may_miss_what_they_waited_for() {
    let mut n = notices();
    n.parties[0].loose = true;
    n.downs.retain(|d| d.serial != 1);
    n.exits.retain(|e| e.from != B && e.from != STRAY);
    n.replies.retain(|r| r.serial != 20);
    let mut v = Violations::default();
    check_notices(&n, &mut v);
    assert!(v.is_empty(), "{}", v.report());
}
