//! The checks of what processes told each other: every down, exit, cancel,
//! request and reply of a round is accounted for against the monitors,
//! links, cancels and asks that caused it. Pure functions over plain
//! records, so the tests (`notices_tests.rs`) can break each rule.

use std::collections::{HashMap, HashSet};

use sched::prelude::*;

pub(crate) use crate::notice_records::*;
use crate::violations::Violations;

/// Whether `reason` may report the end of `target`: its real reason, or
/// `NoProcess` unless it was certainly live; only `NoProcess` for a PID
/// no process of the round had.
fn reason_ok(parties: &HashMap<Pid, &Party>, target: Pid, reason: ExitReason, live: bool) -> bool {
    match parties.get(&target) {
        Some(p) => reason == p.reason || (reason == ExitReason::NoProcess && !live),
        None => reason == ExitReason::NoProcess,
    }
}

/// Checks every notice of a round.
pub(crate) fn check_notices(n: &Notices, violations: &mut Violations) -> NoticeCounts {
    let parties: HashMap<Pid, &Party> = n.parties.iter().map(|p| (p.pid, p)).collect();
    let loose = |pid: Pid| parties.get(&pid).is_none_or(|p| p.loose);
    let mut counts = NoticeCounts::default();
    check_monitors(n, &parties, &loose, violations, &mut counts);
    check_links(n, &parties, &loose, violations, &mut counts);
    check_cancels(n, violations, &mut counts);
    check_asks(n, &parties, &loose, violations, &mut counts);
    for o in &n.outside {
        counts.outside += 1;
        match o.got {
            Some((pid, reason)) if pid == o.target => {
                if !reason_ok(&parties, o.target, reason, o.live) {
                    violations.push(format!(
                        "outside monitor of {}: down with {reason:?} (live when set: {})",
                        o.target, o.live
                    ));
                }
            }
            other => violations.push(format!(
                "outside monitor of {}: got {other:?} after the round",
                o.target
            )),
        }
    }
    check_late_exits(n, violations, &mut counts);
    counts.unlinks = n.unlinks;
    counts.unlinks_racing = n.unlinks_racing;
    counts.markers_seen = n.markers_seen;
    counts.mid_batch_demonitors = n.mid_batch_demonitors;
    counts.timers_seen = n.timers_seen;
    counts.timers_cancelled = n.timers_cancelled;
    counts.dead = (n.downs.iter().filter(|d| d.dead).count()
        + n.exits.iter().filter(|e| e.dead).count()
        + n.replies.iter().filter(|r| r.dead).count()
        + n.requests.iter().filter(|r| r.dead).count()) as u64;
    counts
}

fn check_monitors(
    n: &Notices,
    parties: &HashMap<Pid, &Party>,
    loose: &dyn Fn(Pid) -> bool,
    violations: &mut Violations,
    counts: &mut NoticeCounts,
) {
    let mut downs: HashMap<u64, Vec<&DownRec>> = HashMap::new();
    for d in &n.downs {
        downs.entry(d.serial).or_default().push(d);
        counts.downs += 1;
        counts.downs_no_process += u64::from(d.reason == ExitReason::NoProcess);
    }
    let removed: HashSet<u64> = n.demonitors.iter().filter(|d| d.1).map(|d| d.0).collect();
    counts.demonitors_removed = removed.len() as u64;
    let mut known = HashSet::new();
    for m in &n.monitors {
        counts.monitors += 1;
        known.insert(m.serial);
        let got = downs.get(&m.serial).map_or(&[][..], Vec::as_slice);
        let seen = got.iter().filter(|d| !d.dead).count();
        let what = format!(
            "monitor {} of {} by {} (wait {}, live {})",
            m.serial, m.target, m.watcher, m.wait, m.live
        );
        if got.len() > 1 {
            violations.push(format!("{what}: {} downs", got.len()));
        }
        if m.target == m.watcher && !got.is_empty() {
            violations.push(format!("{what}: a down for a monitor on itself"));
        }
        if removed.contains(&m.serial) && !got.is_empty() {
            violations.push(format!("{what}: a down after demonitor returned true"));
        }
        if m.wait && !loose(m.watcher) && seen != 1 {
            violations.push(format!(
                "{what}: waited, ended by its script, saw {seen} downs"
            ));
        }
        for d in got {
            if d.at != m.watcher || d.target != m.target {
                violations.push(format!(
                    "{what}: its down reached {} for {}",
                    d.at, d.target
                ));
            }
            if !reason_ok(parties, m.target, d.reason, m.live) {
                violations.push(format!("{what}: down with {:?}", d.reason));
            }
        }
    }
    for d in &n.downs {
        if !known.contains(&d.serial) {
            violations.push(format!("a down at {} for no monitor: {d:?}", d.at));
        }
    }
    for (serial, _) in &n.demonitors {
        if !known.contains(serial) {
            violations.push(format!("demonitor of monitor {serial}, never set"));
        }
    }
}

