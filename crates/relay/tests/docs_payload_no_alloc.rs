//! Tries to break the CHANGELOG's "A `Payload` passed on is not boxed
//! again, nor allocated for": `into_payload` and `Package::new`, given a
//! value that already is a `Payload` (`Box<dyn Any + Send>`), pass it on
//! without an allocation or a free (they used to box it again and unwrap
//! that box: one of each). Also the rustdoc of `Package::new` ("does not
//! box it a second time: the package carries the boxed value itself,
//! exactly as `from_payload` would, so that downcasting to the inner type
//! works") and of `into_payload` ("passed through instead of being boxed
//! again").
//!
//! Counted with a global allocator that counts allocations and frees made
//! on the calling thread only (a thread-local flag turns counting on), so
//! the test harness's other threads do not disturb the counts. The
//! allocator applies to this whole test binary, which is why these tests
//! have a file of their own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::any::Any;
use std::cell::Cell;

use relay::{Package, Payload, Pid};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are being counted.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations (including reallocations) counted on this thread.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Frees counted on this thread.
    static FREES: Cell<usize> = const { Cell::new(0) };
}

fn note(counter: &'static std::thread::LocalKey<Cell<usize>>) {
    // `try_with`: a thread being torn down may have lost its locals.
    let on = COUNTING.try_with(Cell::get).unwrap_or(false);
    if on {
        let _ = counter.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are const-initialised thread-local `Cell`s, which never
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(&ALLOCATIONS);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(&FREES);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with this thread's allocations counted: returns what it
/// returned (dropped by the caller, outside the count), the allocations
/// and the frees it made.
fn counted<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let (a0, f0) = (ALLOCATIONS.with(Cell::get), FREES.with(Cell::get));
    COUNTING.with(|c| c.set(true));
    let result = std::hint::black_box(f());
    COUNTING.with(|c| c.set(false));
    let (a1, f1) = (ALLOCATIONS.with(Cell::get), FREES.with(Cell::get));
    (result, a1 - a0, f1 - f0)
}

/// The address of the value a payload boxes: the same box passed on
/// keeps it.
fn address(payload: &Payload) -> *const () {
    let value: &dyn Any = &**payload;
    value as *const dyn Any as *const ()
}

const A: Pid = Pid::local(1);
const B: Pid = Pid::local(2);

/// The payloads the tests pass on: small (would fit inline in a package),
/// large, a heap-owning value, zero-sized.
fn payloads() -> Vec<(&'static str, Payload)> {
    vec![
        ("u32", Box::new(5_u32) as Payload),
        ("u8", Box::new(1_u8) as Payload),
        (
            "(u64, u64, u64)",
            Box::new((1_u64, 2_u64, 3_u64)) as Payload,
        ),
        ("[u64; 64]", Box::new([7_u64; 64]) as Payload),
        ("String", Box::new(String::from("forwarded")) as Payload),
        ("Vec<u8>", Box::new(vec![1_u8, 2, 3]) as Payload),
    ]
}

/// Whether `payload` holds the value `payloads()` gave `name`.
fn holds(name: &str, payload: &dyn Any) -> bool {
    match name {
        "u32" => payload.downcast_ref::<u32>() == Some(&5),
        "u8" => payload.downcast_ref::<u8>() == Some(&1),
        "(u64, u64, u64)" => payload.downcast_ref::<(u64, u64, u64)>() == Some(&(1, 2, 3)),
        "[u64; 64]" => payload.downcast_ref::<[u64; 64]>() == Some(&[7; 64]),
        "String" => payload.downcast_ref::<String>().map(String::as_str) == Some("forwarded"),
        "Vec<u8>" => payload.downcast_ref::<Vec<u8>>() == Some(&vec![1, 2, 3]),
        _ => unreachable!("{name}"),
    }
}

#[test]
fn the_counter_counts_a_box_and_its_free() {
    // So that the zeros below are not a counter that sees nothing.
    let (payload, allocations, frees) = counted(|| relay::into_payload([1_u64; 64]));
    assert_eq!((allocations, frees), (1, 0), "a value boxed once");
    let ((), allocations, frees) = counted(|| drop(payload));
    assert_eq!((allocations, frees), (0, 1), "and freed once");
}

#[test]
fn into_payload_given_a_payload_allocates_and_frees_nothing() {
    for (name, payload) in payloads() {
        let before = address(&payload);
        let (again, allocations, frees) = counted(|| relay::into_payload(payload));
        assert_eq!(
            (allocations, frees),
            (0, 0),
            "{name}: into_payload(Payload) made {allocations} allocations and {frees} frees"
        );
        assert_eq!(address(&again), before, "{name}: the same box passed on");
        assert!(holds(name, &*again), "{name}: not boxed twice");
        assert!(!again.is::<Payload>(), "{name}: no box in a box");
    }
}

#[test]
fn the_facade_s_into_payload_given_a_payload_allocates_and_frees_nothing() {
    for (name, payload) in payloads() {
        let before = address(&payload);
        let (again, allocations, frees) = counted(|| sched::message::into_payload(payload));
        assert_eq!(
            (allocations, frees),
            (0, 0),
            "{name}: sched::message::into_payload(Payload) made {allocations} allocations and {frees} frees"
        );
        assert_eq!(address(&again), before, "{name}: the same box passed on");
        assert!(holds(name, &*again), "{name}");
    }
}

#[test]
fn into_payload_passed_through_many_times_allocates_nothing() {
    let payload: Payload = Box::new(String::from("hop"));
    let before = address(&payload);
    let (payload, allocations, frees) = counted(|| {
        let mut p = payload;
        for _ in 0..100 {
            p = relay::into_payload(p);
        }
        p
    });
    assert_eq!((allocations, frees), (0, 0));
    assert_eq!(address(&payload), before);
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("hop")
    );
}

