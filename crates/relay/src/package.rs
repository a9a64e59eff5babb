//! Message packages: who sent what to whom.

use crate::inline::Inline;
use crate::receipt::Receipt;
use crate::Pid;
use std::any::{Any, TypeId};
use std::fmt;

/// The payload of a [`Package`]: any `Send` value, type-erased.
///
/// # Examples
///
/// ```
/// use sched::Payload;
///
/// let payload: Payload = Box::new("hello");
/// assert_eq!(payload.downcast_ref::<&str>(), Some(&"hello"));
/// ```
pub type Payload = Box<dyn Any + Send>;

/// A message on its way: source PID, target PID, and a payload the router
/// never inspects.
///
/// The payload is type-erased ([`Payload`]), so processes of different
/// concrete types, exchanging messages of different types, share one router
/// and one scheduler; the receiving process gets its value back with
/// [`downcast`](Package::downcast) or [`payload`](Package::payload). A
/// package is `Send` (it may cross threads by value) but not `Sync`.
///
/// A small payload costs no heap allocation of its own: a value of up to
/// three machine words (an integer, a [`Pid`], a short tuple, a `String` or
/// a `Vec` handle) is stored inside the package. Larger values are boxed.
///
/// # Examples
///
/// ```
/// use sched::prelude::*;
/// use sched::Package;
///
/// let package = Package::new(Pid::local(1), Pid::local(2), String::from("ping"));
/// assert_eq!(package.source(), Pid::local(1));
/// assert_eq!(package.target(), Pid::local(2));
/// assert!(package.is::<String>());
/// assert_eq!(package.downcast::<String>().ok().as_deref(), Some("ping"));
/// ```
pub struct Package {
    route: Route,
    body: Body,
}

/// The two addresses, stored as their parts: two `Pid`s side by side
/// would carry 8 bytes of padding, and a package is copied into every
/// mailbox slot. The two node numbers share one word, written and read
/// whole: as two 4-byte fields, the 8-byte copy of them that moving a
/// package makes read two separate stores, which the processor cannot
/// forward (a stall on every layer of the send path: `perf annotate` of
/// the engine's send showed most of a layer's samples on that load).
#[derive(Clone, Copy)]
struct Route {
    /// The source's node in the low half, the target's in the high half.
    nodes: u64,
    source_id: u64,
    target_id: u64,
}

impl Route {
    fn new(source: Pid, target: Pid) -> Route {
        Route {
            nodes: u64::from(source.node()) | u64::from(target.node()) << 32,
            source_id: source.id(),
            target_id: target.id(),
        }
    }

    fn source(self) -> Pid {
        Pid::new(self.nodes as u32, self.source_id)
    }

    fn target(self) -> Pid {
        Pid::new((self.nodes >> 32) as u32, self.target_id)
    }
}

/// Where the payload lives.
enum Body {
    /// Small enough to live in the package.
    Inline(Inline),
    /// On the heap (large, or handed over already boxed). A package with
    /// a [`Receipt`] holds a boxed [`Tracked`] here: the payload's own
    /// body beside the receipt, so that packages without one pay nothing
    /// for it but a type check on a missed downcast.
    Boxed(Payload),
}

/// A body with a receipt (see `receipt.rs`): the receipt is dropped, and
/// so tells its [`Acknowledge`](crate::Acknowledge), when the body's value
/// is taken out or the whole is dropped.
struct Tracked {
    body: Body,
    receipt: Receipt,
}

