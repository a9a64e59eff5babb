//! The transport's own thread: a single-threaded tokio runtime that owns
//! the NATS client, publishes frames in the order they were queued, and
//! delivers what arrives on the node's subject to the local engine.

use std::sync::atomic::Ordering::AcqRel;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use relay::Receiver;
use tokio::sync::mpsc;

use crate::codec::{Content, Decoded};
use crate::config::{announce_subject, frame_subject, inbox_subject, members_subject, sender_of};
use crate::error::LinkError;
use crate::membership::{
    announcement, beat, farewell, goodbye, read_announcement, read_confirmations, Change, Kind,
};
use crate::sequence::Seen;
use crate::shared::{lock, Attached, Command, Inner};
use crate::stats::Counters;
use crate::wire::{self, Control, Stamp};

/// How long closing waits for the goodbye and queued frames to flush.
const CLOSE_FLUSH: Duration = Duration::from_secs(2);
/// How long closing reads on, after the goodbye, for the nodes that were
/// up to answer it (`farewell.rs`).
const FAREWELL_WAIT: Duration = Duration::from_secs(2);

/// Runs the command loop until [`Command::Close`] or until every sender is
/// gone.
pub(crate) async fn run(
    client: async_nats::Client,
    inner: Arc<Inner>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut node = None;
    while let Some(command) = commands.recv().await {
        match command {
            Command::Publish {
                node: to,
                frame,
                addressed,
                receipt,
            } => {
                let (stamp, unheld) = {
                    let mut numbers = lock(&inner.numbers);
                    // Checked under the numbers' lock, which the failure
                    // detector takes after declaring a node down to read
                    // what was numbered for it: a frame is numbered before
                    // that read (and counted `unconfirmed` if the node
                    // never confirmed it) or sees the node lost and is
                    // not published. Queued before the loss, it would
                    // otherwise be published after the count, into no
                    // counter at all.
                    // Declared down or gone, not merely being reset: a
                    // node this one is resetting with may not have lost
                    // this one (only this node's connection dropped), and
                    // delivers what is published to it before the reset
                    // (or, if it did lose this one, drops it counting it
                    // `fenced`).
                    // And a frame accepted for a run of the node that has
                    // since restarted is not for the new run: its PIDs may
                    // be in use by other processes there.
                    let (current, gone) = inner.members.route(to);
                    let lost = gone
                        .filter(|gone| {
                            matches!(gone, LinkError::NodeDown(_) | LinkError::NodeLeft(_))
                        })
                        .map(|gone| gone.to_string())
                        .or_else(|| {
                            (addressed != 0 && current != addressed)
                                .then(|| format!("node {to} restarted since"))
                        });
                    if let Some(gone) = lost {
                        drop(numbers);
                        Counters::add(&inner.counters.abandoned, 1);
                        tracing::debug!(node = to, %gone, "a message queued for a node lost meanwhile was not published");
                        inner.pending.fetch_sub(1, AcqRel);
                        continue;
                    }
                    // The number is used up even if the publish fails: the
                    // receiver then sees the gap, and knows what it lost.
                    let (seq, first) = numbers.number(to, current);
                    // Held under the numbers' lock, which the count of
                    // what `to` never confirmed is taken under: a frame
                    // held is counted there or confirmed, never left
                    // held for a node that is gone.
                    let unheld = receipt.and_then(|r| inner.members.hold(to, seq, r));
                    let stamp = Stamp {
                        addressed: current,
                        incarnation: inner.incarnation,
                        seq,
                        first,
                    };
                    (stamp, unheld)
                };
                // Told outside the numbers' lock (it takes the gaps').
                drop(unheld);
                publish(&client, &inner, to, frame, stamp).await;
            }
            Command::Control { node: to, frame } => {
                publish_control(&client, &inner, to, frame).await
            }
            Command::Attach {
                node: me,
                local,
                done,
            } => {
                let _ = inner.engine.set(Attached(me, Arc::clone(&local)));
                let result = attach(&client, &inner, me, local).await;
                if result.is_ok() {
                    node = Some(me);
                }
                let _ = done.send(result);
            }
            Command::Run(work) => {
                tokio::spawn(work);
            }
            Command::Close => break,
        }
    }
    close(&client, &inner, commands, node).await;
}