#[test]
fn package_new_given_a_payload_allocates_and_frees_nothing() {
    for (name, payload) in payloads() {
        let (package, allocations, frees) = counted(|| Package::new(A, B, payload));
        assert_eq!(
            (allocations, frees),
            (0, 0),
            "{name}: Package::new(Payload) made {allocations} allocations and {frees} frees"
        );
        assert!(!package.is::<Payload>(), "{name}: not boxed twice");
        let (source, target, payload) = package.into_parts();
        assert_eq!((source, target), (A, B), "{name}");
        assert!(
            holds(name, &*payload),
            "{name}: downcasts to the inner type"
        );
    }
}

#[test]
fn package_new_given_a_payload_reads_as_from_payload_does() {
    for ((name, one), (_, two)) in payloads().into_iter().zip(payloads()) {
        let via_new = Package::new(A, B, one);
        let via_from = Package::from_payload(A, B, two);
        assert_eq!(
            via_new.is::<Payload>(),
            via_from.is::<Payload>(),
            "{name}: exactly as from_payload"
        );
        let (new_payload, from_payload) = (via_new.into_payload(), via_from.into_payload());
        assert!(holds(name, &*new_payload), "{name}");
        assert!(holds(name, &*from_payload), "{name}");
    }
}

#[test]
fn a_forwarded_payload_crosses_two_packages_without_an_allocation_when_large() {
    // A large payload is boxed once, and keeps that box through
    // `into_payload` and `Package::new` (a forward): the same address
    // comes out at the end, with nothing allocated or freed on the way.
    let first = Package::new(A, B, [3_u64; 64]);
    let (payload, allocations, frees) = counted(|| {
        let payload = first.into_payload();
        let second = Package::new(B, A, relay::into_payload(payload));
        second.into_payload()
    });
    assert_eq!(
        (allocations, frees),
        (0, 0),
        "a large payload forwarded: {allocations} allocations, {frees} frees"
    );
    assert_eq!(payload.downcast_ref::<[u64; 64]>(), Some(&[3; 64]));
}
