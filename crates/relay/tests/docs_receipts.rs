//! Tries to break what the documentation promises about a `Receipt` on a
//! `Package`, written from the documentation only (CHANGELOG "Nodes
//! confirm what their processes read ... `Receipt` on a package",
//! docs/internals/relay.md's API block and its `Receipt` guarantee, and
//! the rustdoc of `Receipt`, `Acknowledge`, `Package::with_receipt`,
//! `take_receipt`, `has_receipt`):
//!
//! - a package's receipt tells its `Acknowledge` exactly once: when a
//!   downcast, `into_payload` or `into_parts` takes the payload out, or
//!   when the package is dropped; never on a missed downcast, a
//!   readdressing (`with_target`), a move, or a borrow (`is`, `payload`,
//!   `payload_mut`);
//! - a package with a receipt downcasts, borrows and reports its type as
//!   before, whether its payload is small (stored inline without one),
//!   large (boxed), or itself a `Payload` given to `Package::new`;
//! - `take_receipt` hands the receipt back untold (with several, the
//!   last); each of several receipts attached is told;
//! - `Acknowledge::taken` is called on the thread that takes or drops the
//!   package;
//! - a package without a receipt keeps its size (56 bytes).

use std::any::Any;
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use relay::{
    Acknowledge, Addr, Package, Payload, Pid, Receipt, Receiver, Router, SendError, SendErrorKind,
};

const A: Pid = Pid::local(1);
const B: Pid = Pid::local(2);
const C: Pid = Pid::local(3);

/// Records every `taken` call: the token and the thread it ran on.
#[derive(Default)]
struct Tally(Mutex<Vec<(u64, ThreadId)>>);

impl Acknowledge for Tally {
    fn taken(&self, token: u64) {
        self.0
            .lock()
            .unwrap()
            .push((token, std::thread::current().id()));
    }
}

impl Tally {
    fn tokens(&self) -> Vec<u64> {
        self.0.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }
    fn count(&self, token: u64) -> usize {
        self.tokens().iter().filter(|t| **t == token).count()
    }
    fn threads(&self, token: u64) -> Vec<ThreadId> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t == token)
            .map(|(_, id)| *id)
            .collect()
    }
}

fn tally() -> Arc<Tally> {
    Arc::new(Tally::default())
}

fn receipt(tally: &Arc<Tally>, token: u64) -> Receipt {
    Receipt::new(Arc::clone(tally) as Arc<dyn Acknowledge>, token)
}

/// A type no package in these tests carries: the target of missed
/// downcasts.
#[derive(Debug)]
struct Never;

/// What [`every_kind`] calls for each kind: its name, a maker of a
/// package carrying it, and whether a package reads as it.
type Check<'a> = dyn FnMut(&str, &dyn Fn() -> Package, &dyn Fn(&Package) -> bool) + 'a;

/// The payload kinds the documentation names, each with what reading it
/// must give. `make` builds the value handed to `Package::new`; `T` is
/// what the package reads as.
fn every_kind(check: &mut Check<'_>) {
    // `reads(p)`: the package reads as its kind's value, through `is`,
    // `payload` and `payload_mut` (the last on a clone-free path: a
    // borrow that must find the value).
    fn kind<P: Any + Send, T: Any + PartialEq + Debug>(
        check: &mut Check<'_>,
        name: &str,
        make: impl Fn() -> P,
        expect: T,
    ) {
        let make_package = move || Package::new(A, B, make());
        let reads = move |p: &Package| p.is::<T>() && p.payload::<T>() == Some(&expect);
        check(name, &make_package, &reads);
    }
    kind(check, "u8", || 7_u8, 7_u8);
    kind(check, "()", || (), ());
    kind(
        check,
        "String",
        || String::from("ping"),
        String::from("ping"),
    );
    kind(
        check,
        "(u64, u64, u64)",
        || (1_u64, 2_u64, 3_u64),
        (1_u64, 2_u64, 3_u64),
    );
    kind(check, "[u64; 64]", || [9_u64; 64], [9_u64; 64]);
    kind(
        check,
        "Payload of u32",
        || Box::new(5_u32) as Payload,
        5_u32,
    );
    kind(
        check,
        "Payload of [u64; 64]",
        || Box::new([4_u64; 64]) as Payload,
        [4_u64; 64],
    );
    kind(
        check,
        "Payload of String",
        || Box::new(String::from("boxed")) as Payload,
        String::from("boxed"),
    );
}