/// Stamps a numbered frame for `to` with `stamp` and publishes it;
/// counts it published or failed.
async fn publish(
    client: &async_nats::Client,
    inner: &Inner,
    to: u32,
    mut frame: Vec<u8>,
    stamp: Stamp,
) {
    wire::stamp(&mut frame, stamp);
    let subject = frame_subject(&inner.prefix, to, inner.node());
    match client.publish(subject, frame.into()).await {
        Ok(()) => {
            Counters::add(&inner.counters.published, 1);
        }
        Err(error) => {
            Counters::add(&inner.counters.publish_failed, 1);
            tracing::warn!(node = to, %error, "a message to another node was not published");
        }
    }
    inner.pending.fetch_sub(1, AcqRel);
}

/// Stamps a control frame (not numbered) for `to`'s run as known now,
/// and publishes it.
async fn publish_control(client: &async_nats::Client, inner: &Inner, to: u32, mut frame: Vec<u8>) {
    let addressed = inner.members.incarnation_of(to);
    let stamp = Stamp {
        addressed,
        incarnation: inner.incarnation,
        seq: 0,
        first: 0,
    };
    wire::stamp(&mut frame, stamp);
    let subject = frame_subject(&inner.prefix, to, inner.node());
    if let Err(error) = client.publish(subject, frame.into()).await {
        // Repeated every heartbeat while it matters.
        tracing::debug!(node = to, %error, "a control frame was not published");
    }
}

/// After [`Command::Close`]: counts the frames queued behind it, releases
/// this run's names, says goodbye (if the node was attached, as `node`)
/// and flushes.
async fn close(
    client: &async_nats::Client,
    inner: &Inner,
    mut commands: mpsc::UnboundedReceiver<Command>,
    node: Option<u32>,
) {
    // A send that checked `closed` just before the transport closed may
    // have queued its frame behind `Close`: not published, so counted.
    commands.close();
    while let Ok(command) = commands.try_recv() {
        if let Command::Publish { .. } = command {
            Counters::add(&inner.counters.abandoned, 1);
            inner.pending.fetch_sub(1, AcqRel);
        }
    }
    if let (Some(me), Some(bucket)) = (node, inner.names.get()) {
        // This run's names go with it; what steps under their leases stops
        // first.
        crate::leases::give_up_all(inner);
        let own = bucket.sweep(me, |h| h.incarnation == inner.incarnation);
        if let Ok(released) = tokio::time::timeout(CLOSE_FLUSH, own).await {
            tracing::debug!(node = me, released, "released this node's names");
        }
    }
    if let Some(me) = node {
        // Who may still publish here: each answers the goodbye with a
        // farewell, the last frame it sends this run (`farewell.rs`).
        let up = inner.members.up();
        // The publishing loop has ended: the numbers are final.
        let sent: Vec<(u32, u64, u64)> = lock(&inner.numbers)
            .all_sent()
            .into_iter()
            .map(|(node, last)| (node, inner.incarnation, last))
            .collect();
        let goodbye = goodbye(me, inner.incarnation, &sent);
        let _ = client
            .publish(announce_subject(&inner.prefix, me), goodbye.into())
            .await;
        crate::farewell::await_farewells(inner, up, FAREWELL_WAIT).await;
        match tokio::time::timeout(CLOSE_FLUSH, client.flush()).await {
            Ok(Ok(())) => tracing::debug!(node = me, "NATS transport closed"),
            Ok(Err(error)) => tracing::warn!(node = me, %error, "flush on close failed"),
            Err(_) => tracing::warn!(node = me, "flush on close timed out"),
        }
    }
}

