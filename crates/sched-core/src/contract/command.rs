//! Commands a process yields: their ids, correlation tags and payloads.

use std::fmt;

use relay::Payload;

/// Which handler a yielded command goes to. Handlers are registered per id.
///
/// # Examples
///
/// ```
/// use sched::command::CommandId;
/// const SLEEP: CommandId = CommandId(1);
/// assert_eq!(SLEEP.to_string(), "command 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandId(pub u32);

impl fmt::Display for CommandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "command {}", self.0)
    }
}

/// The correlation tag a process gives each yield; its completion event
/// carries the same tag, so a process with several yields in flight knows
/// which one completed. Tags are the process's own business: the scheduler
/// only carries them.
///
/// # Examples
///
/// ```
/// use sched::Tag;
/// assert_eq!(Tag(7).to_string(), "tag 7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(pub u64);

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tag {}", self.0)
    }
}

/// A command as its handler receives it.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::command::{Command, CommandId};
/// let cmd = Command::new(CommandId(1), Tag(9), Box::new(5u32));
/// assert_eq!(cmd.data::<u32>(), Some(&5));
/// ```
pub struct Command {
    /// The handler id it was yielded to.
    pub id: CommandId,
    /// The yield's correlation tag.
    pub tag: Tag,
    /// The command's data, of whatever type the process and the handler
    /// agree on.
    pub data: Payload,
}

impl Command {
    /// Makes a command.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::command::{Command, CommandId};
    /// let cmd = Command::new(CommandId(2), Tag(0), Box::new("read /etc/hosts"));
    /// assert_eq!(cmd.id, CommandId(2));
    /// ```
    pub fn new(id: CommandId, tag: Tag, data: Payload) -> Self {
        Command { id, tag, data }
    }

    /// The data, if it is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::command::{Command, CommandId};
    /// let cmd = Command::new(CommandId(1), Tag(0), Box::new(3u8));
    /// assert_eq!(cmd.data::<u8>(), Some(&3));
    /// assert_eq!(cmd.data::<u16>(), None);
    /// ```
    pub fn data<T: 'static>(&self) -> Option<&T> {
        self.data.downcast_ref()
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("id", &self.id)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}
