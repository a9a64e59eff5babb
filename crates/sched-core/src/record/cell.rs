//! A record and its process in one allocation, and the counted reference
//! ([`RecordRef`]) that the table, the run queues, links and completion
//! handles hold it by.
//!
//! Why not `Arc<Record>` and a `Box<dyn Run>` beside it: that is two
//! allocations per process, made by the submitting thread and freed by a
//! worker, and two heap chunks that neighbouring processes share cache
//! lines with. Here the process is stored right after the record's fields
//! (as tokio stores a future in its task cell), so spawning allocates once,
//! and the count is one 32-bit word inside the record instead of `Arc`'s
//! two words in front of it.
//!
//! # Layout
//!
//! ```text
//! +------------------------------+-------------------+
//! | Record (fields, refs, size)  | P (the process)   |   one allocation
//! +------------------------------+-------------------+
//!        ^ RecordRef points here     ^ body's process pointer, inline
//! ```
//!
//! The record's `layout` field holds the allocation's size, so the last
//! reference frees it without knowing `P`, and whether the process is
//! boxed. A process stored inline stays in place until the record is
//! freed: ending it runs its `Drop` in place ([`Taken`]), and an upgrade's
//! new instance (a `Box<dyn Run>` made by the user) is held boxed. A
//! process whose alignment is stricter than the record's is boxed too,
//! which keeps the allocation's alignment fixed.
//!
//! # The room an ended process leaves
//!
//! Once the process has ended (or its first instance was upgraded away),
//! its bytes are dead but still allocated until the last reference goes,
//! which is usually the submitter's `Completion` handle. When they are
//! enough for an [`Outcome`], the outcome slot keeps the outcome there
//! ([`RecordRef::spare`], and `slot.rs`'s module docs), instead of
//! allocating its locked part: the room costs nothing more, and a caller
//! that waits on its handles late holds no second allocation per process.
//!
//! # Counting
//!
//! As `std::sync::Arc`: a clone adds one with `Relaxed` (a new reference
//! is made from an existing one, which already keeps the record alive), a
//! drop subtracts one with `Release`, and the drop that takes the count to
//! zero fences with `Acquire` before freeing, so every other holder's use
//! happens before the free. The loom models in `loom_models/` and
//! `runqueue/next_slot.rs` run on this count (it goes through the crate's
//! `sync` shim); miri runs the crate's unit tests on the allocation.

use std::alloc::Layout;
use std::mem::{align_of, size_of};
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use relay::Pid;

use super::slot::Spare;
use super::Record;
use crate::contract::outcome::Outcome;
use crate::contract::process::{Process, Run};
use crate::sync::fence;

/// The most references one record may have; past it the process aborts,
/// as `Arc` does past `isize::MAX` (each reference is a pointer held
/// somewhere, so this takes 16 GiB of pointers to one process).
const MAX_REFS: u32 = i32::MAX as u32;

/// A record followed by its process: the allocation's layout. `repr(C)`
/// keeps the record at offset 0, so a pointer to the cell is a pointer to
/// its record.
#[repr(C)]
struct Cell<P> {
    record: Record,
    process: P,
}

/// A counted reference to a [`Record`] (and the process stored with it).
pub(crate) struct RecordRef {
    ptr: NonNull<Record>,
}

// SAFETY: a `RecordRef` only hands out `&Record`, and `Record` is `Send`
// and `Sync`; the count it changes is atomic.
unsafe impl Send for RecordRef {}
// SAFETY: as above.
unsafe impl Sync for RecordRef {}

impl RecordRef {
    /// Allocates a record for `pid` with `process` stored inline (boxed if
    /// its alignment is stricter than the record's). The one reference
    /// returned is the only one.
    pub(crate) fn new<P: Process>(pid: Pid, process: P) -> RecordRef {
        // The size must leave `Record::layout`'s flag and level bits free.
        if align_of::<P>() > align_of::<Record>() || size_of::<Cell<P>>() >= 1 << super::SIZE_BITS {
            return RecordRef::boxed(pid, Box::new(process));
        }
        let cell = alloc_cell(Cell {
            record: Record::new(pid, size_of::<Cell<P>>() as u32),
            process,
        });
        // SAFETY: `cell` is a live allocation no one else has seen yet. The
        // process pointer is taken from the allocation's own raw pointer
        // (not through a reference to the record), so it stays valid for
        // the allocation's life, and the record now owns the value: it is
        // dropped through this pointer, once (see `Body::take_process`).
        unsafe {
            let process: *mut dyn Run = ptr::addr_of_mut!((*cell).process);
            (*cell)
                .record
                .set_process(NonNull::new_unchecked(process), false);
            RecordRef {
                ptr: NonNull::new_unchecked(cell.cast::<Record>()),
            }
        }
    }

