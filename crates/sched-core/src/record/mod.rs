//! The per-process record: identity, state word, event queue, the process
//! itself and where its outcome goes, in one allocation.

pub(crate) mod alloc;
pub(crate) mod cell;
pub(crate) mod completion;
pub(crate) mod figures;
pub(crate) mod links;
pub(crate) mod mailbox;
pub(crate) mod relations;
pub(crate) mod slot;
#[cfg(all(test, loom))]
mod slot_loom;
#[cfg(all(test, not(loom)))]
mod slot_tests;
pub(crate) mod state;

use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

use relay::Pid;

use crate::contract::event::Event;
use crate::contract::pending::Extras;
use crate::contract::process::Run;
#[cfg(any(debug_assertions, loom))]
use crate::sync::AtomicBool;
use crate::sync::{AtomicU32, AtomicU64, UnsafeCell};
pub(crate) use cell::RecordRef;
use cell::Taken;
use slot::ResultSlot;
use state::{StateWord, Wake};

/// One process, shared by the process table, the run queues, completers
/// and the submitter's [`Completion`](crate::Completion) handle, through
/// counted references ([`RecordRef`]). The process itself is stored right
/// after these fields, in the same allocation (see `cell.rs`).
///
/// The `body` is only touched by whoever owns the process: the submitting
/// thread before it is first queued, then the worker that moved the state
/// word from `READY` to `RUNNING`, until it moves it on. That exclusivity
/// is what the state machine guarantees (see `record/PROTOCOL.md`).
// In this order (not the compiler's): what introspection reads of every
// process (its PID, state, mailbox word, steps, figures) comes first, in
// the cache line that also holds the reference count, which listing the
// processes touches anyway to take a reference. Listing 100 000 processes
// then reads one line of each that has no relations, not two.
#[repr(C)]
pub(crate) struct Record {
    pub(crate) pid: Pid,
    pub(crate) state: StateWord,
    /// Messages queued and not yet drained (counted when the engine
    /// bounds mailboxes or `count_mailboxes` asks), and whether shutdown's
    /// cancel was delivered (it is sent once, by whichever of shutdown's
    /// sweep and a racing submission gets here first).
    pub(crate) mailbox: mailbox::Mailbox,
    /// Steps taken, readable while the process runs.
    pub(crate) steps: AtomicU64,
    /// When it last stepped, its pending timers and its type, for
    /// introspection (see `figures.rs`).
    pub(crate) figures: figures::Figures,
    /// The references to this record (see `cell.rs`).
    refs: AtomicU32,
    /// The size of the allocation the record heads (the record and its
    /// inline process), for the last reference to free it, and in
    /// [`BOXED`] whether the body's process is boxed rather than inline.
    /// Written by the process's owner only (an upgrade boxes it); atomic
    /// because the record is shared, not because it is contended.
    layout: AtomicU32,
    pub(crate) slot: ResultSlot,
    /// Its monitors and names (see `relations.rs`).
    pub(crate) relations: relations::Relations,
    /// Producers push events here from any thread; the owner drains it
    /// (see `drain_events`). Embedded, so a process is one allocation less.
    events: mpsc::Queue<Event>,
    body: UnsafeCell<Body>,
    /// Someone is inside `with_body`: checked on entry in debug and loom
    /// builds, so a change that lets two owners overlap (say, handing the
    /// process on before the borrow ends) fails loudly, and loom sees an
    /// atomic at the end of every borrow where it can switch threads.
    #[cfg(any(debug_assertions, loom))]
    owned: AtomicBool,
}

