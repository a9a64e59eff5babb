//! `ask` across nodes: the asker's node keeps the asker under a key until
//! the answer comes back (or the asked node is lost); the asked node hands
//! its process a [`ReplyTo`](crate::ReplyTo) whose answer travels back as
//! a signal.
//!
//! The asker's side is the local ask's: a step's ask still times out on
//! its own timer, an outside [`Reply`](crate::Reply) still waits with its
//! own timeout; an answer arriving after that is dropped there. The key
//! stays listed until an answer, a refusal or the node's loss removes it,
//! each exactly once: the asked process answers once, or its `ReplyTo` is
//! dropped (`NoReply`), or it ended before reading the question (`Unread`,
//! the question coming back).

use std::sync::Arc as StdArc;

use relay::{Payload, Pid, RemoteTransport, SendError, SendErrorKind, Signal};

use super::protocol::Op;
use super::table::Across;
use crate::contract::reply::{Answer, AskError, ON_ANOTHER_NODE};
use crate::engine::shared::Shared;
use crate::panic_guard::drop_user_value;

impl Across {
    /// Asks the remote process `to`, answered through `asker`. When the
    /// question cannot leave, the asker is never told (the caller gets the
    /// error, with the question).
    pub(crate) fn ask_remote(
        &self,
        engine: &Shared,
        from: Pid,
        to: Pid,
        question: Payload,
        asker: StdArc<dyn Answer>,
    ) -> Result<(), SendError> {
        let key = engine.ids.next();
        let sender = if from == Pid::OUTSIDE {
            Pid::new(self.node, 0)
        } else {
            from
        };
        self.shard(&key).asks.insert(key, (to.node(), asker));
        engine.expect_answer();
        match self.signal(sender, to, &Op::Ask { key }, Some(question)) {
            Ok(()) => Ok(()),
            Err(mut error) => {
                let asker = self.shard(&key).asks.remove(&key);
                drop(asker);
                // The question back in a package of its own, as a local
                // ask's refusal has it.
                let signal =
                    std::mem::replace(error.package_mut(), relay::Package::new(from, to, ()));
                if let Ok(signal) = signal.downcast::<Signal>() {
                    if let (_, Some(question)) = signal.into_parts() {
                        *error.package_mut() = relay::Package::from_payload(from, to, question);
                    }
                }
                Err(error)
            }
        }
    }

    /// The remote process `from` asks `to`, here, under `key`.
    pub(super) fn asked_by_remote(
        &self,
        engine: &Shared,
        from: Pid,
        to: Pid,
        key: u64,
        question: Payload,
    ) {
        let answer = StdArc::new(RemoteAnswer {
            remote: StdArc::clone(&self.remote),
            asked: to,
            asker: from,
            key,
        });
        let asker: StdArc<dyn Answer> = answer.clone();
        if let Err(error) = engine
            .asks
            .ask(engine, from, to, question, ON_ANOTHER_NODE, asker)
        {
            // Nobody read it: the question goes back, as `Unread`.
            tracing::debug!(%to, %error, "a request from another node was not delivered");
            let question = error.into_package().into_payload();
            if let Err(question) = answer.unread(question) {
                drop_user_value(question, to, "a question that could not go back");
            }
        }
    }

    /// The answer to the ask under `key`, from the remote process `from`.
    pub(super) fn answered_by_remote(
        &self,
        from: Pid,
        key: u64,
        result: Result<(), AskError>,
        payload: Option<Payload>,
    ) {
        let mut table = self.shard(&key);
        let entry = match table.asks.get(&key) {
            Some((node, _)) if *node == from.node() => table.asks.remove(&key),
            _ => None,
        };
        drop(table);
        let Some((_, asker)) = entry else {
            // Answered already, or its node was declared lost first.
            if let Some(payload) = payload {
                drop_user_value(payload, from, "an answer nobody waits for");
            }
            return;
        };
        match (result, payload) {
            (Ok(()), Some(answer)) => asker.answer(Ok(answer)),
            (Err(AskError::Unread), Some(question)) => {
                if let Err(question) = asker.unread(question) {
                    drop_user_value(question, from, "a question handed back to nobody");
                }
            }
            (Ok(()), None) => asker.answer(Err(AskError::NoReply)),
            (Err(error), payload) => {
                drop(payload);
                asker.answer(Err(error));
            }
        }
    }
}

/// The right to answer a request from another node: the answer travels
/// back as a signal.
struct RemoteAnswer {
    remote: StdArc<dyn RemoteTransport>,
    asked: Pid,
    asker: Pid,
    key: u64,
}

impl RemoteAnswer {
    fn send(
        &self,
        result: Result<(), AskError>,
        payload: Option<Payload>,
    ) -> Result<(), SendError> {
        let op = Op::Answer {
            key: self.key,
            result,
        };
        let signal = Signal::new(op.encode(), payload);
        self.remote
            .send(relay::Package::new(self.asked, self.asker, signal))
    }
}

/// The payload a refused signal carried.
fn payload_of(error: SendError) -> Option<Payload> {
    let signal = error.into_package().downcast::<Signal>().ok()?;
    signal.into_parts().1
}

impl Answer for RemoteAnswer {
    fn asker(&self) -> Pid {
        self.asker
    }

    fn answer(&self, result: Result<Payload, AskError>) {
        let sent = match result {
            Ok(answer) => match self.send(Ok(()), Some(answer)) {
                Err(error) if error.kind() == SendErrorKind::Unencodable => {
                    tracing::warn!(asker = %self.asker, %error, "an answer cannot cross to the asker's node");
                    if let Some(answer) = payload_of(error) {
                        drop_user_value(answer, self.asked, "an answer that cannot cross nodes");
                    }
                    self.send(Err(AskError::Unencodable), None)
                }
                other => other,
            },
            Err(error) => self.send(Err(error), None),
        };
        if let Err(error) = sent {
            // The asker's node is unreachable: it learns so from its
            // transport, and the ask fails there with `NodeDown`.
            tracing::debug!(asker = %self.asker, %error, "an answer did not reach its node");
            if let Some(answer) = payload_of(error) {
                drop_user_value(answer, self.asked, "an answer that did not reach its node");
            }
        }
    }

    fn unread(&self, question: Payload) -> Result<(), Payload> {
        match self.send(Err(AskError::Unread), Some(question)) {
            Ok(()) => Ok(()),
            Err(error) => payload_of(error).map_or(Ok(()), Err),
        }
    }
}