impl Body {
    fn new<T: Any + Send>(value: T) -> Body {
        // An already boxed payload is passed through, never boxed twice
        // (and never stored inline as a box).
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            return Body::Boxed(into_payload(value));
        }
        match Inline::new(value) {
            Ok(inline) => Body::Inline(inline),
            Err(value) => Body::Boxed(Box::new(value)),
        }
    }

    /// A body holding `()`, to stand in while the real one is moved.
    fn empty() -> Body {
        match Inline::new(()) {
            Ok(inline) => Body::Inline(inline),
            Err(()) => Body::Boxed(Box::new(())),
        }
    }

    fn tracked(payload: &Payload) -> Option<&Tracked> {
        payload.downcast_ref::<Tracked>()
    }

    fn is<T: Any>(&self) -> bool {
        match self {
            Body::Inline(inline) => inline.is::<T>(),
            Body::Boxed(payload) => {
                payload.is::<T>() || Body::tracked(payload).is_some_and(|t| t.body.is::<T>())
            }
        }
    }

    fn get<T: Any>(&self) -> Option<&T> {
        match self {
            Body::Inline(inline) => inline.get(),
            Body::Boxed(payload) => match payload.downcast_ref::<T>() {
                Some(value) => Some(value),
                None => Body::tracked(payload).and_then(|t| t.body.get()),
            },
        }
    }

    fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        match self {
            Body::Inline(inline) => inline.get_mut(),
            Body::Boxed(payload) => {
                if payload.is::<T>() {
                    return payload.downcast_mut();
                }
                payload
                    .downcast_mut::<Tracked>()
                    .and_then(|t| t.body.get_mut())
            }
        }
    }

    /// The value as a `T`, or the body back unchanged.
    fn take<T: Any>(self) -> Result<T, Body> {
        match self {
            Body::Inline(inline) => inline.take::<T>().map_err(Body::Inline),
            Body::Boxed(payload) => match payload.downcast::<T>() {
                Ok(value) => Ok(*value),
                Err(payload) => Body::take_tracked(payload),
            },
        }
    }

    /// A `T` out of a [`Tracked`] body, its receipt told; anything else
    /// back unchanged (checked before it is unboxed, so a miss moves
    /// nothing).
    fn take_tracked<T: Any>(payload: Payload) -> Result<T, Body> {
        if !Body::tracked(&payload).is_some_and(|t| t.body.is::<T>()) {
            return Err(Body::Boxed(payload));
        }
        let Ok(tracked) = payload.downcast::<Tracked>() else {
            unreachable!("checked to be tracked");
        };
        let Tracked { body, receipt } = *tracked;
        let Ok(value) = body.take::<T>() else {
            unreachable!("checked to hold a T");
        };
        drop(receipt);
        Ok(value)
    }

    fn into_payload(self) -> Payload {
        match self {
            Body::Inline(inline) => inline.into_box(),
            Body::Boxed(payload) => match payload.downcast::<Tracked>() {
                Ok(tracked) => {
                    let Tracked { body, receipt } = *tracked;
                    let payload = body.into_payload();
                    drop(receipt);
                    payload
                }
                Err(payload) => payload,
            },
        }
    }
}

/// Boxes `value` as a [`Payload`]; a value that already is a `Payload` is
/// passed through instead of being boxed again.
///
/// # Examples
///
/// ```
/// use sched::message::into_payload;
/// let p = into_payload(5u32);
/// assert_eq!(p.downcast_ref::<u32>(), Some(&5));
/// let again = into_payload(p);
/// assert_eq!(again.downcast_ref::<u32>(), Some(&5), "not boxed twice");
/// ```
pub fn into_payload<T: Any + Send>(value: T) -> Payload {
    // A `T` that is a `Payload` is moved out as it is. The check is on the
    // value in place (an `Option` seen as `dyn Any`), before any box is
    // made: boxing it first and unwrapping the box cost an allocation and
    // a free for every payload passed through (a completer's result, a
    // forwarded message). The `TypeId`s are constants, so each `T`'s
    // copy of this function keeps one branch.
    let mut value = Some(value);
    if let Some(payload) = (&mut value as &mut dyn Any).downcast_mut::<Option<Payload>>() {
        return payload.take().expect("the value was just put there");
    }
    Box::new(value.expect("the value is still there"))
}

impl Package {
    /// A package from `source` to `target` carrying `payload`.
    ///
    /// Passing a value that is already a [`Payload`]
    /// (`Box<dyn Any + Send>`) does not box it a second time: the package
    /// carries the boxed value itself, exactly as
    /// [`from_payload`](Package::from_payload) would, so that downcasting to
    /// the inner type works.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let package = Package::new(Pid::local(1), Pid::local(2), 7_u32);
    /// assert_eq!(package.payload::<u32>(), Some(&7));
    ///
    /// let boxed: Payload = Box::new(7_u32);
    /// let package = Package::new(Pid::local(1), Pid::local(2), boxed);
    /// assert_eq!(package.payload::<u32>(), Some(&7));
    /// ```
    pub fn new<T: Any + Send>(source: Pid, target: Pid, payload: T) -> Self {
        Package {
            route: Route::new(source, target),
            body: Body::new(payload),
        }
    }