    /// Allocates a record for `pid` holding a boxed process (one aligned
    /// more strictly than the record).
    fn boxed(pid: Pid, process: Box<dyn Run>) -> RecordRef {
        let cell = alloc_cell(Cell {
            record: Record::new(pid, size_of::<Cell<()>>() as u32),
            process: (),
        });
        // SAFETY: as in `new`; the box's ownership moves to the record.
        unsafe {
            let process = NonNull::new_unchecked(Box::into_raw(process));
            (*cell).record.set_process(process, true);
            RecordRef {
                ptr: NonNull::new_unchecked(cell.cast::<Record>()),
            }
        }
    }

    /// Whether both point to the same record.
    #[inline]
    pub(crate) fn ptr_eq(a: &RecordRef, b: &RecordRef) -> bool {
        a.ptr == b.ptr
    }

    /// The record's address (for comparing, and for a thief to tell
    /// whether the same record is still where it saw it).
    #[inline]
    pub(crate) fn as_ptr(this: &RecordRef) -> *const Record {
        this.ptr.as_ptr()
    }

    /// Asks the CPU to start loading the record's lines (its state word,
    /// event queue and body) into cache, for a caller that will touch it
    /// shortly: a hint, with no effect on what any thread sees.
    #[inline]
    pub(crate) fn prefetch(&self) {
        crate::sync::prefetch(self.ptr.as_ptr(), size_of::<Record>());
    }

    /// Gives up the reference as a raw pointer that keeps its count (for
    /// an atomic word to hold); [`from_raw`](RecordRef::from_raw) takes it
    /// back.
    #[inline]
    pub(crate) fn into_raw(this: RecordRef) -> *const Record {
        let ptr = this.ptr.as_ptr();
        std::mem::forget(this);
        ptr
    }

    /// Takes back a reference given up with
    /// [`into_raw`](RecordRef::into_raw).
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and its count is taken back once.
    #[inline]
    pub(crate) unsafe fn from_raw(ptr: *const Record) -> RecordRef {
        RecordRef {
            // SAFETY: `into_raw` gave out a non-null pointer.
            ptr: unsafe { NonNull::new_unchecked(ptr.cast_mut()) },
        }
    }

    /// Leaves the owner's reference to the state word of the process it
    /// has just parked (`finish_step` returned `Parked`): the word keeps
    /// it, uncounted anywhere else, until a wake takes it back with
    /// [`unpark`](RecordRef::unpark). No atomic write: the reference
    /// moves, as it moves into a run queue (see `PROTOCOL.md`, "The
    /// schedule's reference").
    ///
    /// The record must not be touched through `this` after the parking
    /// transition: another thread may wake, run, end and free it at once.
    #[inline]
    pub(crate) fn park(this: RecordRef) {
        std::mem::forget(this);
    }

    /// Takes the reference a parked process's state word holds, for the
    /// run queue the caller is about to put the process in.
    ///
    /// # Safety
    ///
    /// The caller's wake moved the process out of `BLOCKED` or `IDLE`
    /// (`Wake::Schedule`, `Killed::Schedule`): exactly one thread wins
    /// that transition, so the word's reference is taken once, and only
    /// after its owner parked it. `this` keeps the record alive meanwhile.
    #[inline]
    pub(crate) unsafe fn unpark(this: &RecordRef) -> RecordRef {
        RecordRef { ptr: this.ptr }
    }

    /// Adds one to the count of the record at `ptr` (for a reader that
    /// found `ptr` in a word holding a count, and then makes a reference
    /// of its own with [`from_raw`](RecordRef::from_raw)).
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and a count held elsewhere keeps the
    /// record alive for the length of the call.
    #[inline]
    pub(crate) unsafe fn increment(ptr: *const Record) {
        // SAFETY: the caller keeps the record alive.
        increment(unsafe { &(*ptr).refs });
    }

    /// The room an ended process leaves in the allocation, if an outcome
    /// fits in it (see `slot.rs`): the space right after the record's
    /// fields, which held the process if it was stored inline (its first
    /// instance, dropped when it ended or was upgraded), and which nothing
    /// else uses.
    #[inline]
    pub(crate) fn spare(this: &RecordRef) -> Option<Spare> {
        const {
            assert!(size_of::<Record>().is_multiple_of(align_of::<Outcome>()));
            assert!(align_of::<Outcome>() <= align_of::<Record>());
        }
        if this.size() < size_of::<Record>() + size_of::<Outcome>() {
            return None;
        }
        // SAFETY: in bounds of the allocation (checked above), derived from
        // the allocation's own pointer (not from a reference to the record),
        // and aligned for an outcome (asserted above).
        let room = unsafe { this.ptr.as_ptr().cast::<u8>().add(size_of::<Record>()) };
        NonNull::new(room.cast::<Outcome>()).map(Spare)
    }