/// In `Record::layout`: the process is boxed (see `cell.rs`).
const BOXED: u32 = 1 << 31;
/// In `Record::layout`: the process's priority (`Priority::index`), two
/// bits below [`BOXED`]. Kept in this word rather than a field of its own:
/// a field would cost every process 16 bytes (see the size assertion).
const LEVEL_SHIFT: u32 = 29;
const LEVEL: u32 = 0b11 << LEVEL_SHIFT;
/// In `Record::layout`: the process's group (`Group::index`), six bits
/// below the level's.
const GROUP_SHIFT: u32 = 23;
const GROUP: u32 = 0b11_1111 << GROUP_SHIFT;
/// In `Record::layout`: the process's last two measured steps were heavy
/// (at least `order::LIGHT_STEP`), so a wake-up queues it behind the
/// light ones (see `order.rs`, "Light processes first"); and its last
/// measured step was heavy (a first strike; a new process starts heavy,
/// see `Record::measured`). Below the group's bits; a
/// process larger than the size bits leave room for (2 MiB) is boxed, as
/// an over-aligned one is.
const HEAVY: u32 = 1 << 22;
const STRUCK: u32 = 1 << 21;
/// The allocation size's bits of `Record::layout`.
pub(crate) const SIZE_BITS: u32 = 21;

// 160 bytes plus an 8-byte process is the largest request glibc serves
// from its 176-byte chunks; the next size is 192. Each field added here
// costs every idle process 16 bytes (measured by `sched_probe`'s memory
// part). The count is one 32-bit word beside the allocation's size (where
// `Arc` put two words in front); the event queue carries no generation (a
// record's queue is never reset) and no pool of finished blocks (its
// thread keeps them); its closed flag lives in its claim word, which made
// room for `figures`.
#[cfg(not(any(debug_assertions, loom)))]
const _: () = assert!(std::mem::size_of::<Record>() <= 160);

/// The parts of a process only its current owner touches.
pub(crate) struct Body {
    /// The process: inline in the record's allocation, or boxed (see
    /// [`BOXED`]); none once it has ended (dropped early, so that what it
    /// holds is freed while references to the record remain).
    pub(crate) process: Instance,
    /// The last step parked the process (idle or blocked); a wake that
    /// finds no event then does not call `step`.
    pub(crate) waiting: bool,
    /// Whether that wait is for completions (blocked) rather than messages.
    pub(crate) blocked: bool,
    /// What only some processes use, allocated the first time one does:
    /// an idle process that never leaves an event unread, sets a timer,
    /// monitors or asks carries one pointer instead of four empty lists
    /// (see `contract/pending.rs`).
    pub(crate) extras: Option<Box<Extras>>,
    /// The process has set a timer or a monitor at some point: only then
    /// are its events checked for cancelled ones.
    pub(crate) filters_events: bool,
    /// This instance has not been stepped yet: its `start` runs before its
    /// first step (set again when an upgrade installs a new instance).
    pub(crate) fresh: bool,
    /// With histograms on: when the process was made ready (for the
    /// schedule-latency histogram), or, while it waits blocked on a yield,
    /// when the step that yielded ended (for the yield-wait histogram). In
    /// units of 1 024 ns since the engine started, wrapping (about 73
    /// minutes). It fills what was padding, so it costs no memory.
    pub(crate) ready_at: u32,
}

// SAFETY: `body` is only accessed by the process's current owner, as the
// state word's transitions (acquire/release CAS) hand ownership from one
// thread to the next; everything else is `Sync` on its own.
unsafe impl Sync for Record {}
// SAFETY: as above; the process the body owns is `Send` by the trait's
// bound.
unsafe impl Send for Record {}

impl Record {
    /// A record with no process yet, heading an allocation of `size`
    /// bytes (below `1 << SIZE_BITS`), at `Normal` priority, with one
    /// reference (see `cell.rs`).
    fn new(pid: Pid, size: u32) -> Self {
        debug_assert!(size < 1 << SIZE_BITS);
        // A new process counts as heavy (with its strike) until a light
        // step shows otherwise (see `measured`).
        let size = size | (crate::Priority::Normal.index() as u32) << LEVEL_SHIFT | STRUCK | HEAVY;
        Record {
            pid,
            refs: AtomicU32::new(1),
            layout: AtomicU32::new(size),
            state: StateWord::new(),
            steps: AtomicU64::new(0),
            figures: figures::Figures::default(),
            mailbox: mailbox::Mailbox::default(),
            events: mpsc::Queue::new(),
            slot: ResultSlot::default(),
            relations: relations::Relations::default(),
            #[cfg(any(debug_assertions, loom))]
            owned: AtomicBool::new(false),
            body: UnsafeCell::new(Body {
                process: Instance(None),
                waiting: false,
                blocked: false,
                extras: None,
                filters_events: false,
                fresh: true,
                ready_at: 0,
            }),
        }
    }