fn check_links(
    n: &Notices,
    parties: &HashMap<Pid, &Party>,
    loose: &dyn Fn(Pid) -> bool,
    violations: &mut Violations,
    counts: &mut NoticeCounts,
) {
    // (at, from) -> links made by `at` to `from`, and either way.
    let mut made: HashMap<(Pid, Pid), usize> = HashMap::new();
    for l in &n.links {
        counts.links += 1;
        *made.entry((l.from, l.to)).or_default() += 1;
    }
    let mut real: HashMap<(Pid, Pid), (usize, usize)> = HashMap::new();
    let mut none: HashMap<(Pid, Pid), usize> = HashMap::new();
    for e in &n.exits {
        counts.exits += 1;
        let what = format!(
            "exit of {} at {} ({:?}, dead {})",
            e.from, e.at, e.reason, e.dead
        );
        let mine = made.get(&(e.at, e.from)).copied().unwrap_or(0);
        if mine + made.get(&(e.from, e.at)).copied().unwrap_or(0) == 0 {
            violations.push(format!("{what}: no link either way"));
        }
        if e.at == e.from {
            violations.push(format!("{what}: from itself"));
        }
        if e.reason == ExitReason::NoProcess {
            counts.exits_no_process += 1;
            let count = none.entry((e.at, e.from)).or_default();
            *count += 1;
            if *count > mine {
                violations.push(format!("{what}: more than its {mine} links to it"));
            }
            continue;
        }
        let entry = real.entry((e.at, e.from)).or_default();
        entry.0 += 1;
        entry.1 += usize::from(!e.dead);
        if entry.0 > 1 {
            violations.push(format!("{what}: a second exit with a real reason"));
        }
        if !reason_ok(parties, e.from, e.reason, true) {
            violations.push(format!("{what}: not how it ended"));
        }
    }
    for l in &n.links {
        if !l.wait || loose(l.from) {
            continue;
        }
        let seen_real = real.get(&(l.from, l.to)).map_or(0, |r| r.1);
        let seen_none = n
            .exits
            .iter()
            .filter(|e| (e.at, e.from, e.dead) == (l.from, l.to, false))
            .count();
        if seen_real + seen_none == 0 {
            violations.push(format!(
                "link {l:?}: waited, ended by its script, saw no exit"
            ));
        }
        if l.live && seen_real == 0 {
            violations.push(format!("link {l:?}: to a live process, yet no real exit"));
        }
    }
}

/// An exit seen after the marker of an unlink of its sender must be
/// explained by a link between the two that was not certainly made before
/// the unlink began (its serial, drawn after `link` returned, is at least
/// the unlink's, drawn before `unlink` was called); otherwise it arrived
/// after `unlink` returned.
fn check_late_exits(n: &Notices, violations: &mut Violations, counts: &mut NoticeCounts) {
    for e in &n.late_exits {
        let relinked = n.links.iter().any(|l| {
            ((l.from, l.to) == (e.at, e.from) || (l.from, l.to) == (e.from, e.at))
                && l.seq >= e.unlink_seq
        });
        if relinked {
            counts.late_exits_relinked += 1;
        } else {
            violations.push(format!(
                "exit of {} ({:?}) reached {} after its unlink (serial {}) returned: \
                 seen after the unlink's marker, with no link between them since",
                e.from, e.reason, e.at, e.unlink_seq
            ));
        }
    }
}