/// Takes the payload out as whatever the kind's value is, by trying each
/// kind's type in turn (the misses before the hit are missed downcasts,
/// which must tell nothing). Returns the package back if no type fits.
fn take_out(package: Package) -> Result<Box<dyn Any>, Package> {
    fn attempt<T: Any>(p: Package) -> Result<Box<dyn Any>, Package> {
        p.downcast::<T>().map(|v| Box::new(v) as Box<dyn Any>)
    }
    let p = match attempt::<u8>(package) {
        Ok(v) => return Ok(v),
        Err(p) => p,
    };
    let p = match attempt::<()>(p) {
        Ok(v) => return Ok(v),
        Err(p) => p,
    };
    let p = match attempt::<String>(p) {
        Ok(v) => return Ok(v),
        Err(p) => p,
    };
    let p = match attempt::<(u64, u64, u64)>(p) {
        Ok(v) => return Ok(v),
        Err(p) => p,
    };
    let p = match attempt::<[u64; 64]>(p) {
        Ok(v) => return Ok(v),
        Err(p) => p,
    };
    attempt::<u32>(p)
}

#[test]
fn a_package_with_a_receipt_reads_as_without_one_for_every_kind_of_payload() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let plain = make();
        let mut tracked = make().with_receipt(receipt(&t, 1));
        assert!(reads(&plain), "{name}: the plain package reads its value");
        assert!(reads(&tracked), "{name}: with a receipt, it reads the same");
        assert!(!plain.has_receipt(), "{name}");
        assert!(tracked.has_receipt(), "{name}");
        assert_eq!(tracked.source(), plain.source(), "{name}");
        assert_eq!(tracked.target(), plain.target(), "{name}");
        // The type it reports is the payload's own, nothing of the receipt.
        for (what, a, b) in [
            ("is::<Never>", plain.is::<Never>(), tracked.is::<Never>()),
            (
                "is::<Receipt>",
                plain.is::<Receipt>(),
                tracked.is::<Receipt>(),
            ),
            (
                "is::<Payload>",
                plain.is::<Payload>(),
                tracked.is::<Payload>(),
            ),
            (
                "is::<Package>",
                plain.is::<Package>(),
                tracked.is::<Package>(),
            ),
        ] {
            assert_eq!(a, b, "{name}: {what} differs with a receipt");
        }
        assert!(!tracked.is::<Receipt>(), "{name}: a receipt is no payload");
        assert!(tracked.payload::<Receipt>().is_none(), "{name}");
        assert!(tracked.payload_mut::<Receipt>().is_none(), "{name}");
        assert!(tracked.payload::<Never>().is_none(), "{name}");
        assert!(tracked.payload_mut::<Never>().is_none(), "{name}");
        assert!(reads(&tracked), "{name}: the borrows changed nothing");
        assert_eq!(
            t.tokens(),
            Vec::<u64>::new(),
            "{name}: borrows take nothing"
        );
        // Taken out, both give the same value.
        let from_plain = take_out(plain).unwrap_or_else(|_| panic!("{name}: plain downcast"));
        let from_tracked = take_out(tracked).unwrap_or_else(|_| panic!("{name}: tracked downcast"));
        assert_eq!(
            (*from_plain).type_id(),
            (*from_tracked).type_id(),
            "{name}: the same type came out"
        );
        assert_eq!(t.tokens(), vec![1], "{name}: told once, by the downcast");
    });
}

#[test]
fn a_downcast_that_takes_the_payload_tells_once_and_nothing_before_it_does() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let package = make().with_receipt(receipt(&t, 11));
        // Moves: into a vector, out again, across a function boundary.
        let mut held = vec![package];
        let package = held.pop().unwrap();
        let moved = std::convert::identity(package);
        // Readdressed, twice.
        let mut package = moved.with_target(C).with_target(B).with_target(C);
        assert_eq!(package.target(), C, "{name}");
        assert_eq!(package.source(), A, "{name}");
        assert!(
            package.has_receipt(),
            "{name}: readdressing keeps the receipt"
        );
        // Borrowed.
        assert!(reads(&package), "{name}");
        assert!(!package.is::<Never>(), "{name}");
        let _ = package.payload_mut::<Never>();
        // Missed downcasts, several.
        let package = package.downcast::<Never>().unwrap_err();
        let package = package.downcast::<Receipt>().unwrap_err();
        let package = package.downcast::<Payload>().unwrap_err();
        assert!(package.has_receipt(), "{name}: a missed downcast keeps it");
        assert!(
            reads(&package),
            "{name}: a missed downcast hands it back whole"
        );
        assert_eq!(t.count(11), 0, "{name}: nothing took it yet");
        let value = take_out(package).unwrap_or_else(|_| panic!("{name}: downcast failed"));
        assert_eq!(t.tokens(), vec![11], "{name}: told once, at the downcast");
        drop(value);
        assert_eq!(
            t.tokens(),
            vec![11],
            "{name}: dropping the value tells nothing"
        );
    });
}