    /// The number of references (tests).
    #[cfg(test)]
    pub(crate) fn count(this: &RecordRef) -> u32 {
        this.refs.load(Acquire)
    }

    /// The record, mutably, when this is its only reference (a record
    /// not registered nor queued anywhere yet).
    pub(crate) fn get_mut(this: &mut RecordRef) -> Option<&mut Record> {
        // Acquire: as in `drop`, the other holders' uses (if there were
        // any) happen before ours.
        if this.refs.load(Acquire) == 1 {
            // SAFETY: the count is 1 and we hold it: no other reference
            // exists, and none can be made without ours.
            Some(unsafe { this.ptr.as_mut() })
        } else {
            None
        }
    }

    /// Frees the record: its fields (and with them a process still in
    /// it), then the allocation.
    ///
    /// # Safety
    ///
    /// The count reached zero: this was the last reference.
    #[cold]
    #[inline(never)]
    unsafe fn drop_slow(&mut self) {
        // SAFETY: the last reference: no one else reads the record. `size`
        // and the record's alignment are the layout `new` or `boxed`
        // allocated with (`Cell<P>` has the record's alignment, as `new`
        // checked).
        unsafe {
            // An outcome nobody took may still be kept in the process's room.
            self.slot.drop_kept(RecordRef::spare(self));
            let size = self.ptr.as_ref().size();
            ptr::drop_in_place(self.ptr.as_ptr());
            super::alloc::free(
                self.ptr.cast::<u8>(),
                Layout::from_size_align_unchecked(size, align_of::<Record>()),
            );
        }
    }
}

/// Moves `cell` into a block of its own (see `alloc.rs` for where it
/// comes from).
fn alloc_cell<P>(cell: Cell<P>) -> *mut Cell<P> {
    let block = super::alloc::allocate(Layout::new::<Cell<P>>()).cast::<Cell<P>>();
    // SAFETY: a fresh block of `Cell<P>`'s layout, written once.
    unsafe { block.as_ptr().write(cell) };
    block.as_ptr()
}

fn increment(refs: &crate::sync::AtomicU32) {
    // Relaxed: a reference is made from one that already keeps the record
    // alive; nothing is published by counting (as `Arc::clone`).
    if refs.fetch_add(1, Relaxed) > MAX_REFS {
        std::process::abort();
    }
}

impl Clone for RecordRef {
    #[inline]
    fn clone(&self) -> Self {
        increment(&self.refs);
        RecordRef { ptr: self.ptr }
    }
}

impl Drop for RecordRef {
    #[inline]
    fn drop(&mut self) {
        // Release: our uses of the record happen before whoever frees it.
        if self.refs.fetch_sub(1, Release) != 1 {
            return;
        }
        // Acquire: every other holder's uses happen before the free.
        fence(Acquire);
        // SAFETY: the count went from 1 to 0 here: this was the last one.
        unsafe { self.drop_slow() }
    }
}

impl Deref for RecordRef {
    type Target = Record;