/// Subscribes to the node's subject and to the membership subject, starts
/// a task for each, and announces the node.
async fn attach(
    client: &async_nats::Client,
    inner: &Arc<Inner>,
    node: u32,
    local: Arc<dyn Receiver + Send + Sync>,
) -> Result<(), String> {
    let subject = inbox_subject(&inner.prefix, node);
    let messages = client
        .subscribe(subject.clone())
        .await
        .map_err(|e| format!("cannot subscribe to {subject}: {e}"))?;
    let members = members_subject(&inner.prefix);
    let announcements = client
        .subscribe(members.clone())
        .await
        .map_err(|e| format!("cannot subscribe to {members}: {e}"))?;
    let members = announce_subject(&inner.prefix, node);
    tokio::spawn(receive(messages, Arc::clone(inner), node, local));
    let _ = inner.announced_at.set(tokio::time::Instant::now());
    tokio::spawn(watch_members(
        announcements,
        Arc::clone(inner),
        node,
        client.clone(),
    ));
    client
        .publish(
            members,
            announcement(node, Kind::Up, inner.incarnation).into(),
        )
        .await
        .map_err(|e| format!("cannot announce node {node}: {e}"))?;
    if let Some(bucket) = &inner.names_bucket {
        match crate::kv::open(client, bucket, inner.name_lease).await {
            Ok(bucket) => {
                // An earlier run's names go: only this node may withdraw
                // them, and that run is over.
                let earlier = bucket.sweep(node, |h| h.incarnation != inner.incarnation);
                let released = earlier.await;
                if released > 0 {
                    tracing::info!(
                        node,
                        released,
                        "released the names of this node's earlier run"
                    );
                }
                tokio::spawn(crate::leases::renew_leases(
                    bucket.clone(),
                    Arc::clone(inner),
                ));
                let _ = inner.names.set(bucket);
            }
            Err(error) => {
                tracing::error!(node, %error, "cluster names are off")
            }
        }
    }
    tokio::spawn(heartbeat(client.clone(), Arc::clone(inner), node));
    tokio::spawn(detect(Arc::clone(inner)));
    confirm_subscribed(client, inner, node).await?;
    tracing::info!(node, %subject, "node joined the NATS cluster");
    Ok(())
}

/// How long attaching waits for the server to confirm the subscriptions.
const CONFIRM: Duration = Duration::from_secs(5);

/// Waits until the server has processed this connection's subscriptions.
///
/// `Client::flush` only writes them to the socket: the server reads each
/// connection on its own, so a frame another node publishes right after
/// this one attached could reach the server before the subscription and
/// be dropped (NATS delivers to the subscribers it knows when a message
/// arrives). The server handles one connection's operations in order, so
/// an answer to a request sent after the subscriptions proves they are in
/// place. Nobody listens on the probe subject: the answer is the server's
/// own "no responders" status.
async fn confirm_subscribed(
    client: &async_nats::Client,
    inner: &Inner,
    node: u32,
) -> Result<(), String> {
    let probe = format!("{}.probe.{node}.{}", inner.prefix, inner.incarnation);
    let request = async_nats::Request::new().timeout(Some(CONFIRM));
    match client.send_request(probe, request).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => Ok(()),
        // A server without headers support never answers "no responders":
        // the subscriptions are sent, just not confirmed.
        Err(e) if e.kind() == async_nats::RequestErrorKind::TimedOut => {
            tracing::warn!(node, "the server did not confirm the subscriptions in time");
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot confirm the subscriptions of node {node}: {e}"
        )),
    }
}

/// Decodes and delivers what arrives for this node. Nothing that arrives
/// can stop it: bad frames are rejected and counted, refusals are dead
/// letters.
async fn receive(
    mut messages: async_nats::Subscriber,
    inner: Arc<Inner>,
    node: u32,
    local: Arc<dyn Receiver + Send + Sync>,
) {
    while let Some(message) = messages.next().await {
        let Some((sender, source, decoded)) = vet(&inner, node, &message) else {
            continue;
        };
        let (incarnation, seq, first) = (decoded.incarnation, decoded.seq, decoded.first);
        let package = match decoded.content {
            Content::Package(package) => package,
            // Not numbered: in order with the frames before it all the same
            // (one publisher, one subject).
            Content::Control { control, .. } => {
                inner.on_control(sender, control);
                continue;
            }
        };
        let stamp = Stamp {
            addressed: decoded.addressed,
            incarnation,
            seq,
            first,
        };
        if let Some(receipt) = admit_numbered(&inner, node, sender, source, stamp) {
            deliver(&inner, node, &*local, source, package.with_receipt(receipt));
        }
    }
    tracing::debug!(node, "subscription ended");
}

