//! A simulated node's shutdown: its stages run as rounds of the
//! simulation, on the virtual clock, with the same report a running
//! engine gives.

use std::time::Duration;

use super::faults::Held;
use super::{Progress, Simulation};
use crate::engine::shutdown::SimulatedShutdown;
use crate::engine::ShutdownReport;

impl Simulation {
    /// A shutdown a step asked for (`Context::request_shutdown`) starts
    /// here, on the simulation's thread.
    pub(super) fn serve_requested_shutdown(&mut self, node: usize) {
        let requested = self.nodes[node]
            .shared
            .control
            .requested_deadline
            .lock()
            .take();
        if let Some(deadline) = requested {
            self.begin_shutdown(node, deadline);
        }
    }

    fn begin_shutdown(&mut self, node: usize, deadline: Duration) {
        let at = self.clock().after(deadline);
        let node = &mut self.nodes[node];
        if node.stopping.is_none() && node.report.is_none() {
            if let Some(stages) = SimulatedShutdown::begin(&node.shared) {
                node.stopping = Some((stages, Some(at)));
            }
        }
    }

    /// The shutdowns under way move on: forced at their deadline, finished
    /// once every process of the node has ended. Returns whether one
    /// forced its processes (which makes work).
    pub(super) fn advance_shutdowns(&mut self) -> bool {
        let mut forced = false;
        let now = self.clock().now();
        let elapsed = self.elapsed();
        for node in &mut self.nodes {
            let Some((stages, deadline)) = &mut node.stopping else {
                continue;
            };
            if SimulatedShutdown::all_ended(&node.shared) {
                let (stages, _) = node.stopping.take().expect("under way");
                node.report = Some(stages.finish(&node.shared, elapsed));
            } else if deadline.is_some_and(|at| now >= at) {
                stages.force(&node.shared);
                *deadline = None;
                forced = true;
            }
        }
        forced
    }

    /// Shuts every simulated node down as [`Engine::shutdown`](crate::Engine::shutdown)
    /// does, in virtual time: every process gets
    /// [`Event::Cancel`](crate::Event::Cancel), the simulation runs until
    /// they have all ended or `deadline` has passed, then forces the rest.
    /// The report adds up the nodes' reports. Later calls return the same.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut sim = sched::engine::Engine::builder().simulation(sched::sim::Config::seed(3));
    /// let report = sim.shutdown(std::time::Duration::from_secs(1));
    /// assert_eq!(report.forced, 0);
    /// ```
    pub fn shutdown(&mut self, deadline: Duration) -> ShutdownReport {
        for node in 0..self.nodes.len() {
            self.serve_requested_shutdown(node);
            self.begin_shutdown(node, deadline);
        }
        // Bounded: every process ends by its deadline's force at the
        // latest, unless a step never returns (which would hang a running
        // engine's worker too).
        let mut left = self.max_steps.saturating_sub(self.steps).max(1_000_000);
        while self.nodes.iter().any(|n| n.report.is_none()) && left > 0 {
            left -= 1;
            let progress = self.decide(None);
            self.advance_shutdowns();
            if progress == Progress::Quiet {
                // Nothing left to run and processes still live: they wait
                // for nothing that will come; force them now.
                for node in &mut self.nodes {
                    if let Some((stages, _)) = &mut node.stopping {
                        stages.force(&node.shared);
                    }
                }
            }
        }
        let elapsed = self.elapsed();
        let mut total = ShutdownReport::default();
        for node in &mut self.nodes {
            if node.report.is_none() {
                if let Some((stages, _)) = node.stopping.take() {
                    node.report = Some(stages.finish(&node.shared, elapsed));
                }
            }
            let report = node.report.clone().unwrap_or_default();
            total.ended_gracefully += report.ended_gracefully;
            total.forced += report.forced;
            total.still_running += report.still_running;
            total.still_queued += report.still_queued;
            total.workers_detached += report.workers_detached;
            total.timers_cancelled += report.timers_cancelled;
            total.elapsed = total.elapsed.max(report.elapsed);
        }
        // What is still held will never be delivered.
        let held = self.state.lock().take_all();
        for item in held {
            match item {
                Held::Message(record, package) => {
                    crate::panic_guard::drop_user_value(package, record.pid, "a held message")
                }
                Held::Request(record, request) => {
                    crate::panic_guard::drop_user_value(request, record.pid, "a held request")
                }
                Held::Completion(record, _, result) => {
                    crate::panic_guard::drop_user_value(result, record.pid, "a held completion")
                }
                Held::Remote(package, _) => {
                    let target = package.target();
                    crate::panic_guard::drop_user_value(package, target, "a held package")
                }
                Held::Cancel(_) | Held::Heal(_) => {}
            }
        }
        total
    }
}
