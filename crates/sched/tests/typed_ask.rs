//! Typed request-reply: a `Question` says its answer type; asking it from a
//! thread, a tokio task or a step gets that type back without a downcast.

use std::time::Duration;

use sched::actor::{AskError, Question, Replied, ReplyId};
use sched::prelude::*;

const WAIT: Duration = Duration::from_secs(10);

/// What an item costs, in cents.
struct Price(&'static str);

impl Question for Price {
    type Answer = u32;
}

/// A question the shop answers with the wrong type, through the untyped
/// `reply` (what a careless router might do).
struct Broken;

impl Question for Broken {
    type Answer = u32;
}

/// Answers `Price` typed, `Broken` untyped with a string, and anything
/// else (an untyped `u8`) with its double.
struct Shop;

impl Process for Shop {
    type Done = Payload;
    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            match event {
                Event::Request(request) => match request.take::<Price>() {
                    Ok((Price(item), answer)) => {
                        answer.answer(if item == "tea" { 300 } else { 500 })
                    }
                    Err(request) => match request.take::<Broken>() {
                        Ok((Broken, answer)) => answer.into_reply_to().reply("three hundred"),
                        Err(request) => {
                            let n = *request.payload::<u8>().ok_or("unknown question")?;
                            request.reply(n * 2);
                        }
                    },
                },
                Event::Cancel => out.finish(()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Asks the shop for the price of tea from a step and finishes with it.
struct Buyer {
    shop: Pid,
    asked: Option<ReplyId<u32>>,
}

impl Process for Buyer {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.asked = Some(out.ask(self.shop, Price("tea"), WAIT)?);
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        let Some(asked) = self.asked else {
            return Ok(());
        };
        for event in events {
            if let Some(price) = asked.answer(event).answered() {
                let price: u32 = price?;
                out.finish(price);
            }
        }
        Ok(())
    }
}

fn scheduler_with_shop() -> (Scheduler, Pid) {
    let scheduler = Scheduler::builder().workers(2).build();
    scheduler.start();
    let shop = scheduler.spawn(Shop).unwrap().pid();
    (scheduler, shop)
}

#[test]
fn a_thread_gets_the_answer_type() {
    let (scheduler, shop) = scheduler_with_shop();
    let price: u32 = scheduler
        .ask(shop, Price("tea"))
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    assert_eq!(price, 300);
    // The untyped path still works beside it.
    let doubled = scheduler
        .ask(shop, Box::new(21u8) as Payload)
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    assert_eq!(doubled.downcast_ref::<u8>(), Some(&42));
    scheduler.shutdown(WAIT);
}

#[test]
fn a_tokio_task_awaits_the_answer_type() {
    let (scheduler, shop) = scheduler_with_shop();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let pending = scheduler.ask(shop, Price("coffee")).unwrap();
    let price = runtime
        .block_on(async move { tokio::spawn(pending).await.unwrap() })
        .unwrap();
    assert_eq!(price, 500u32);
    scheduler.shutdown(WAIT);
}

#[test]
fn a_step_gets_the_answer_type() {
    let (scheduler, shop) = scheduler_with_shop();
    let buyer = Buyer { shop, asked: None };
    let price = scheduler.spawn(buyer).unwrap().wait().unwrap();
    assert_eq!(price.downcast_ref::<u32>(), Some(&300));
    scheduler.shutdown(WAIT);
}

#[test]
fn an_answer_of_another_type_is_an_error_not_a_panic() {
    let (scheduler, shop) = scheduler_with_shop();
    let answer = scheduler.ask(shop, Broken).unwrap().wait_timeout(WAIT);
    assert_eq!(answer, Err(AskError::UnexpectedType));
    scheduler.shutdown(WAIT);
}

/// Asks the process named "shop" from a step, typed and untyped.
struct NamedBuyer {
    asked: Option<ReplyId<u32>>,
    untyped: Option<sched::actor::AskId>,
    got: Vec<String>,
}

impl Process for NamedBuyer {
    type Done = Payload;
    fn start(&mut self, out: &mut Output<'_>) -> Result<(), BoxError> {
        self.asked = Some(out.ask("shop", Price("tea"), WAIT)?);
        self.untyped = Some(out.ask("shop", Box::new(4u8) as Payload, WAIT)?.id());
        let missing = out
            .ask("no such shop", Box::new(1u8) as Payload, WAIT)
            .unwrap_err();
        self.got.push(format!("{:?}", missing.kind()));
        Ok(())
    }

    fn step(&mut self, events: &mut Events<'_>, out: &mut Output<'_>) -> Result<(), BoxError> {
        for event in events {
            let event = match self.asked.map(|q| q.answer(event)) {
                Some(Replied::Answered(price)) => {
                    self.got.push(format!("price {price}"));
                    continue;
                }
                Some(Replied::Failed(why)) => return Err(why.into()),
                Some(Replied::Other(other)) => other,
                None => continue,
            };
            if let Event::Reply { id, result, .. } = event {
                if Some(id) == self.untyped {
                    let doubled = *result?.downcast::<u8>().map_err(|_| "not a u8")?;
                    self.got.push(format!("doubled {doubled}"));
                }
            }
        }
        if self.got.len() == 3 {
            self.got.sort();
            out.finish(std::mem::take(&mut self.got));
        }
        Ok(())
    }
}

#[test]
fn asking_by_name_from_outside_and_from_a_step() {
    let (scheduler, shop) = scheduler_with_shop();
    scheduler.context().register_name("shop", shop).unwrap();
    let price = scheduler
        .ask("shop", Price("tea"))
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap();
    assert_eq!(price, 300);
    let missing = scheduler
        .ask("no such shop", Box::new(7u8) as Payload)
        .unwrap_err();
    assert_eq!(missing.kind(), sched::message::SendErrorKind::UnknownTarget);
    assert_eq!(
        missing.into_package().downcast::<u8>().ok(),
        Some(7),
        "handed back"
    );

    let buyer = NamedBuyer {
        asked: None,
        untyped: None,
        got: Vec::new(),
    };
    let got = scheduler.spawn(buyer).unwrap().wait().unwrap();
    assert_eq!(
        *got.downcast::<Vec<String>>().unwrap(),
        vec![
            "UnknownTarget".to_string(),
            "doubled 8".into(),
            "price 300".into()
        ]
    );
    scheduler.shutdown(WAIT);
}
