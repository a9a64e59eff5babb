//! The checks of one ended process against its script: exactly one
//! outcome, and the one its script implies (or `Terminated`, if a terminate
//! was accepted for it); `init` and `close` once each per instance (an
//! upgrade adds an instance; one whose `init` failed is never closed); never
//! stepped on two workers at once nor after `close`; every message it asked
//! for arrived.

use std::sync::atomic::Ordering::SeqCst;

use sched::prelude::*;
use sched::process::{Outcome, UpgradeError};

use crate::process::{Log, Observed, TERMINATE_ACCEPTED};
use crate::script::{failure_message, panic_message, upgrade_failure_message, Ending, OnCancel};
use crate::shared::Tracked;
use crate::violations::Violations;

/// How a process ended, for the tally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    Done,
    StepError,
    Panicked,
    /// The new instance of an upgrade refused to start.
    UpgradeFailed,
    Terminated,
    /// `finish` on seeing a cancel (its script says to).
    OnCancel,
    /// Anything else (already a violation).
    Other,
}

/// A one-line summary of an outcome, to compare what the handle and the
/// `on_complete` hook were told.
pub(crate) fn summary(outcome: &Outcome) -> String {
    match outcome {
        Ok(value) => match value.downcast_ref::<u64>() {
            Some(n) => format!("done({n})"),
            None => "done(<not a u64>)".into(),
        },
        Err(ExitError::Step(e)) => format!("step error: {e}"),
        Err(ExitError::Terminated) => "terminated".into(),
        Err(ExitError::Cancelled) => "cancelled".into(),
        Err(ExitError::Panicked { message }) => format!("panicked: {message}"),
        Err(ExitError::Upgrade(e)) => format!("upgrade failed: {e}"),
        Err(other) => format!("unknown exit: {other}"),
    }
}

/// Checks one ended process; `hooked` is what the `on_complete` hook saw
/// for it. Returns how it ended.
pub(crate) fn check_process(
    tracked: &Tracked,
    outcome: &Outcome,
    log: &Log,
    hooked: Option<&Vec<String>>,
    violations: &mut Violations,
) -> Ended {
    let Tracked {
        pid,
        script,
        observed,
        parent,
        ..
    } = tracked;
    let id = pid.id();
    let what = || {
        let parent = parent.map_or("the harness".to_string(), |p| p.to_string());
        format!(
            "process {pid} (spawned by {parent}, script {:?})",
            script.ops
        )
    };
    let Observed {
        overlaps,
        steps_after_close,
        inits,
        closes,
        upgrades,
        failed_upgrades,
        terminate,
        ..
    } = &**observed;
    if overlaps.load(SeqCst) != 0 {
        violations.push(format!(
            "{}: stepped on two workers at once ({} overlapping steps)",
            what(),
            overlaps.load(SeqCst)
        ));
    }
    if steps_after_close.load(SeqCst) != 0 {
        violations.push(format!("{}: stepped after close", what()));
    }
    let (upgrades, failed_upgrades) = (upgrades.load(SeqCst), failed_upgrades.load(SeqCst));
    let want = (1 + upgrades + failed_upgrades, 1 + upgrades);
    if (inits.load(SeqCst), closes.load(SeqCst)) != want || failed_upgrades > 1 {
        violations.push(format!(
            "{}: init ran {} times and close {} times over {upgrades} upgrades and \
             {failed_upgrades} failed ones (want {} and {})",
            what(),
            inits.load(SeqCst),
            closes.load(SeqCst),
            want.0,
            want.1
        ));
    }
    let said = summary(outcome);
    match hooked.map(Vec::as_slice) {
        Some([once]) if *once == said => {}
        other => violations.push(format!(
            "{}: its handle got {said:?}, the on_complete hook saw {other:?}",
            what()
        )),
    }
    let accepted = terminate.load(SeqCst) == TERMINATE_ACCEPTED;
    let ended = match (outcome, script.ending()) {
        (Err(ExitError::Terminated), _) if accepted => Ended::Terminated,
        (Ok(value), _)
            if log.peers.finished_on_cancel && value.downcast_ref::<u64>() == Some(&id) =>
        {
            Ended::OnCancel
        }
        (Ok(value), Ending::Done) if value.downcast_ref::<u64>() == Some(&id) => Ended::Done,
        (Err(ExitError::Step(e)), Ending::Fail) if e.to_string() == failure_message(id) => {
            Ended::StepError
        }
        (Err(ExitError::Panicked { message }), Ending::Panic) if *message == panic_message(id) => {
            Ended::Panicked
        }
        (
            Err(ExitError::Upgrade(UpgradeError::Init(InitError::Failed(e)))),
            Ending::UpgradeFail,
        ) if e.to_string() == upgrade_failure_message(id) => Ended::UpgradeFailed,
        (_, ending) => {
            violations.push(format!(
                "{}: ended with {said:?}, its script ends {ending:?} (terminate accepted: {accepted})",
                what()
            ));
            Ended::Other
        }
    };
    for v in &log.violations {
        violations.push(format!("{}: {v}", what()));
    }
    if log.peers.finished_on_cancel
        && (script.on_cancel != OnCancel::Finish || log.peers.cancels_seen == 0)
    {
        violations.push(format!(
            "{}: finished on a cancel it saw {} times, its rule is {:?}",
            what(),
            log.peers.cancels_seen,
            script.on_cancel
        ));
    }
    // Terminated, or finished on a cancel: what it waited for may not
    // have come.
    let terminated = matches!(ended, Ended::Terminated | Ended::OnCancel);
    if !terminated && upgrades != script.upgrades() {
        violations.push(format!(
            "{}: upgraded {upgrades} times, its script asks for {}",
            what(),
            script.upgrades()
        ));
    }
    if !terminated && log.answered != log.asked {
        violations.push(format!(
            "{}: asked for {} messages, {} arrived",
            what(),
            log.asked,
            log.answered
        ));
    }
    if !terminated && log.seen.len() != log.issued.len() {
        violations.push(format!(
            "{}: yielded {} commands, saw {} completions",
            what(),
            log.issued.len(),
            log.seen.len()
        ));
    }
    ended
}