fn check_cancels(n: &Notices, violations: &mut Violations, counts: &mut NoticeCounts) {
    let accepted: HashSet<Pid> = n
        .cancels
        .iter()
        .filter(|c| c.accepted)
        .map(|c| c.target)
        .collect();
    counts.cancels_accepted = n.cancels.iter().filter(|c| c.accepted).count() as u64;
    for p in &n.parties {
        counts.cancels_seen += u64::from(p.cancels_seen);
        if p.cancels_seen > 1 {
            violations.push(format!("{}: saw {} cancels", p.pid, p.cancels_seen));
        }
        if p.cancels_seen > 0 && !accepted.contains(&p.pid) {
            violations.push(format!(
                "{}: saw a cancel nobody's cancel was accepted for",
                p.pid
            ));
        }
    }
}

fn check_asks(
    n: &Notices,
    parties: &HashMap<Pid, &Party>,
    loose: &dyn Fn(Pid) -> bool,
    violations: &mut Violations,
    counts: &mut NoticeCounts,
) {
    let mut replies: HashMap<u64, Vec<&ReplyRec>> = HashMap::new();
    for r in &n.replies {
        replies.entry(r.serial).or_default().push(r);
        match r.answer {
            Answer::Value(_) => counts.replies_value += 1,
            Answer::Timeout => counts.replies_timeout += 1,
            Answer::NoReply => counts.replies_no_reply += 1,
            Answer::Unread(_) => counts.replies_unread += 1,
            Answer::Odd(_) => {}
        }
    }
    let mut requests: HashMap<u64, Vec<&RequestRec>> = HashMap::new();
    for r in &n.requests {
        requests.entry(r.serial).or_default().push(r);
    }
    let mut known = HashSet::new();
    for a in &n.asks {
        known.insert(a.serial);
        let what = format!(
            "ask {} by {} of {} (accepted {})",
            a.serial, a.asker, a.target, a.accepted
        );
        let got = replies.get(&a.serial).map_or(&[][..], Vec::as_slice);
        let asked = requests.get(&a.serial).map_or(&[][..], Vec::as_slice);
        if !a.accepted {
            counts.asks_refused += 1;
            if !got.is_empty() || !asked.is_empty() {
                violations.push(format!(
                    "{what}: {} replies, {} requests",
                    got.len(),
                    asked.len()
                ));
            }
            continue;
        }
        counts.asks_accepted += 1;
        // A process of the round gets its request (or dead-letters it)
        // exactly once; a PID of none (a refused submission, briefly
        // routable) at most once.
        let want = if parties.contains_key(&a.target) {
            1..=1
        } else {
            0..=1
        };
        // A request handed back unread was not delivered to a step nor
        // dead-lettered: it went back to its asker instead.
        let handed_back = got
            .iter()
            .filter(|r| matches!(r.answer, Answer::Unread(_)))
            .count();
        if !want.contains(&(asked.len() + handed_back)) || asked.iter().any(|r| r.at != a.target) {
            violations.push(format!("{what}: its request was delivered as {asked:?}"));
        }
        let seen = got.iter().filter(|r| !r.dead).count();
        // A question handed back after the asker's timeout is a dead
        // letter beside the `Timeout` (seen, or dead-lettered itself when
        // the asker ended): the question is not lost. Any other second
        // record is a double reply.
        let late_hand_back = got.len() == 2
            && got.iter().any(|r| r.answer == Answer::Timeout)
            && got
                .iter()
                .any(|r| r.dead && r.answer == Answer::Unread(Some(a.serial)));
        if (got.len() > 1 && !late_hand_back) || (!loose(a.asker) && seen != 1) {
            violations.push(format!(
                "{what}: replies {got:?} (asker loose {})",
                loose(a.asker)
            ));
        }
        let replied = parties
            .get(&a.target)
            .is_some_and(|p| p.replied.contains(&a.serial));
        for r in got {
            let fine = r.at == a.asker
                && match r.answer {
                    Answer::Value(x) => x == a.serial && replied,
                    Answer::NoReply => !replied,
                    // Unread: nobody replied, and the question that comes
                    // back is this ask's own.
                    Answer::Unread(question) => !replied && question == Some(a.serial),
                    Answer::Timeout => true,
                    Answer::Odd(_) => false,
                };
            if !fine {
                violations.push(format!(
                    "{what}: reply {r:?} (the target replied: {replied})"
                ));
            }
        }
    }
    for r in &n.replies {
        if !known.contains(&r.serial) {
            violations.push(format!("a reply for no ask: {r:?}"));
        }
    }
    for r in &n.requests {
        if !known.contains(&r.serial) {
            violations.push(format!("a request for no ask: {r:?}"));
        }
    }
}