    /// Gives the record its process (see `cell.rs`).
    ///
    /// # Safety
    ///
    /// `process` points to a live process this record now owns: a box's
    /// (`boxed`), or the one stored right after the record.
    unsafe fn set_process(&mut self, process: NonNull<dyn Run>, boxed: bool) {
        if boxed {
            self.layout.fetch_or(BOXED, Relaxed);
        }
        // SAFETY: `&mut self`: no one else can borrow the body.
        unsafe { self.with_body(|body| body.process = Instance(Some(process))) }
    }

    /// The allocation's size (see `cell.rs`).
    fn size(&self) -> usize {
        (self.layout.load(Relaxed) & !(BOXED | LEVEL | GROUP | HEAVY | STRUCK)) as usize
    }

    /// The process's priority: which ready queue it joins. Read by
    /// whoever queues it, from any thread; a change racing that read puts
    /// it in the old level's queue this once.
    pub(crate) fn priority(&self) -> crate::Priority {
        crate::Priority::from_index(((self.layout.load(Relaxed) & LEVEL) >> LEVEL_SHIFT) as usize)
    }

    /// Sets the process's priority. Only its owner calls this (its `init`
    /// before it is queued, or its step), as for the other bits of the
    /// word; the other bits are kept by the read-modify-write.
    pub(crate) fn set_priority(&self, priority: crate::Priority) {
        let bits = (priority.index() as u32) << LEVEL_SHIFT;
        let _ = self
            .layout
            .fetch_update(Relaxed, Relaxed, |word| Some(word & !LEVEL | bits));
    }

    /// The index of the process's group (`Group::index`): which of its
    /// level's queues it joins. Read by whoever queues it, like
    /// [`priority`](Record::priority).
    #[inline]
    pub(crate) fn group(&self) -> usize {
        ((self.layout.load(Relaxed) & GROUP) >> GROUP_SHIFT) as usize
    }

    /// The index of the queue it joins among `groups` groups per level
    /// (`Priority::index * groups + group`), from one read of the word.
    #[inline]
    pub(crate) fn lane(&self, groups: usize) -> usize {
        let word = self.layout.load(Relaxed);
        // The level's index straight from its bits (out of range is `Low`,
        // as `Priority::from_index` says), without making a `Priority` of
        // it and back: this runs for every requeue.
        let level = (((word & LEVEL) >> LEVEL_SHIFT) as usize).min(crate::Priority::Low.index());
        level * groups + ((word & GROUP) >> GROUP_SHIFT) as usize
    }

    /// Whether the process is heavy: its last two measured steps were
    /// (see [`HEAVY`]). Read by whoever queues it, like
    /// [`priority`](Record::priority): a change racing that read queues
    /// it by the old answer this once.
    #[inline]
    pub(crate) fn heavy(&self) -> bool {
        self.layout.load(Relaxed) & HEAVY != 0
    }

    /// Records whether the step just measured was heavy: two heavy steps
    /// in a row make the process heavy, one light step makes it light. A
    /// new process starts heavy, as a new task gets no head start in
    /// EEVDF, until a light step after its `start` (the first step, which
    /// runs `start`, is not judged: it says nothing of the steps to come)
    /// shows otherwise: 50 000 new processes of 20 µs steps, counted
    /// light until judged, passed their first wakes ahead of the rest, and
    /// the overload bench's worst wait per process rose by a fifth (655
    /// ms against 535-542). A
    /// single slow step (the thread preempted, a cold cache after a long
    /// sleep: 9-18 µs for a step of under 1 µs, measured beside a 40 µs
    /// backlog) does not move a light process behind the heavy ones.
    /// Only the worker that ran the step calls this; the word is written
    /// (a read-modify-write keeping the other bits) only when its bits
    /// change, so a process whose steps stay alike costs one load.
    ///
    /// Returns whether the step was heavy and the process counted heavy
    /// before it (a heavy process that stays heavy: what keeps a worker
    /// measuring, see `worker/light.rs`).
    #[inline]
    pub(crate) fn measured(&self, heavy: bool) -> bool {
        let word = self.layout.load(Relaxed);
        let bits = match (heavy, word & STRUCK != 0) {
            (false, _) => 0,
            (true, false) => STRUCK,
            (true, true) => STRUCK | HEAVY,
        };
        if word & (HEAVY | STRUCK) != bits {
            let _ = self.layout.fetch_update(Relaxed, Relaxed, |word| {
                Some(word & !(HEAVY | STRUCK) | bits)
            });
        }
        heavy && word & HEAVY != 0
    }

