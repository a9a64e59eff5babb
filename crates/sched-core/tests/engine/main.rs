//! The engine's behaviour: the original implementation's checklist where
//! it applies to our design, plus the process contract (`docs/reference/process-contract.md`).

#[path = "../common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use relay::{Package, Pid, SendErrorKind};
use sched_core::*;

mod hooks;
mod lifecycle;
mod messages;
mod scheduling;
mod shutdown;
mod yields;

/// Polls until `pid` is in `state`.
fn wait_for_state(engine: &Engine, pid: Pid, state: ProcessState) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if engine
            .context()
            .processes()
            .iter()
            .any(|p| p.pid == pid && p.state == state)
        {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never reached {state}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