#[test]
fn into_payload_tells_once_when_it_takes_the_payload_out() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let package = make().with_receipt(receipt(&t, 21)).with_target(C);
        let payload: Payload = package.into_payload();
        assert_eq!(t.tokens(), vec![21], "{name}: told at into_payload");
        // What came out is the value itself: no receipt wrapped round it.
        assert!(!payload.is::<Receipt>(), "{name}");
        let again = Package::new(A, B, payload);
        assert!(
            !again.has_receipt(),
            "{name}: the receipt did not ride along"
        );
        assert!(
            reads(&again),
            "{name}: the payload taken out reads as before"
        );
        drop(again);
        assert_eq!(t.tokens(), vec![21], "{name}: once");
    });
}

#[test]
fn into_parts_tells_once_and_keeps_the_addresses() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let package = make().with_receipt(receipt(&t, 31)).with_target(C);
        let (source, target, payload) = package.into_parts();
        assert_eq!((source, target), (A, C), "{name}");
        assert_eq!(t.tokens(), vec![31], "{name}: told at into_parts");
        let again = Package::from_payload(A, B, payload);
        assert!(!again.has_receipt(), "{name}");
        assert!(
            reads(&again),
            "{name}: the payload taken out reads as before"
        );
        drop(again);
        assert_eq!(t.tokens(), vec![31], "{name}: once");
    });
}

#[test]
fn a_package_dropped_unread_tells_once() {
    every_kind(&mut |name, make, _| {
        let t = tally();
        let package = make().with_receipt(receipt(&t, 41));
        let package = package.downcast::<Never>().unwrap_err().with_target(C);
        assert_eq!(t.count(41), 0, "{name}");
        drop(package);
        assert_eq!(t.tokens(), vec![41], "{name}: a drop tells once");
    });
}

#[test]
fn payload_mut_writes_through_a_package_with_a_receipt() {
    let t = tally();
    let mut small = Package::new(A, B, 1_u64).with_receipt(receipt(&t, 1));
    *small.payload_mut::<u64>().unwrap() += 41;
    assert_eq!(small.payload::<u64>(), Some(&42));
    let mut text = Package::new(A, B, String::from("a")).with_receipt(receipt(&t, 2));
    text.payload_mut::<String>().unwrap().push('b');
    assert_eq!(text.payload::<String>().map(String::as_str), Some("ab"));
    let mut triple = Package::new(A, B, (1_u64, 2_u64, 3_u64)).with_receipt(receipt(&t, 3));
    triple.payload_mut::<(u64, u64, u64)>().unwrap().2 = 30;
    let mut big = Package::new(A, B, [0_u64; 64]).with_receipt(receipt(&t, 4));
    big.payload_mut::<[u64; 64]>().unwrap()[63] = 63;
    let mut boxed = Package::new(A, B, Box::new(10_u32) as Payload).with_receipt(receipt(&t, 5));
    *boxed.payload_mut::<u32>().unwrap() *= 3;
    assert!(
        t.tokens().is_empty(),
        "borrows take nothing: {:?}",
        t.tokens()
    );
    assert_eq!(small.downcast::<u64>().ok(), Some(42));
    assert_eq!(text.downcast::<String>().ok().as_deref(), Some("ab"));
    assert_eq!(triple.downcast::<(u64, u64, u64)>().ok(), Some((1, 2, 30)));
    assert_eq!(big.downcast::<[u64; 64]>().ok().map(|a| a[63]), Some(63));
    assert_eq!(boxed.downcast::<u32>().ok(), Some(30));
    let mut told = t.tokens();
    told.sort_unstable();
    assert_eq!(told, vec![1, 2, 3, 4, 5]);
}