/// A frame that arrived for this node, decoded, with its sender (the node
/// its subject names) and its source; `None`, counted, when it names no
/// sender, cannot be decoded, claims another node's identity, or belongs
/// to an earlier run of this node or of its sender.
fn vet(
    inner: &Inner,
    node: u32,
    message: &async_nats::Message,
) -> Option<(u32, relay::Pid, Decoded)> {
    // Who sent it: the subject says, and only that node's credentials
    // may publish there (see `NatsConfig::permissions`).
    let Some(sender) = sender_of(&message.subject) else {
        Counters::add(&inner.counters.forged, 1);
        tracing::warn!(node, subject = %message.subject, "rejected a frame on a subject that names no sender");
        return None;
    };
    let decoded = match inner.codec.decode_frame(&message.payload, node) {
        Ok(decoded) => decoded,
        Err(error) => {
            Counters::add(&inner.counters.rejected, 1);
            tracing::warn!(node, %error, bytes = message.payload.len(), "rejected a message from NATS");
            return None;
        }
    };
    let incarnation = decoded.incarnation;
    let source = match &decoded.content {
        Content::Package(package) => package.source(),
        Content::Control { from, .. } => relay::Pid::new(*from, 0),
    };
    let now = tokio::time::Instant::now().into_std();
    if let Err(claim) = inner.members.vouch(sender, source, incarnation, now) {
        Counters::add(&inner.counters.forged, 1);
        tracing::warn!(node, sender, %source, claim, "rejected a frame that claims another node's identity");
        return None;
    }
    if decoded.addressed != 0 && decoded.addressed != inner.incarnation {
        // Addressed to an earlier run of this node: its PIDs are not
        // this run's processes.
        Counters::add(&inner.counters.stale, 1);
        tracing::warn!(node, %source, "ignored a message addressed to this node's earlier run");
        return None;
    }
    if inner.members.is_stale(source.node(), incarnation) {
        // A run of that node before its restart: nothing of it may
        // reach the processes of the new run's time.
        Counters::add(&inner.counters.stale, 1);
        tracing::warn!(node, %source, "ignored a message from a node's earlier run");
        return None;
    }
    Some((sender, source, decoded))
}

/// Whether the numbered frame `stamp.seq` of `sender`'s run
/// `stamp.incarnation` is taken: not a replay, and not from a node being
/// reset. If it is, the receipt its package carries to the process: until
/// the process takes it, the frame is left out of what this node confirms
/// to the sender (`sequence.rs`, `Held`). A gap before it is counted lost, and loses the sender (see
/// `reset.rs`); so is a gap before the first frame seen from that run,
/// after the first number it gave this node (`sequence.rs`), but that
/// one loses the sender only if it addressed this run: frames sent before
/// it knew this run carried nothing of relations with it.
fn admit_numbered(
    inner: &Inner,
    node: u32,
    sender: u32,
    source: relay::Pid,
    stamp: Stamp,
) -> Option<relay::Receipt> {
    let Stamp {
        addressed,
        incarnation,
        seq,
        first,
    } = stamp;
    let (seen, receipt) = {
        let mut gaps = lock(&inner.gaps);
        let seen = gaps.observe(sender, incarnation, seq, first);
        if let Seen::First(_) = seen {
            gaps.retire(sender, incarnation);
        }
        // Counted unread under the lock the heartbeat confirms under: no
        // confirmation covers this frame until its process took it.
        let receipt = (seen != Seen::Again).then(|| gaps.receipt(sender, incarnation, seq));
        (seen, receipt)
    };
    match seen {
        Seen::First(0) | Seen::Next(0) => {}
        Seen::First(missing) if addressed == 0 => {
            Counters::add(&inner.counters.lost, missing);
            tracing::warn!(node, %source, missing, "the first messages from another node were lost in transit");
        }
        Seen::First(missing) | Seen::Next(missing) => {
            Counters::add(&inner.counters.lost, missing);
            tracing::warn!(node, %source, missing, "messages from another node were lost in transit");
            // Some may have been signals (a down, an exit, an answer):
            // the relations with that node can no longer be vouched for.
            inner.lose(sender);
        }
        Seen::Again => {
            Counters::add(&inner.counters.duplicates, 1);
            tracing::warn!(node, %source, seq, "dropped a frame sent again (a replay)");
            return None;
        }
    }
    // Sent by a node this one lost, before it ended its relations with
    // this one: what it says may belong to relations already ended.
    if inner.members.is_fenced(sender) {
        Counters::add(&inner.counters.fenced, 1);
        tracing::debug!(node, %source, "dropped a message from a node being reset");
        return None;
    }
    receipt
}