    /// Puts the process in group `index` (below 64). Only its `init`'s
    /// submitter calls this, before the process is first queued.
    pub(crate) fn set_group(&self, index: usize) {
        debug_assert!(index < 1 << (LEVEL_SHIFT - GROUP_SHIFT));
        let bits = (index as u32) << GROUP_SHIFT & GROUP;
        let _ = self
            .layout
            .fetch_update(Relaxed, Relaxed, |word| Some(word & !GROUP | bits));
    }

    /// Takes the process out of `body` (it has ended): the caller drops
    /// it, in place if it is stored in the record, while holding a
    /// reference to the record (see [`Taken`]).
    pub(crate) fn take_process(&self, body: &mut Body) -> Option<Taken> {
        let process = body.process.0.take()?;
        // Relaxed: only the owner, which `body` proves we are, writes it.
        let boxed = self.layout.load(Relaxed) & BOXED != 0;
        // SAFETY: the body owned it and no longer points to it, so the
        // `Taken` is its only owner; an inline one lives in this record,
        // which the caller's reference keeps alive.
        Some(unsafe { Taken::new(process, boxed) })
    }

    /// Installs an upgrade's new instance in `body`; returns the old one,
    /// to be closed by the caller as [`take_process`](Record::take_process)'s.
    pub(crate) fn replace_process(&self, body: &mut Body, new: Box<dyn Run>) -> Option<Taken> {
        let old = self.take_process(body);
        // SAFETY: `Box::into_raw` never returns null.
        body.process = Instance(Some(unsafe { NonNull::new_unchecked(Box::into_raw(new)) }));
        self.layout.fetch_or(BOXED, Relaxed);
        old
    }

    /// Runs `f` on the body.
    ///
    /// # Safety
    ///
    /// The caller owns the process (see the type's documentation) for the
    /// duration of the call, and does not call `with_body` re-entrantly.
    // Always inlined: see `Worker::step_owned`.
    #[inline(always)]
    pub(crate) unsafe fn with_body<R>(&self, f: impl FnOnce(&mut Body) -> R) -> R {
        #[cfg(any(debug_assertions, loom))]
        let _owner = OwnerToken::enter(&self.owned, self.pid);
        // SAFETY: the caller's ownership of the process makes this the only
        // access to the body.
        self.body.with_mut(|body| f(unsafe { &mut *body }))
    }

    /// Stamps the moment the process was made ready (histograms on), unless
    /// it waits blocked on a yield, whose stamp (when the yielding step
    /// ended) stays for the yield-wait histogram.
    ///
    /// # Safety
    ///
    /// The caller is the one thread queueing the process: it won the wake
    /// (`Wake::Schedule`), is submitting it, or owns it and requeues it.
    /// The previous owner's writes to the body happened before (the state
    /// word's acquire), and the worker that takes it reads it after the
    /// queue's hand-over; no one else touches the body meanwhile.
    pub(crate) unsafe fn stamp_ready(&self, now: u32) {
        // SAFETY: as the caller promises, no one else touches the body now.
        unsafe {
            self.with_body(|body| {
                if !(body.waiting && body.blocked) {
                    body.ready_at = now;
                }
            })
        }
    }

    /// Its relations, for an operation that may add one (a monitor, a
    /// link, a name, a published figure...): marks the process as one
    /// introspection must look at (see `Figures::mark_related`), so that
    /// listing 100 000 processes locks only those that may have any.
    #[inline]
    pub(crate) fn related(&self) -> &relations::Relations {
        self.figures.mark_related();
        &self.relations
    }