/// A payload that counts its drops: its destructor must run once,
/// whichever way the package goes, with or without a receipt.
struct Noisy(Arc<AtomicUsize>, u64);
impl Drop for Noisy {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
/// The same, too large to be stored inline.
struct NoisyBig(Arc<AtomicUsize>, [u64; 16]);
impl Drop for NoisyBig {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_payload_is_dropped_exactly_once_whichever_way_the_package_goes() {
    for big in [false, true] {
        for way in 0..5 {
            let drops = Arc::new(AtomicUsize::new(0));
            let t = tally();
            let package = if big {
                Package::new(A, B, NoisyBig(Arc::clone(&drops), [7; 16]))
            } else {
                Package::new(A, B, Noisy(Arc::clone(&drops), 7))
            }
            .with_receipt(receipt(&t, 1));
            let label = format!("big {big}, way {way}");
            match way {
                0 => drop(package),
                1 => {
                    let package = package.downcast::<Never>().unwrap_err();
                    assert_eq!(drops.load(Ordering::SeqCst), 0, "{label}");
                    drop(package);
                }
                2 => {
                    let value: Box<dyn Any> = if big {
                        let value = package.downcast::<NoisyBig>().ok().unwrap();
                        assert_eq!(value.1, [7; 16], "{label}");
                        Box::new(value)
                    } else {
                        let value = package.downcast::<Noisy>().ok().unwrap();
                        assert_eq!(value.1, 7, "{label}");
                        Box::new(value)
                    };
                    assert_eq!(t.count(1), 1, "{label}");
                    assert_eq!(drops.load(Ordering::SeqCst), 0, "{label}: still held");
                    drop(value);
                }
                3 => {
                    let payload = package.into_payload();
                    assert_eq!(t.count(1), 1, "{label}");
                    assert_eq!(drops.load(Ordering::SeqCst), 0, "{label}: still held");
                    drop(payload);
                }
                _ => {
                    let (_, _, payload) = package.into_parts();
                    assert_eq!(drops.load(Ordering::SeqCst), 0, "{label}: still held");
                    drop(payload);
                }
            }
            assert_eq!(drops.load(Ordering::SeqCst), 1, "{label}: dropped once");
            assert_eq!(t.tokens(), vec![1], "{label}: told once");
        }
    }
}

#[test]
fn take_receipt_hands_the_receipt_back_untold() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let mut package = make().with_receipt(receipt(&t, 51));
        assert!(package.has_receipt(), "{name}");
        let taken = package.take_receipt().expect("it carries one");
        assert_eq!(taken.token(), 51, "{name}");
        assert_eq!(t.count(51), 0, "{name}: taken off untold");
        assert!(!package.has_receipt(), "{name}: it carries none now");
        assert!(
            package.take_receipt().is_none(),
            "{name}: nothing to take twice"
        );
        assert!(
            reads(&package),
            "{name}: reads as before without its receipt"
        );
        let value = take_out(package).unwrap_or_else(|_| panic!("{name}"));
        drop(value);
        assert_eq!(t.count(51), 0, "{name}: the package no longer tells it");
        drop(taken);
        assert_eq!(
            t.tokens(),
            vec![51],
            "{name}: the receipt itself tells, once"
        );
    });
    let mut plain = Package::new(A, B, 1_u8);
    assert!(plain.take_receipt().is_none());
    assert!(!plain.has_receipt());
}

#[test]
fn a_hop_moves_the_receipt_onto_what_it_sends_on() {
    let t = tally();
    let mut wrapped = Package::new(A, B, (7_u8, 'k')).with_receipt(receipt(&t, 61));
    let r = wrapped.take_receipt().expect("it has one");
    let (inner, _) = wrapped.downcast::<(u8, char)>().unwrap();
    assert!(
        t.tokens().is_empty(),
        "unwrapping the hop's package took nothing"
    );
    let onward = Package::new(B, C, inner).with_receipt(r);
    assert!(onward.has_receipt());
    let onward = onward.downcast::<char>().unwrap_err();
    assert!(t.tokens().is_empty());
    assert_eq!(onward.downcast::<u8>().ok(), Some(7));
    assert_eq!(t.tokens(), vec![61]);
}

#[test]
fn two_receipts_on_one_package_are_each_told_once() {
    // way 0: downcast, 1: into_payload, 2: into_parts, 3: dropped,
    // 4: dropped after a missed downcast.
    every_kind(&mut |name, make, _| {
        for way in 0..5 {
            let (first, second) = (tally(), tally());
            let package = make()
                .with_receipt(receipt(&first, 1))
                .with_target(C)
                .with_receipt(receipt(&second, 2));
            assert!(package.has_receipt(), "{name}");
            assert!(first.tokens().is_empty() && second.tokens().is_empty());
            match way {
                0 => drop(take_out(package).unwrap_or_else(|_| panic!("{name}"))),
                1 => drop(package.into_payload()),
                2 => drop(package.into_parts()),
                3 => drop(package),
                _ => drop(package.downcast::<Never>().unwrap_err()),
            }
            assert_eq!(first.tokens(), vec![1], "{name}, way {way}: the first");
            assert_eq!(second.tokens(), vec![2], "{name}, way {way}: the second");
        }
    });
}