/// Hands `package` to the local engine, as any local send; counts it
/// delivered, rejected (a signal the engine could not read) or a dead
/// letter.
fn deliver(
    inner: &Inner,
    node: u32,
    local: &(dyn Receiver + Send + Sync),
    source: relay::Pid,
    package: relay::Package,
) {
    match local.send(package) {
        Ok(()) => Counters::add(&inner.counters.delivered, 1),
        Err(error) if error.kind() == relay::SendErrorKind::Unencodable => {
            // A signal the engine could not read.
            Counters::add(&inner.counters.rejected, 1);
            tracing::warn!(node, %source, %error, "rejected a signal from another node");
        }
        Err(error) => {
            Counters::add(&inner.counters.dead_letters, 1);
            tracing::warn!(node, %source, %error, "dead letter: a message from another node was not delivered");
        }
    }
}

/// Keeps what this node knows of the others up to date: who is up, who
/// left (see `membership.rs`).
async fn watch_members(
    mut announcements: async_nats::Subscriber,
    inner: Arc<Inner>,
    me: u32,
    client: async_nats::Client,
) {
    while let Some(message) = announcements.next().await {
        let announced = read_announcement(&message.payload);
        if let Some((node, _, _)) = announced {
            if sender_of(&message.subject) != Some(node) {
                // Only node `node`'s credentials may publish on its
                // announcement subject: this one speaks for another.
                Counters::add(&inner.counters.forged, 1);
                tracing::warn!(me, node, subject = %message.subject, "rejected an announcement for another node");
                continue;
            }
        }
        match announced {
            Some((node, _, _)) if node == me => {}
            Some((node, Kind::Farewell, incarnation)) => {
                let to_me = read_confirmations(&message.payload)
                    .into_iter()
                    .find(|&(to, run, _)| to == me && run == inner.incarnation);
                if let Some((_, _, last)) = to_me {
                    inner.answered(node, incarnation, last);
                }
            }
            Some((node, kind, incarnation)) => {
                let now = tokio::time::Instant::now().into_std();
                // A heartbeat confirms what it saw of this run's frames; a
                // goodbye says the last frame it published here.
                let entries = read_confirmations(&message.payload);
                let mine = entries.iter().find(|&&(to, run, _)| {
                    to == me && (kind != Kind::Beat || run == inner.incarnation)
                });
                let last_here = match (kind, mine) {
                    (Kind::Beat, Some(&(_, _, seq))) => {
                        // What it confirmed of the frames passed on from
                        // other nodes now counts as taken there.
                        drop(inner.members.confirm(node, seq));
                        None
                    }
                    (Kind::Down, Some(&(_, _, last))) => Some(last),
                    _ => None,
                };
                // Under the numbers' lock, which the publishing loop holds
                // from its look at the node's run to the numbering: a
                // restart's switch and the count of what went to the old
                // run are one step (see `Change::Restarted`).
                let (change, sent) = {
                    let numbers = lock(&inner.numbers);
                    let change = inner.members.hear(node, kind, incarnation, now);
                    (change, numbers.sent(node))
                };
                match change {
                    Change::None => {}
                    Change::Up => {
                        tracing::info!(node, "a node is up");
                        // Lost while it was away: tell it now, not at the
                        // next heartbeat.
                        inner.repeat_resets();
                    }
                    Change::Restarted => {
                        tracing::info!(node, "a node restarted: its earlier run is gone");
                        // What the earlier run never confirmed is counted
                        // here, as for a node declared down: it may have
                        // died before the failure detector said so.
                        count_unconfirmed(&inner, node, sent);
                        inner.tell_lost(node);
                    }
                    Change::Left => {
                        let run = (node, incarnation);
                        answer_goodbye(&client, &inner, me, run, last_here).await;
                    }
                    Change::Stale => {
                        Counters::add(&inner.counters.stale, 1);
                        tracing::debug!(node, "ignored an announcement of a node's earlier run");
                    }
                }
            }
            None => tracing::warn!(me, "ignored a malformed node announcement"),
        }
    }
}