    /// A package from `source` to `target` carrying an already boxed payload.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let payload: Payload = Box::new([1_u8, 2, 3]);
    /// let package = Package::from_payload(Pid::local(1), Pid::local(2), payload);
    /// assert_eq!(package.payload::<[u8; 3]>(), Some(&[1, 2, 3]));
    /// ```
    pub fn from_payload(source: Pid, target: Pid, payload: Payload) -> Self {
        Package {
            route: Route::new(source, target),
            body: Body::Boxed(payload),
        }
    }

    /// The PID of the sender.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// assert_eq!(Package::new(Pid::local(1), Pid::local(2), ()).source(), Pid::local(1));
    /// ```
    pub fn source(&self) -> Pid {
        self.route.source()
    }

    /// The PID of the process this package is addressed to.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// assert_eq!(Package::new(Pid::local(1), Pid::local(2), ()).target(), Pid::local(2));
    /// ```
    pub fn target(&self) -> Pid {
        self.route.target()
    }

    /// Readdresses the package to `target`, for a retry or a forward; the
    /// source and payload are kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let package = Package::new(Pid::local(1), Pid::local(2), ()).with_target(Pid::local(3));
    /// assert_eq!(package.target(), Pid::local(3));
    /// assert_eq!(package.source(), Pid::local(1));
    /// ```
    #[must_use]
    pub fn with_target(mut self, target: Pid) -> Self {
        self.route = Route::new(self.route.source(), target);
        self
    }

    /// Whether the payload is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let package = Package::new(Pid::local(1), Pid::local(2), 1.5_f64);
    /// assert!(package.is::<f64>());
    /// assert!(!package.is::<f32>());
    /// ```
    pub fn is<T: Any>(&self) -> bool {
        self.body.is::<T>()
    }

    /// The payload, if it is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let package = Package::new(Pid::local(1), Pid::local(2), vec![1, 2]);
    /// assert_eq!(package.payload::<Vec<i32>>(), Some(&vec![1, 2]));
    /// assert_eq!(package.payload::<String>(), None);
    /// ```
    pub fn payload<T: Any>(&self) -> Option<&T> {
        self.body.get()
    }