#[test]
fn with_two_receipts_take_receipt_takes_the_last_and_leaves_the_first() {
    every_kind(&mut |name, make, reads| {
        let t = tally();
        let mut package = make()
            .with_receipt(receipt(&t, 1))
            .with_receipt(receipt(&t, 2));
        let last = package.take_receipt().expect("it has two");
        assert_eq!(last.token(), 2, "{name}: the last one attached");
        assert!(
            t.tokens().is_empty(),
            "{name}: taking one off tells nothing"
        );
        assert!(package.has_receipt(), "{name}: the first is still on it");
        assert!(reads(&package), "{name}");
        let value = take_out(package).unwrap_or_else(|_| panic!("{name}"));
        assert_eq!(
            t.tokens(),
            vec![1],
            "{name}: the first told at the downcast"
        );
        drop(value);
        drop(last);
        assert_eq!(t.tokens(), vec![1, 2], "{name}: each once");
    });
}

#[test]
fn the_acknowledge_is_told_on_the_thread_that_takes_or_drops_the_package() {
    every_kind(&mut |name, make, _| {
        let t = tally();
        let by_downcast = make().with_receipt(receipt(&t, 1));
        let by_drop = make().with_receipt(receipt(&t, 2));
        let by_payload = make().with_receipt(receipt(&t, 3));
        let here = std::thread::current().id();
        let there = std::thread::spawn(move || {
            let value = take_out(by_downcast).expect("downcast");
            drop(by_drop);
            let payload = by_payload.into_payload();
            drop((value, payload));
            std::thread::current().id()
        })
        .join()
        .unwrap();
        assert_ne!(here, there);
        for token in 1..=3 {
            assert_eq!(t.threads(token), vec![there], "{name}: token {token}");
        }
    });
}

/// A mailbox that keeps what it is sent.
#[derive(Default)]
struct Mailbox(Mutex<Vec<Package>>);
impl Receiver for Mailbox {
    fn send(&self, package: Package) -> Result<(), SendError> {
        self.0.lock().unwrap().push(package);
        Ok(())
    }
}

/// Refuses everything.
struct Refuse;
impl Receiver for Refuse {
    fn send(&self, package: Package) -> Result<(), SendError> {
        Err(SendError::full(package))
    }
}

