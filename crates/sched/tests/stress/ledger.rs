//! The conservation checks: every message and every completion of a round
//! is accounted for exactly once. Pure functions over plain records, so
//! the tests below can show they catch a lost or a duplicated event.

use std::collections::HashMap;

use sched::Pid;

use crate::script::Kind;
use crate::violations::Violations;

/// What a round recorded about its messages, by id.
#[derive(Debug, Default)]
pub(crate) struct Messages {
    /// Accepted by `send` (from a step or from outside).
    pub(crate) sent: Vec<u64>,
    /// Refused by `send`, which handed them back.
    pub(crate) refused: Vec<u64>,
    /// Delivered to a step.
    pub(crate) received: Vec<u64>,
    /// Reported by the dead-letter hook.
    pub(crate) dead: Vec<u64>,
    /// Delayed messages (accepted, so in `sent` too) whose timer
    /// `cancel_timer` cancelled: neither received nor dead-lettered.
    pub(crate) cancelled: Vec<u64>,
}

/// The totals the message check verified.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MessageCounts {
    pub(crate) sent: u64,
    pub(crate) refused: u64,
    pub(crate) received: u64,
    pub(crate) dead: u64,
    pub(crate) cancelled: u64,
}

/// Checks that every message `send` accepted was received or
/// dead-lettered exactly once, that none it refused was delivered, and
/// that nothing was delivered that was never sent.
pub(crate) fn check_messages(m: &Messages, violations: &mut Violations) -> MessageCounts {
    // [sent, refused, received, dead, cancelled] per id.
    let mut fates: HashMap<u64, [u32; 5]> = HashMap::new();
    for (i, ids) in [&m.sent, &m.refused, &m.received, &m.dead, &m.cancelled]
        .into_iter()
        .enumerate()
    {
        for &id in ids {
            fates.entry(id).or_default()[i] += 1;
        }
    }
    let mut ids: Vec<_> = fates.into_iter().collect();
    ids.sort_unstable_by_key(|(id, _)| *id);
    for (id, [sent, refused, received, dead, cancelled]) in ids {
        if cancelled > 0 {
            if sent != 1 || cancelled > 1 || received + dead > 0 {
                violations.push(format!(
                    "message {id}: cancelled {cancelled} times (sent {sent} times), yet \
                     received {received} times and dead-lettered {dead} times"
                ));
            }
            continue;
        }
        if sent + refused != 1 {
            violations.push(format!(
                "message {id}: sent {sent} times and refused {refused} times \
                 (received {received}, dead-lettered {dead})"
            ));
        } else if refused == 1 && received + dead > 0 {
            violations.push(format!(
                "message {id}: refused at send, yet received {received} times and \
                 dead-lettered {dead} times"
            ));
        } else if sent == 1 && received + dead == 0 {
            violations.push(format!(
                "message {id}: sent, then neither received nor dead-lettered (lost)"
            ));
        } else if sent == 1 && received + dead > 1 {
            violations.push(format!(
                "message {id}: delivered more than once (received {received} times, \
                 dead-lettered {dead} times)"
            ));
        }
    }
    MessageCounts {
        sent: m.sent.len() as u64,
        refused: m.refused.len() as u64,
        received: m.received.len() as u64,
        dead: m.dead.len() as u64,
        cancelled: m.cancelled.len() as u64,
    }
}

/// A yield that was dispatched to its handler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Issued {
    pub(crate) tag: u64,
    pub(crate) issuer: Pid,
    pub(crate) kind: Kind,
    /// The issuer ended `Terminated`.
    pub(crate) terminated: bool,
}

/// What a round recorded about its completions, by tag.
#[derive(Debug, Default)]
pub(crate) struct Completions {
    pub(crate) issued: Vec<Issued>,
    /// Yielded by a step that said done: never dispatched.
    pub(crate) discarded: Vec<u64>,
    /// Delivered to a step.
    pub(crate) seen: Vec<u64>,
    /// Reported by the dead-letter hook, with the process it was queued for.
    pub(crate) dead: Vec<(u64, Pid)>,
    /// Refused by `complete` as stale (the process had ended).
    pub(crate) stale: Vec<u64>,
}

/// The totals the completion check verified.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CompletionCounts {
    pub(crate) issued: u64,
    pub(crate) seen: u64,
    pub(crate) dead: u64,
    pub(crate) stale: u64,
    /// Dropped by a completer thread after a terminate had ended the
    /// process: nobody was left to tell.
    pub(crate) vanished: u64,
    pub(crate) discarded: u64,
}

