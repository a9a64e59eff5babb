//! Small payloads cost no heap allocation of their own; large ones one.
//! Counted with a global allocator that counts this thread's allocations.

use relay::{Addr, Package, Pid};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

const A: Pid = Pid::local(1);
const B: Pid = Pid::local(2);

#[test]
fn an_integer_message_round_trip_allocates_nothing() {
    let n = allocations(|| {
        let package = Package::new(A, B, 41_u64);
        assert_eq!(package.payload::<u64>(), Some(&41));
        assert_eq!(package.downcast::<u64>().ok(), Some(41));
    });
    assert_eq!(n, 0);
}

#[test]
fn a_typed_tuple_message_allocates_nothing() {
    let counter: Addr<(Pid, u64)> = Addr::from_pid(B);
    let n = allocations(|| {
        let mut package = counter.package(A, (A, 7));
        package.payload_mut::<(Pid, u64)>().unwrap().1 += 1;
        assert_eq!(package.downcast::<(Pid, u64)>().ok(), Some((A, 8)));
    });
    assert_eq!(n, 0);
}

#[test]
fn a_string_message_allocates_only_its_text() {
    let text = String::from("hello");
    let n = allocations(|| {
        let package = Package::new(A, B, text);
        assert_eq!(package.downcast::<String>().ok().as_deref(), Some("hello"));
    });
    assert_eq!(n, 0, "the String's own buffer was allocated before");
}

#[test]
fn a_large_message_is_boxed_once() {
    let n = allocations(|| {
        let package = Package::new(A, B, [7_u64; 16]);
        assert_eq!(package.payload::<[u64; 16]>().map(|a| a[15]), Some(7));
    });
    assert_eq!(n, 1);
}

#[test]
fn the_erased_payload_of_a_small_message_is_boxed_on_request() {
    let package = Package::new(A, B, 5_u16);
    let n = allocations(|| {
        let payload = package.into_payload();
        assert_eq!(payload.downcast_ref::<u16>(), Some(&5));
    });
    assert_eq!(n, 1);
}

#[test]
fn a_payload_passed_on_is_not_boxed_again() {
    // Made before the count: what a completer's handler or a forwarding
    // process holds.
    let small: relay::Payload = Box::new(9_u32);
    let forwarded: relay::Payload = Box::new([3_u64; 16]);
    let n = allocations(|| {
        let payload = relay::into_payload(small);
        assert_eq!(payload.downcast_ref::<u32>(), Some(&9));
        let package = Package::new(A, B, forwarded);
        assert_eq!(package.payload::<[u64; 16]>().map(|a| a[0]), Some(3));
    });
    assert_eq!(n, 0, "a Payload is moved on as it is");
}

#[test]
fn a_package_is_seven_words() {
    // Two addresses (three words), three words of payload, one for its type.
    assert!(std::mem::size_of::<Package>() <= 7 * std::mem::size_of::<usize>());
}
