//! Answers that travel apart from their questions: a right to answer
//! made before its question goes anywhere ([`Context::reply_pair`],
//! [`Output::reply_pair`]), and a right to answer passed on with a new
//! question to another process ([`ReplyTo::forward`]). A router, a proxy
//! or a buffer that holds questions until their process is known uses
//! them; the process that finally answers sees an ordinary
//! [`Request`](crate::Request).
//!
//! The right to answer stays one: it answers exactly once wherever it
//! goes, and dropped unanswered it answers `AskError::NoReply`, as an
//! ask's does.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc as StdArc;
use std::time::Duration;

use relay::{Pid, SendError};

use super::ask::{question_name, Reply, ReplyId, ReplySlot};
use super::Context;
use crate::contract::output::Output;
use crate::contract::reply::{Answer, Question, ReplyTo};

impl Context {
    /// A [`Reply`] to wait on and the right to answer it, apart: hand the
    /// right on (with [`ReplyTo::forward`], or in a message) to whoever
    /// will answer, and wait on the reply here. `Q` is the question the
    /// answer will be to: the reply takes a `Q::Answer`. Dropping the
    /// right unanswered answers [`AskError::NoReply`](crate::AskError::NoReply).
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Square(u64);
    /// impl Question for Square {
    ///     type Answer = u64;
    /// }
    ///
    /// /// Answers every `Square`.
    /// struct Squarer;
    /// impl Process for Squarer {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Request(request) = event {
    ///                 if let Ok((Square(n), answer)) = request.take::<Square>() {
    ///                     answer.answer(n * n);
    ///                 }
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let squarer = scheduler.spawn(Squarer)?.pid();
    /// // The reply first; the question goes later, with the right to answer.
    /// let (mut reply, answer_to) = scheduler.context().reply_pair::<Square>();
    /// answer_to.forward(scheduler.context(), squarer, Square(9)).map_err(|(e, _)| e)?;
    /// assert_eq!(reply.wait_timeout(Duration::from_secs(5))?, 81);
    /// # scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reply_pair<Q: Question>(&self) -> (Reply<Q::Answer>, ReplyTo) {
        let slot = StdArc::new(ReplySlot::default());
        let asker: StdArc<dyn Answer> = slot.clone();
        let reply = Reply {
            slot,
            answer: PhantomData,
        };
        (reply, ReplyTo::new(asker, question_name::<Q>()))
    }
}

impl Output<'_> {
    /// As [`Context::reply_pair`], from a step: the answer comes back to
    /// this process as [`Event::Reply`](crate::Event::Reply) with the
    /// returned [`ReplyId`] (read it with [`ReplyId::answer`]), or
    /// `AskError::TimedOut` once `timeout` has passed. Exactly one
    /// `Reply` event, as for [`Output::ask`]; if this process ends first,
    /// nothing arrives anywhere.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::actor::Replied;
    /// use sched::ReplyId;
    /// use std::time::Duration;
    ///
    /// struct Square(u64);
    /// impl Question for Square {
    ///     type Answer = u64;
    /// }
    ///
    /// /// Asks `squarer` through a right to answer it passes on itself.
    /// struct Asker { squarer: Pid, asked: Option<ReplyId<u64>> }
    /// impl Process for Asker {
    ///     type Done = u64;
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let (id, answer_to) = out.reply_pair::<Square>(Duration::from_secs(5));
    ///         answer_to.forward(out.context(), self.squarer, Square(7)).map_err(|(e, _)| e)?;
    ///         self.asked = Some(id);
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let Some(asked) = self.asked else { return Ok(()) };
    ///         for event in events {
    ///             match asked.answer(event) {
    ///                 Replied::Answered(n) => out.finish(n),
    ///                 Replied::Failed(why) => return Err(why.into()),
    ///                 Replied::Other(_) => {}
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// # struct Squarer;
    /// # impl Process for Squarer {
    /// #     type Done = ();
    /// #     fn step(&mut self, events: &mut Events<'_>, _: &mut Output<'_>) -> Result<(), BoxError> {
    /// #         for event in events {
    /// #             if let Event::Request(request) = event {
    /// #                 if let Ok((Square(n), answer)) = request.take::<Square>() { answer.answer(n * n) }
    /// #             }
    /// #         }
    /// #         Ok(())
    /// #     }
    /// # }
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// let squarer = scheduler.spawn(Squarer)?.pid();
    /// let mut asker = scheduler.spawn(Asker { squarer, asked: None })?;
    /// assert_eq!(asker.wait_timeout(Duration::from_secs(5))?, 49);
    /// # scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reply_pair<Q: Question>(&mut self, timeout: Duration) -> (ReplyId<Q::Answer>, ReplyTo) {
        let now = self.engine.now();
        let at = now
            .checked_add(timeout)
            .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600));
        let (id, timer, reply) = self.engine.answer_later(question_name::<Q>(), at);
        self.with_extras(|extras| {
            extras.timers.push(timer);
            extras.others().asks.push((id, timer));
        });
        let id = ReplyId {
            id,
            answer: PhantomData,
        };
        (id, reply)
    }
}