#[test]
fn routing_delivering_and_refusing_move_a_package_and_tell_nothing() {
    let t = tally();
    let router: Router<Arc<dyn Receiver + Send + Sync>> = Router::new();
    let mailbox = Arc::new(Mailbox::default());
    router
        .register(B, Arc::clone(&mailbox) as Arc<dyn Receiver + Send + Sync>)
        .ok()
        .unwrap();
    router
        .register(C, Arc::new(Refuse) as Arc<dyn Receiver + Send + Sync>)
        .ok()
        .unwrap();

    // Delivered: it sits in the mailbox, untold, until read there.
    router
        .route(Package::new(A, B, [3_u64; 64]).with_receipt(receipt(&t, 1)))
        .unwrap();
    router
        .route(Package::new(A, B, 8_u8).with_receipt(receipt(&t, 2)))
        .unwrap();
    assert!(t.tokens().is_empty(), "delivered is not taken");

    // Refused by the target's receiver, and by the table: handed back,
    // receipt and all, untold.
    let mut full = router
        .route(Package::new(A, C, String::from("no")).with_receipt(receipt(&t, 3)))
        .unwrap_err();
    assert_eq!(full.kind(), SendErrorKind::Full);
    assert!(full.package_mut().has_receipt());
    assert_eq!(
        full.package_mut().payload::<String>().map(String::as_str),
        Some("no")
    );
    let unknown = router
        .route(Package::new(A, Pid::local(99), (1_u64, 2_u64, 3_u64)).with_receipt(receipt(&t, 4)))
        .unwrap_err();
    assert_eq!(unknown.kind(), SendErrorKind::UnknownTarget);
    let through_trait: &dyn Receiver = &router;
    let unknown_too = through_trait
        .send(
            Package::new(A, Pid::local(98), Box::new(6_u32) as Payload)
                .with_receipt(receipt(&t, 5)),
        )
        .unwrap_err();
    assert!(
        t.tokens().is_empty(),
        "a refusal takes nothing: {:?}",
        t.tokens()
    );

    // Read in the mailbox: told once each.
    let mut inbox = std::mem::take(&mut *mailbox.0.lock().unwrap());
    assert_eq!(inbox.len(), 2);
    let small = inbox.pop().unwrap();
    let large = inbox.pop().unwrap();
    assert_eq!(small.downcast::<u8>().ok(), Some(8));
    assert_eq!(t.tokens(), vec![2]);
    let large = large.downcast::<u8>().unwrap_err();
    assert_eq!(t.tokens(), vec![2], "a missed downcast of a boxed payload");
    assert_eq!(large.downcast::<[u64; 64]>().ok().map(|a| a[0]), Some(3));
    assert_eq!(t.tokens(), vec![2, 1]);

    // The refused ones: taken back out of their errors.
    let (kind, package) = full.into_parts();
    assert_eq!(kind, SendErrorKind::Full);
    assert_eq!(t.count(3), 0, "out of the error, still untold");
    assert_eq!(package.downcast::<String>().ok().as_deref(), Some("no"));
    assert_eq!(t.count(3), 1);
    let package = unknown.into_package().with_target(B);
    assert_eq!(t.count(4), 0);
    router.route(package).unwrap();
    assert_eq!(t.count(4), 0, "routed again, still untold");
    drop(std::mem::take(&mut *mailbox.0.lock().unwrap()));
    assert_eq!(t.count(4), 1, "dropped in the mailbox, told once");
    drop(unknown_too);
    assert_eq!(t.count(5), 1, "an error dropped drops its package");
    let mut all = t.tokens();
    all.sort_unstable();
    assert_eq!(all, vec![1, 2, 3, 4, 5], "each exactly once");
}

#[test]
fn a_typed_address_s_package_carries_a_receipt_like_any() {
    let t = tally();
    let to: Addr<(Pid, u64)> = Addr::from_pid(B);
    let package = to.package(A, (C, 9)).with_receipt(receipt(&t, 1));
    assert_eq!(package.payload::<(Pid, u64)>(), Some(&(C, 9)));
    let package = package.downcast::<u64>().unwrap_err();
    assert!(t.tokens().is_empty());
    assert_eq!(package.downcast::<(Pid, u64)>().ok(), Some((C, 9)));
    assert_eq!(t.tokens(), vec![1]);
}

#[test]
fn a_receipt_on_its_own_tells_its_token_once_when_dropped() {
    let t = tally();
    let r = receipt(&t, u64::MAX);
    assert_eq!(r.token(), u64::MAX);
    let mut moved = vec![r];
    assert!(t.tokens().is_empty(), "a move tells nothing");
    let r = moved.pop().unwrap();
    let r = std::thread::spawn(move || r).join().unwrap();
    assert!(t.tokens().is_empty());
    drop(r);
    assert_eq!(t.tokens(), vec![u64::MAX]);
    // Zero is a token like any.
    drop(receipt(&t, 0));
    assert_eq!(t.tokens(), vec![u64::MAX, 0]);
}

#[test]
fn a_receipt_on_a_payload_taken_from_a_package_with_one_is_told_on_its_own() {
    // A transport's hop: the payload taken out of a package with a
    // receipt (told), wrapped in a new package with another receipt.
    let t = tally();
    let first = Package::new(A, B, [1_u64; 64]).with_receipt(receipt(&t, 1));
    let payload = first.into_payload();
    assert_eq!(t.tokens(), vec![1]);
    let second = Package::new(B, C, payload).with_receipt(receipt(&t, 2));
    assert_eq!(second.payload::<[u64; 64]>().map(|a| a[0]), Some(1));
    assert_eq!(t.tokens(), vec![1], "the second is not told by the first");
    let (_, _, payload) = second.into_parts();
    assert_eq!(t.tokens(), vec![1, 2]);
    assert_eq!(payload.downcast_ref::<[u64; 64]>().map(|a| a[63]), Some(1));
}

#[cfg(target_pointer_width = "64")]
#[test]
fn a_package_is_56_bytes() {
    // "a package without one costs what it did: its size is unchanged"
    assert_eq!(std::mem::size_of::<Package>(), 56);
}