    /// The payload mutably, if it is a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let mut package = Package::new(Pid::local(1), Pid::local(2), 1_u64);
    /// if let Some(hops) = package.payload_mut::<u64>() {
    ///     *hops += 1;
    /// }
    /// assert_eq!(package.payload::<u64>(), Some(&2));
    /// ```
    pub fn payload_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.body.get_mut()
    }

    /// Takes the payload out as a `T`; if it is some other type the package
    /// comes back unchanged, so nothing is lost.
    ///
    /// # Errors
    ///
    /// The package itself, when the payload is not a `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let package = Package::new(Pid::local(1), Pid::local(2), 5_i32);
    /// let package = package.downcast::<String>().unwrap_err();
    /// assert_eq!(package.downcast::<i32>().ok(), Some(5));
    /// ```
    pub fn downcast<T: Any>(self) -> Result<T, Package> {
        let Package { route, body } = self;
        body.take::<T>().map_err(|body| Package { route, body })
    }

    /// The type-erased payload, dropping the addresses. A small payload
    /// stored inside the package is boxed here.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let payload = Package::new(Pid::local(1), Pid::local(2), 'x').into_payload();
    /// assert_eq!(payload.downcast_ref::<char>(), Some(&'x'));
    /// ```
    pub fn into_payload(self) -> Payload {
        self.body.into_payload()
    }

    /// Splits the package into `(source, target, payload)`. A small payload
    /// stored inside the package is boxed here.
    ///
    /// # Examples
    ///
    /// ```
    /// use sched::prelude::*;
    /// use sched::Package;
    ///
    /// let (source, target, payload) = Package::new(Pid::local(1), Pid::local(2), 3_u8).into_parts();
    /// assert_eq!((source, target), (Pid::local(1), Pid::local(2)));
    /// assert_eq!(payload.downcast_ref::<u8>(), Some(&3));
    /// ```
    pub fn into_parts(self) -> (Pid, Pid, Payload) {
        (
            self.route.source(),
            self.route.target(),
            self.body.into_payload(),
        )
    }

    /// Attaches `receipt`: it tells its [`Acknowledge`](crate::Acknowledge)
    /// once, when the payload is taken out of the package or the package
    /// is dropped, wherever the package went meanwhile (see
    /// [`Receipt`]). The payload is unchanged: it downcasts, borrows and
    /// reports its type as before. A small payload stored inside the
    /// package moves to the heap with the receipt.
    ///
    /// # Examples
    ///
    /// ```
    /// use relay::{Acknowledge, Package, Pid, Receipt};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// #[derive(Default)]
    /// struct Flag(AtomicBool);
    /// impl Acknowledge for Flag {
    ///     fn taken(&self, _: u64) {
    ///         self.0.store(true, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let flag = Arc::new(Flag::default());
    /// let package = Package::new(Pid::local(1), Pid::local(2), 5_u32)
    ///     .with_receipt(Receipt::new(flag.clone(), 0))
    ///     .with_target(Pid::local(3));
    /// assert_eq!(package.payload::<u32>(), Some(&5));
    /// let package = package.downcast::<String>().unwrap_err();
    /// assert!(!flag.0.load(Ordering::Relaxed), "a missed downcast takes nothing");
    /// drop(package);
    /// assert!(flag.0.load(Ordering::Relaxed), "dropped unread: taken all the same");
    /// ```
    #[must_use]
    pub fn with_receipt(self, receipt: Receipt) -> Package {
        Package {
            route: self.route,
            body: Body::Boxed(Box::new(Tracked {
                body: self.body,
                receipt,
            })),
        }
    }

    /// Takes the receipt off the package, untold, if it carries one: for a
    /// hop that takes the payload apart and sends it on, and attaches the
    /// receipt to what it sends with [`with_receipt`](Package::with_receipt).
    /// With several receipts attached, the last one attached; the others
    /// stay on the package.
    ///
    /// # Examples
    ///
    /// ```
    /// use relay::{Acknowledge, Package, Pid, Receipt};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    ///
    /// #[derive(Default)]
    /// struct Count(AtomicU64);
    /// impl Acknowledge for Count {
    ///     fn taken(&self, _: u64) {
    ///         self.0.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let count = Arc::new(Count::default());
    /// let mut wrapped = Package::new(Pid::local(1), Pid::local(2), (7_u8, 'k'))
    ///     .with_receipt(Receipt::new(count.clone(), 0));
    /// // A hop unwraps the message and passes the inner value on.
    /// let receipt = wrapped.take_receipt().expect("it has one");
    /// let (inner, _) = wrapped.downcast::<(u8, char)>().unwrap();
    /// let onward = Package::new(Pid::local(2), Pid::local(3), inner).with_receipt(receipt);
    /// assert_eq!(count.0.load(Ordering::Relaxed), 0, "not taken yet");
    /// assert_eq!(onward.downcast::<u8>().ok(), Some(7));
    /// assert_eq!(count.0.load(Ordering::Relaxed), 1);
    /// ```
    pub fn take_receipt(&mut self) -> Option<Receipt> {
        let Body::Boxed(payload) = &self.body else {
            return None;
        };
        if !payload.is::<Tracked>() {
            return None;
        }
        let Body::Boxed(payload) = std::mem::replace(&mut self.body, Body::empty()) else {
            unreachable!("checked to be boxed");
        };
        let Ok(tracked) = payload.downcast::<Tracked>() else {
            unreachable!("checked to be tracked");
        };
        let Tracked { body, receipt } = *tracked;
        self.body = body;
        Some(receipt)
    }

    /// Whether the package carries a [`Receipt`].
    ///
    /// # Examples
    ///
    /// ```
    /// use relay::{Package, Pid};
    ///
    /// assert!(!Package::new(Pid::local(1), Pid::local(2), ()).has_receipt());
    /// ```
    pub fn has_receipt(&self) -> bool {
        matches!(&self.body, Body::Boxed(payload) if payload.is::<Tracked>())
    }
}

/// Shows the addresses; the payload's type is erased, so it shows as `..`.
impl fmt::Debug for Package {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Package")
            .field("source", &self.source())
            .field("target", &self.target())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const A: Pid = Pid::local(1);
    const B: Pid = Pid::local(2);

    /// Counts what it is told.
    #[derive(Default)]
    struct Told(std::sync::Mutex<Vec<u64>>);

    impl crate::Acknowledge for Told {
        fn taken(&self, token: u64) {
            self.0.lock().unwrap().push(token);
        }
    }

    fn told(told: &Told) -> Vec<u64> {
        told.0.lock().unwrap().clone()
    }