/// Checks that every dispatched yield completed exactly once (seen by its
/// process, dead-lettered, or refused as stale), that no discarded yield
/// completed, and that nothing completed that was never yielded.
pub(crate) fn check_completions(c: &Completions, violations: &mut Violations) -> CompletionCounts {
    // [seen, dead, stale] per tag.
    let mut fates: HashMap<u64, [u32; 3]> = HashMap::new();
    for &tag in &c.seen {
        fates.entry(tag).or_default()[0] += 1;
    }
    for &(tag, _) in &c.dead {
        fates.entry(tag).or_default()[1] += 1;
    }
    for &tag in &c.stale {
        fates.entry(tag).or_default()[2] += 1;
    }
    let dead_at: HashMap<u64, Pid> = c.dead.iter().copied().collect();
    let mut vanished = 0;
    let mut issued_tags = HashMap::with_capacity(c.issued.len());
    for issued in &c.issued {
        let Issued {
            tag,
            issuer,
            kind,
            terminated,
        } = *issued;
        if issued_tags.insert(tag, issuer).is_some() {
            violations.push(format!("tag {tag}: issued twice"));
        }
        let [seen, dead, stale] = fates.get(&tag).copied().unwrap_or_default();
        let what = format!("tag {tag} ({kind:?}) of {issuer}");
        match seen + dead + stale {
            1 => {}
            0 if kind == Kind::AsyncDrop && terminated => vanished += 1,
            0 => violations.push(format!(
                "{what}: its completion vanished (not seen, not dead-lettered, not stale)"
            )),
            n => violations.push(format!(
                "{what}: completed {n} times (seen {seen}, dead-lettered {dead}, stale {stale})"
            )),
        }
        if kind == Kind::Hold && seen > 0 {
            violations.push(format!(
                "{what}: a completion nobody made reached the process"
            ));
        }
        if let Some(&pid) = dead_at.get(&tag) {
            if pid != issuer {
                violations.push(format!("{what}: dead-lettered at {pid}"));
            }
        }
    }
    for &tag in &c.discarded {
        if fates.contains_key(&tag) || issued_tags.contains_key(&tag) {
            violations.push(format!(
                "tag {tag}: yielded by a step that said done, yet dispatched or completed"
            ));
        }
    }
    let discarded: std::collections::HashSet<u64> = c.discarded.iter().copied().collect();
    let mut strays: Vec<u64> = fates
        .keys()
        .copied()
        .filter(|t| !issued_tags.contains_key(t) && !discarded.contains(t))
        .collect();
    strays.sort_unstable();
    for tag in strays {
        violations.push(format!("tag {tag}: completed, but never yielded"));
    }
    CompletionCounts {
        issued: c.issued.len() as u64,
        seen: c.seen.len() as u64,
        dead: c.dead.len() as u64,
        stale: c.stale.len() as u64,
        vanished,
        discarded: c.discarded.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages() -> Messages {
        Messages {
            sent: vec![1, 2, 3],
            refused: vec![4],
            received: vec![1, 2],
            dead: vec![3],
            cancelled: Vec::new(),
        }
    }

    #[test]
    fn accounted_messages_pass() {
        let mut v = Violations::default();
        let counts = check_messages(&messages(), &mut v);
        assert!(v.is_empty(), "{}", v.report());
        assert_eq!(counts.sent, counts.received + counts.dead);
    }

    #[test]
    fn lost_duplicated_and_phantom_messages_are_caught() {
        for (break_it, needle) in [
            (
                (|m: &mut Messages| {
                    m.received.pop();
                }) as fn(&mut Messages),
                "lost",
            ),
            (|m| m.received.push(1), "more than once"),
            (|m| m.dead.push(2), "more than once"),
            (|m| m.received.push(9), "sent 0 times"),
            (|m| m.dead.push(4), "refused at send"),
        ] {
            let mut m = messages();
            break_it(&mut m);
            let mut v = Violations::default();
            check_messages(&m, &mut v);
            assert!(v.mentions(needle), "wanted {needle:?}, got {}", v.report());
        }
    }

    #[test]
    fn cancelled_messages_are_neither_received_nor_dead_lettered() {
        let mut m = messages();
        m.sent.push(5);
        m.cancelled.push(5);
        let mut v = Violations::default();
        let counts = check_messages(&m, &mut v);
        assert!(v.is_empty(), "{}", v.report());
        assert_eq!(
            counts.sent,
            counts.received + counts.dead + counts.cancelled
        );
        for break_it in [
            (|m: &mut Messages| m.received.push(5)) as fn(&mut Messages),
            |m| m.dead.push(5),
            |m| m.cancelled.push(4),
            |m| m.cancelled.push(5),
        ] {
            let mut m = messages();
            m.sent.push(5);
            m.cancelled.push(5);
            break_it(&mut m);
            let mut v = Violations::default();
            check_messages(&m, &mut v);
            assert!(v.mentions("cancelled"), "got {}", v.report());
        }
    }

    fn completions() -> Completions {
        let issued = |tag, kind, terminated| Issued {
            tag,
            issuer: Pid::local(1),
            kind,
            terminated,
        };
        Completions {
            issued: vec![
                issued(1, Kind::Sync, false),
                issued(2, Kind::Async, true),
                issued(3, Kind::Hold, true),
                issued(4, Kind::AsyncDrop, true),
            ],
            discarded: vec![5],
            seen: vec![1],
            dead: vec![(2, Pid::local(1))],
            stale: vec![3],
        }
    }

    #[test]
    fn accounted_completions_pass() {
        let mut v = Violations::default();
        let counts = check_completions(&completions(), &mut v);
        assert!(v.is_empty(), "{}", v.report());
        assert_eq!(counts.vanished, 1);
    }

    #[test]
    fn lost_duplicated_and_phantom_completions_are_caught() {
        for (break_it, needle) in [
            (
                (|c: &mut Completions| {
                    c.seen.clear();
                }) as fn(&mut Completions),
                "vanished",
            ),
            (|c| c.seen.push(1), "completed 2 times"),
            (|c| c.stale.push(2), "completed 2 times"),
            (|c| c.seen.push(3), "nobody made"),
            (|c| c.seen.push(5), "said done"),
            (|c| c.stale.push(77), "never yielded"),
            (|c| c.dead[0].1 = Pid::local(2), "dead-lettered at"),
            (|c| c.issued[3].terminated = false, "vanished"),
        ] {
            let mut c = completions();
            break_it(&mut c);
            let mut v = Violations::default();
            check_completions(&c, &mut v);
            assert!(v.mentions(needle), "wanted {needle:?}, got {}", v.report());
        }
    }
}