/// Answers the goodbye of `node`'s run `incarnation` (`run`), which said
/// it published `last_here` to this node last: ends what this node had
/// with it and tells it the last frame this node numbered for it.
async fn answer_goodbye(
    client: &async_nats::Client,
    inner: &Inner,
    me: u32,
    (node, incarnation): (u32, u64),
    last_here: Option<u64>,
) {
    tracing::info!(node, "a node left");
    // What it has not confirmed of the frames passed on to it, it counts
    // itself as it leaves (it reads on until this node answers).
    drop(inner.members.release(node));
    if let Some(last) = last_here {
        inner.left_having_sent(node, incarnation, last);
    }
    inner.tell_lost(node);
    // After `hear` marked it left: what is queued for it from here on is
    // not published, so the last number is final (read under the numbers'
    // lock, which the publishing loop holds from its check to the
    // numbering).
    let last = lock(&inner.numbers).sent(node);
    inner.send_control(node, Control::Farewell(last));
    let answer = farewell(me, inner.incarnation, node, incarnation, last);
    let subject = announce_subject(&inner.prefix, me);
    if let Err(error) = client.publish(subject, answer.into()).await {
        tracing::debug!(node, %error, "a farewell was not announced");
    }
}

/// Tells the other nodes this one is alive, every heartbeat.
async fn heartbeat(client: async_nats::Client, inner: Arc<Inner>, me: u32) {
    let mut ticks = tokio::time::interval(inner.heartbeat);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let subject = announce_subject(&inner.prefix, me);
    loop {
        ticks.tick().await;
        let confirmations = lock(&inner.gaps).confirmations();
        let beat = beat(me, inner.incarnation, &confirmations);
        if client.publish(subject.clone(), beat.into()).await.is_err() {
            // The client is gone (the transport closed).
            return;
        }
        inner.repeat_resets();
    }
}

/// Counts in `unconfirmed` the frames among the `sent` numbered for
/// `node` that its run, now down or replaced by a new one, never
/// confirmed: lost with it, or received just before (each counted once).
fn count_unconfirmed(inner: &Inner, node: u32, sent: u64) {
    // The frames passed on from other nodes among them are counted here:
    // their receipts are told (`Members::hold`).
    let (unconfirmed, released) = inner.members.unconfirmed(node, sent);
    drop(released);
    if unconfirmed > 0 {
        Counters::add(&inner.counters.unconfirmed, unconfirmed);
        tracing::warn!(
            node,
            unconfirmed,
            "frames sent to a node now down or restarted were never confirmed: lost with it, or received just before"
        );
    }
}

/// Declares down the nodes not heard from for the bound, every heartbeat.
async fn detect(inner: Arc<Inner>) {
    let mut ticks = tokio::time::interval(inner.heartbeat);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !inner.connected.load(std::sync::atomic::Ordering::Acquire) {
            continue;
        }
        let now = tokio::time::Instant::now().into_std();
        for node in inner.members.sweep(now, inner.down_after) {
            Counters::add(&inner.counters.nodes_down, 1);
            // After the sweep marked it down: from here on, nothing more
            // is numbered for it (see `Command::Publish`).
            let sent = lock(&inner.numbers).sent(node);
            count_unconfirmed(&inner, node, sent);
            tracing::warn!(
                node,
                silent_for = ?inner.down_after,
                "a node is down: not heard from within the failure detector's bound"
            );
            // Its names stay: a silent node may still run (a false alarm),
            // and only it may withdraw them. Its leases lapse if it is
            // really gone.
            inner.lose(node);
        }
    }
}
