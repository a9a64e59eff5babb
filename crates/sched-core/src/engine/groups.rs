//! Looking up and reporting the engine's groups (what they are and how
//! workers share step time between them is `runqueue/shares.rs`).

use super::Context;
use crate::contract::group::{Group, GroupInfo};

impl Context {
    /// The group declared as `name` on the builder (`"default"` is
    /// always there), or `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).group("web", 3).build();
    /// assert!(engine.context().group("web").is_some());
    /// assert_eq!(engine.context().group("default"), Some(sched::process::Group::DEFAULT));
    /// assert_eq!(engine.context().group("mail"), None);
    /// ```
    pub fn group(&self, name: &str) -> Option<Group> {
        self.shared().groups.find(name).map(Group::from_index)
    }

    /// What the engine reports of `group` (see [`groups`](Context::groups)).
    fn group_info(&self, group: Group) -> Option<GroupInfo> {
        let shared = self.shared();
        let index = group.index();
        let count = shared.groups.len();
        if index >= count {
            return None;
        }
        let levels = crate::runqueue::order::LEVELS;
        let lanes = (0..levels).map(|level| level * count + index);
        let mut ready = shared.injector[index].len();
        let mut busy_ns = 0u64;
        for lane in lanes {
            ready += shared.woken[lane].len();
            ready += shared
                .remotes
                .iter()
                .map(|r| r.ready[lane].len() + r.nursery.get(lane).map_or(0, |q| q.len()))
                .sum::<usize>();
        }
        for remote in shared.remotes.iter() {
            busy_ns = busy_ns.wrapping_add(remote.group_clocks.busy_ns(index));
        }
        Some(GroupInfo {
            group,
            name: shared.groups.name(index).to_owned(),
            weight: shared.groups.weight(index),
            busy: std::time::Duration::from_nanos(busy_ns),
            ready,
        })
    }

    /// Every group of the engine, the default one first, in the order the
    /// builder declared them.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).group("web", 3).build();
    /// let names: Vec<String> = engine.context().groups().into_iter().map(|g| g.name).collect();
    /// assert_eq!(names, ["default", "web"]);
    /// ```
    pub fn groups(&self) -> Vec<GroupInfo> {
        (0..self.shared().groups.len())
            .filter_map(|index| self.group_info(Group::from_index(index)))
            .collect()
    }

    /// Changes `group`'s weight (clamped to `1..=10 000`): workers charge
    /// its next steps by it. Returns `false` for a group the engine does
    /// not have. With no groups declared, the default group is alone and
    /// its weight changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// let engine = sched::engine::Engine::builder().workers(1).group("web", 3).build();
    /// let web = engine.context().group("web").expect("declared");
    /// assert!(engine.context().set_group_weight(web, 5));
    /// assert_eq!(engine.context().groups().into_iter().find(|g| g.group == web).map(|g| g.weight), Some(5));
    /// ```
    pub fn set_group_weight(&self, group: Group, weight: u32) -> bool {
        let groups = &self.shared().groups;
        if group.index() >= groups.len() {
            return false;
        }
        groups.set_weight(group.index(), weight);
        true
    }
}