    #[inline]
    fn deref(&self) -> &Record {
        // SAFETY: our count keeps the record alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl std::fmt::Debug for RecordRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// A process instance taken out of its record (ended, or replaced by an
/// upgrade): dropping it drops the process, in place if it was stored
/// inline (its memory goes with the record), or its box.
///
/// It must not outlive the record it came from: every caller takes it and
/// drops it (through `close_guarded` or `drop_user_value`) while holding a
/// reference to that record.
pub(crate) struct Taken {
    ptr: NonNull<dyn Run>,
    boxed: bool,
}

impl Taken {
    /// # Safety
    ///
    /// `ptr` points to a live process that nothing else will drop: a box's
    /// (`boxed`) or one stored inline in a record that outlives this value.
    pub(super) unsafe fn new(ptr: NonNull<dyn Run>, boxed: bool) -> Taken {
        Taken { ptr, boxed }
    }
}

impl Deref for Taken {
    type Target = dyn Run;

    fn deref(&self) -> &(dyn Run + 'static) {
        // SAFETY: the process is live and ours until we drop it.
        unsafe { self.ptr.as_ref() }
    }
}

impl DerefMut for Taken {
    fn deref_mut(&mut self) -> &mut (dyn Run + 'static) {
        // SAFETY: as above, and we are its only owner.
        unsafe { self.ptr.as_mut() }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if self.boxed {
            // SAFETY: a boxed instance came from `Box::into_raw`, and this
            // is its only owner.
            drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
        } else {
            // SAFETY: an inline instance is live, owned by us alone, and
            // its memory (the record's) outlives us; it is never dropped
            // again (the record's body no longer points to it).
            unsafe { ptr::drop_in_place(self.ptr.as_ptr()) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::contract::output::{Events, Output};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    /// Counts its drops; its padding `A` sets its size and alignment.
    struct Counted<A: Send + 'static> {
        drops: Arc<AtomicUsize>,
        _pad: A,
    }

    impl<A: Send + 'static> Drop for Counted<A> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, SeqCst);
        }
    }

    impl<A: Send + 'static> Process for Counted<A> {
        type Done = relay::Payload;
        fn step(
            &mut self,
            _: &mut Events<'_>,
            _: &mut Output<'_>,
        ) -> Result<(), crate::contract::error::BoxError> {
            Ok(())
        }
    }

    /// Aligned more strictly than a record.
    #[repr(align(64))]
    struct Wide(#[allow(dead_code)] [u8; 64]);

    fn counted<A: Send + 'static>(pad: A) -> (Counted<A>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let process = Counted {
            drops: drops.clone(),
            _pad: pad,
        };
        (process, drops)
    }

    #[test]
    fn the_process_is_dropped_once_with_its_last_reference() {
        for (record, drops) in [
            {
                let (p, d) = counted(0u8);
                (RecordRef::new(Pid::local(1), p), d)
            },
            {
                let (p, d) = counted(Wide([0; 64]));
                (RecordRef::new(Pid::local(2), p), d)
            },
            {
                let (p, d) = counted([0u64; 40]);
                (RecordRef::boxed(Pid::local(3), Box::new(p)), d)
            },
        ] {
            let other = record.clone();
            assert_eq!(RecordRef::count(&record), 2);
            drop(record);
            assert_eq!(drops.load(SeqCst), 0, "a reference is left");
            drop(other);
            assert_eq!(drops.load(SeqCst), 1);
        }
    }

    #[test]
    fn a_taken_process_is_dropped_by_its_taker_and_not_again() {
        let (process, drops) = counted(7u32);
        let record = RecordRef::new(Pid::local(1), process);
        // SAFETY: this test is the record's only user.
        let taken = unsafe { record.with_body(|body| record.take_process(body)) }.expect("inline");
        assert!(!taken.boxed, "a small process is stored inline");
        drop(taken);
        assert_eq!(drops.load(SeqCst), 1);
        drop(record);
        assert_eq!(drops.load(SeqCst), 1, "dropped once");
    }

    #[test]
    fn a_strictly_aligned_process_is_boxed_and_an_upgrade_replaces_it() {
        let (process, old_drops) = counted(Wide([0; 64]));
        let record = RecordRef::new(Pid::local(1), process);
        let (new, new_drops) = counted(1u8);
        // SAFETY: this test is the record's only user.
        let old = unsafe { record.with_body(|body| record.replace_process(body, Box::new(new))) }
            .expect("a process was there");
        assert!(old.boxed, "a 64-byte-aligned process is boxed");
        drop(old);
        assert_eq!(old_drops.load(SeqCst), 1);
        drop(record);
        assert_eq!(
            new_drops.load(SeqCst),
            1,
            "the new instance ends with the record"
        );
    }

    #[test]
    fn a_process_is_inline_unless_aligned_more_strictly_than_its_record() {
        let small = RecordRef::new(Pid::local(1), counted(1u64).0);
        let large = RecordRef::new(Pid::local(2), counted([1u64; 64]).0);
        let wide = RecordRef::new(Pid::local(3), counted(Wide([0; 64])).0);
        for (record, boxed) in [(small, false), (large, false), (wide, true)] {
            // SAFETY: this test is the record's only user.
            let taken = unsafe { record.with_body(|body| record.take_process(body)) };
            assert_eq!(taken.expect("live").boxed, boxed);
        }
    }