    /// Pushes an event and wakes the process. `Err` hands the event back if
    /// the process has ended (its queue is closed).
    pub(crate) fn deliver(&self, event: Event) -> Result<Wake, Event> {
        self.events.push(event).map_err(|e| e.into_inner())?;
        Ok(self.state.wake())
    }

    /// Delivers shutdown's [`Event::Cancel`] unless it was delivered
    /// already. `None` when nothing was delivered (sent before, or the
    /// process has ended).
    pub(crate) fn deliver_cancel(&self) -> Option<Wake> {
        if !self.mailbox.claim_cancel() {
            return None;
        }
        self.deliver(Event::Cancel).ok()
    }

    /// Moves every pending event to `out`.
    ///
    /// # Safety
    ///
    /// The caller owns the process (see the type's documentation): the
    /// queue's single-consumer contract is the ownership the state word
    /// hands from one worker to the next, with happens-before between them.
    pub(crate) unsafe fn drain_events(&self, out: &mut Vec<Event>) -> usize {
        // SAFETY: forwarded from the caller.
        unsafe { self.events.drain_into(out) }
    }

    /// Frees the event queue's blocks if no event is pending: a process
    /// that waits keeps no block for events it already took (the next
    /// event allocates a small one again).
    ///
    /// # Safety
    ///
    /// As for [`drain_events`](Record::drain_events).
    pub(crate) unsafe fn shrink_events(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.events.shrink_to_fit() };
    }

    /// Closes the event queue and returns what was pending (dead letters).
    ///
    /// # Safety
    ///
    /// As for [`drain_events`](Record::drain_events).
    pub(crate) unsafe fn close_events(&self) -> Vec<Event> {
        // SAFETY: forwarded from the caller.
        unsafe { self.events.close() }
    }

    /// Whether no event is pending.
    ///
    /// # Safety
    ///
    /// As for [`drain_events`](Record::drain_events).
    #[cfg(all(test, loom))]
    pub(crate) unsafe fn no_events(&self) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { self.events.is_empty() }
    }

    pub(crate) fn count_step(&self) {
        // Only the owner writes; a plain load+store is enough and cheaper
        // than an RMW.
        self.steps.store(self.steps.load(Relaxed) + 1, Relaxed);
    }
}

/// Held for the length of one `with_body` borrow (debug and loom builds).
#[cfg(any(debug_assertions, loom))]
struct OwnerToken<'a>(&'a AtomicBool);

#[cfg(any(debug_assertions, loom))]
impl<'a> OwnerToken<'a> {
    fn enter(owned: &'a AtomicBool, pid: Pid) -> Self {
        let overlapped = owned.swap(true, std::sync::atomic::Ordering::AcqRel);
        assert!(
            !overlapped,
            "{pid} has two owners: its body is borrowed twice at once"
        );
        OwnerToken(owned)
    }
}

#[cfg(any(debug_assertions, loom))]
impl Drop for OwnerToken<'_> {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Where a body's process is (see `cell.rs`): a pointer the body owns,
/// into the record's allocation or to a box.
pub(crate) struct Instance(Option<NonNull<dyn Run>>);

impl Instance {
    /// The process, if it has not ended.
    pub(crate) fn get(&self) -> Option<&(dyn Run + 'static)> {
        // SAFETY: the body owns the process; `&self` borrows it.
        self.0.map(|p| unsafe { &*p.as_ptr() })
    }

    /// The process, mutably, if it has not ended.
    pub(crate) fn get_mut(&mut self) -> Option<&mut (dyn Run + 'static)> {
        // SAFETY: the body owns the process; `&mut self` borrows it alone.
        self.0.map(|p| unsafe { &mut *p.as_ptr() })
    }
}

impl Body {
    /// The state a spurious wake parks the process in again.
    pub(crate) fn waiting_state(&self) -> u32 {
        if self.blocked {
            state::BLOCKED
        } else {
            state::IDLE
        }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        // A process still here (the record was never run, or was refused)
        // ends with it, before its memory goes.
        // SAFETY: `&mut self`: no one else can borrow the body.
        let process = unsafe { self.with_body(|body| self.take_process(body)) };
        drop(process);
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("pid", &self.pid)
            .field("state", &state::name(self.state.load()))
            .finish_non_exhaustive()
    }
}