impl Output<'_> {
    /// Takes back a pair made with [`reply_pair`](Output::reply_pair)
    /// whose question never went anywhere (it was refused before it
    /// left): no [`Event::Reply`](crate::Event::Reply) ever comes for
    /// `id`, not even its timeout, and the right answers nobody.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use std::time::Duration;
    ///
    /// struct Square(u64);
    /// impl Question for Square {
    ///     type Answer = u64;
    /// }
    ///
    /// /// Makes a pair, finds nobody to ask, and takes it back.
    /// struct Undecided;
    /// impl Process for Undecided {
    ///     type Done = ();
    ///     fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         let (id, answer_to) = out.reply_pair::<Square>(Duration::from_millis(10));
    ///         out.withdraw_reply(id, answer_to);
    ///         out.set_timer(Duration::from_millis(50), Tag(1));
    ///         Ok(())
    ///     }
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             assert!(!matches!(event, Event::Reply { .. }), "no reply for a withdrawn pair");
    ///             out.finish(());
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build();
    /// scheduler.start();
    /// scheduler.spawn(Undecided)?.wait_timeout(Duration::from_secs(5))?;
    /// # scheduler.shutdown(Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn withdraw_reply<A>(&mut self, id: ReplyId<A>, reply: ReplyTo) {
        reply.forget();
        let ask = id.id;
        let timer = self.with_extras(|extras| {
            let others = extras.others();
            let at = others
                .asks
                .iter()
                .position(|(pending, _)| *pending == ask)?;
            let (_, timer) = others.asks.swap_remove(at);
            extras.timers.remove(&timer);
            Some(timer)
        });
        if let Some(timer) = timer {
            self.engine.cancel_timer(timer);
        }
    }
}

impl ReplyTo {
    /// Passes the right to answer on: asks `to` `question` in place of the
    /// request this right came with, so that `to`'s answer goes to the
    /// original asker (who never learns of the hop). `to` receives an
    /// ordinary [`Event::Request`](crate::Event::Request), and may be on
    /// another node (the question and the answer then cross through the
    /// transport's codec). The question's source is the original asker
    /// when it is a process of this node, else [`Pid::OUTSIDE`].
    ///
    /// # Errors
    ///
    /// The question could not go (as for [`Context::ask`]: no such
    /// process, ended, no route to its node; a question is not held to
    /// the mailbox's capacity): the error, with the question in its
    /// package, and the right to answer back, unspent, to try elsewhere or
    /// to drop (which answers `AskError::NoReply`).
    ///
    /// # Examples
    ///
    /// A router that answers nothing itself and passes each question on:
    ///
    /// ```
    /// use sched::prelude::*;
    ///
    /// struct Router { to: Pid }
    /// impl Process for Router {
    ///     type Done = ();
    ///     fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
    ///         for event in events {
    ///             if let Event::Request(request) = event {
    ///                 let (question, answer_to) = request.into_parts();
    ///                 if let Err((error, answer_to)) =
    ///                     answer_to.forward(out.context(), self.to, question.into_payload())
    ///                 {
    ///                     answer_to.reply(format!("not passed on: {error}"));
    ///                 }
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    #[allow(clippy::result_large_err)]
    pub fn forward(
        self,
        context: &Context,
        to: Pid,
        question: impl Any + Send,
    ) -> Result<(), (SendError, ReplyTo)> {
        let (asker, question_type) = self.take_asker();
        let Some(asker) = asker else {
            // Already spent: nobody waits for an answer.
            return Ok(());
        };
        let shared = context.shared();
        let from = asker.asker();
        let from = if shared.is_remote(from) {
            Pid::OUTSIDE
        } else {
            from
        };
        let kept = StdArc::clone(&asker);
        let payload = relay::into_payload(question);
        match shared
            .asks
            .ask(shared, from, to, payload, question_type, asker)
        {
            Ok(()) => Ok(()),
            Err(error) => Err((error, ReplyTo::new(kept, question_type))),
        }
    }
}