    #[test]
    fn raw_round_trips_keep_the_count() {
        let record = RecordRef::new(Pid::local(9), counted(()).0);
        let raw = RecordRef::into_raw(record.clone());
        // SAFETY: `raw` holds a count; `record` keeps it alive.
        unsafe { RecordRef::increment(raw) };
        assert_eq!(RecordRef::count(&record), 3);
        // SAFETY: two counts were given to `raw`; each is taken back once.
        let (a, b) = unsafe { (RecordRef::from_raw(raw), RecordRef::from_raw(raw)) };
        assert!(RecordRef::ptr_eq(&a, &b) && RecordRef::ptr_eq(&a, &record));
        drop((a, b));
        let mut record = record;
        assert_eq!(
            RecordRef::get_mut(&mut record).map(|r| r.pid),
            Some(Pid::local(9))
        );
    }
}

/// Loom models of the count: whichever thread drops the last reference
/// frees the record, once, after every other holder's use. Run with
/// `cargo xtask loom sched-core`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::contract::output::{Events, Output};
    use crate::sync::{thread, Arc, AtomicUsize};
    use std::sync::atomic::Ordering::SeqCst;

    /// Writes to itself in `step` (never called) and counts its drops; its
    /// `Drop` reads the value, so a free racing a holder's use would be a
    /// race loom reports on the cell below.
    struct Owned {
        drops: Arc<AtomicUsize>,
        value: crate::sync::UnsafeCell<u64>,
    }

    impl Process for Owned {
        type Done = relay::Payload;
        fn step(
            &mut self,
            _: &mut Events<'_>,
            _: &mut Output<'_>,
        ) -> Result<(), crate::contract::error::BoxError> {
            unreachable!("never stepped")
        }
    }

    impl Drop for Owned {
        fn drop(&mut self) {
            // A write, so that loom checks it against every holder's read.
            self.value.with_mut(|v| unsafe { *v = 1 });
            self.drops.fetch_add(1, SeqCst);
        }
    }

    /// The process inside `record`, for holders to read without borrowing
    /// the body (whose ownership check would order them by itself).
    fn process_of(record: &RecordRef) -> usize {
        // SAFETY: called before the record is shared.
        let process = unsafe {
            record.with_body(|body| {
                body.process.get().expect("live") as *const dyn Run as *const Owned
            })
        };
        process as usize
    }

    /// A holder's use of the record: a read of its process's value.
    fn use_record(process: usize) {
        // SAFETY: the caller holds a reference to the record.
        let process = unsafe { &*(process as *const Owned) };
        process.value.with(|v| assert_eq!(unsafe { *v }, 0));
    }

    /// Two threads each use and drop a reference while the main thread
    /// drops its own: the process is dropped exactly once, and after every
    /// holder's use (loom tracks the value's `UnsafeCell`: a count whose
    /// last drop did not order the other holders' uses before the free
    /// fails here, as a relaxed decrement without the fence does).
    #[test]
    fn the_last_of_three_holders_frees_the_record_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let record = RecordRef::boxed(
                Pid::local(1),
                Box::new(Owned {
                    drops: drops.clone(),
                    value: crate::sync::UnsafeCell::new(0),
                }),
            );
            let process = process_of(&record);
            let holders: Vec<_> = (0..2)
                .map(|_| {
                    let mine = record.clone();
                    thread::spawn(move || {
                        use_record(process);
                        drop(mine);
                    })
                })
                .collect();
            use_record(process);
            drop(record);
            for holder in holders {
                holder.join().unwrap();
            }
            assert_eq!(drops.load(SeqCst), 1);
        });
    }

    /// A reader that takes a count through a raw pointer (as the process
    /// table and the `next` slot do) while the owner of another count
    /// drops it: the record outlives the reader's use.
    #[test]
    fn a_count_taken_through_a_raw_pointer_keeps_the_record() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let record = RecordRef::boxed(
                Pid::local(2),
                Box::new(Owned {
                    drops: drops.clone(),
                    value: crate::sync::UnsafeCell::new(0),
                }),
            );
            let process = process_of(&record);
            // The word's count, as a slot holds it.
            let raw = RecordRef::into_raw(record.clone()) as usize;
            let reader = thread::spawn(move || {
                let raw = raw as *const Record;
                // SAFETY: the word's count (given up above) keeps it alive
                // while we add ours.
                unsafe { RecordRef::increment(raw) };
                // SAFETY: the count just added is taken back once.
                let mine = unsafe { RecordRef::from_raw(raw) };
                use_record(process);
                drop(mine);
            });
            drop(record);
            reader.join().unwrap();
            assert_eq!(drops.load(SeqCst), 0, "the word still holds a count");
            // SAFETY: the word's count, taken back once.
            drop(unsafe { RecordRef::from_raw(raw as *const Record) });
            assert_eq!(drops.load(SeqCst), 1);
        });
    }
}