    fn with(told: &std::sync::Arc<Told>, token: u64, value: impl Any + Send) -> Package {
        Package::new(A, B, value).with_receipt(Receipt::new(told.clone(), token))
    }

    #[test]
    fn a_receipt_is_told_once_whichever_way_the_payload_is_taken() {
        let t = std::sync::Arc::new(Told::default());
        // Inline-sized and boxed payloads alike.
        assert_eq!(with(&t, 1, 5_u8).downcast::<u8>().ok(), Some(5));
        assert_eq!(
            with(&t, 2, [9_u64; 8]).downcast::<[u64; 8]>().ok(),
            Some([9; 8])
        );
        let payload = with(&t, 3, String::from("x")).into_payload();
        assert_eq!(told(&t), [1, 2, 3], "told as the payload is taken");
        assert_eq!(
            payload.downcast_ref::<String>().map(String::as_str),
            Some("x")
        );
        let (source, target, payload) = with(&t, 4, 'c').into_parts();
        assert_eq!((source, target), (A, B));
        assert_eq!(payload.downcast_ref::<char>(), Some(&'c'));
        drop(with(&t, 5, vec![1_u8]));
        assert_eq!(
            told(&t),
            [1, 2, 3, 4, 5],
            "a dropped package is done with too"
        );
    }

    #[test]
    fn a_package_with_a_receipt_reads_as_without_one_until_taken() {
        let t = std::sync::Arc::new(Told::default());
        let mut package = with(&t, 1, 41_u32).with_target(A);
        assert!(package.is::<u32>() && !package.is::<u64>());
        assert!(package.has_receipt());
        assert_eq!(package.payload::<u32>(), Some(&41));
        assert_eq!(package.payload::<u64>(), None);
        *package.payload_mut::<u32>().unwrap() += 1;
        assert!(package.payload_mut::<i8>().is_none());
        let package = package.downcast::<String>().unwrap_err();
        assert!(told(&t).is_empty(), "a missed downcast takes nothing");
        assert_eq!((package.source(), package.target()), (A, A));
        assert_eq!(package.downcast::<u32>().ok(), Some(42));
        assert_eq!(told(&t), [1]);
    }

    #[test]
    fn a_receipt_taken_off_is_not_told_until_dropped_and_two_are_both_told() {
        let t = std::sync::Arc::new(Told::default());
        let mut package = with(&t, 1, 3_i16);
        let receipt = package.take_receipt().expect("one");
        assert!(!package.has_receipt() && package.take_receipt().is_none());
        assert_eq!(package.downcast::<i16>().ok(), Some(3));
        assert!(told(&t).is_empty());
        drop(receipt);
        assert_eq!(told(&t), [1]);
        let twice = with(&t, 2, 8_u8).with_receipt(Receipt::new(t.clone(), 3));
        assert!(twice.is::<u8>());
        assert_eq!(twice.downcast::<u8>().ok(), Some(8));
        let mut all = told(&t);
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3]);
    }

    #[test]
    fn a_failed_downcast_hands_the_package_back_intact() {
        let package = Package::new(A, B, String::from("data"));
        let package = package.downcast::<u32>().unwrap_err();
        assert_eq!((package.source(), package.target()), (A, B));
        assert_eq!(package.downcast::<String>().unwrap(), "data");
    }

    #[test]
    fn new_does_not_double_box_a_payload() {
        let boxed: Payload = Box::new(41_u16);
        let mut package = Package::new(A, B, boxed);
        assert!(package.is::<u16>());
        assert!(!package.is::<Payload>());
        *package.payload_mut::<u16>().unwrap() += 1;
        assert_eq!(package.downcast::<u16>().ok(), Some(42));
    }

    #[test]
    fn wrong_type_accessors_return_none() {
        let mut package = Package::new(A, B, 1_u8);
        assert_eq!(package.payload::<i8>(), None);
        assert_eq!(package.payload_mut::<i8>(), None);
    }

    #[test]
    fn debug_shows_addresses() {
        let package = Package::new(A, B, ());
        assert_eq!(
            format!("{package:?}"),
            "Package { source: <0.1>, target: <0.2>, .. }"
        );
    }

    #[test]
    fn retargeting_keeps_source_and_payload() {
        let package = Package::new(A, B, 9_i64).with_target(A);
        let (source, target, payload) = package.into_parts();
        assert_eq!((source, target), (A, A));
        assert_eq!(payload.downcast_ref::<i64>(), Some(&9));
    }
}
