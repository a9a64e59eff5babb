//! A real `nats-server` with JetStream on a free loopback port, for the
//! store's tests: the same server `relay-nats`'s tests start (its file is
//! included, so that both crates' tests try another port when a second
//! test run on the machine takes the one found free).

#![allow(dead_code, unreachable_pub)]

#[path = "../../../relay-nats/tests/support/server.rs"]
mod server;
pub use server::NatsServer;
