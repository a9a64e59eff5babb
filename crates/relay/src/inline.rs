//! Small payloads stored inside the package itself, so that sending an
//! integer, a PID, a short tuple or a `String` costs no heap allocation of
//! its own.
//!
//! This is the only module of the crate with `unsafe` code: a value is
//! written into a few words of uninitialised storage and read back only
//! after its `TypeId` has been compared, exactly as `Box<dyn Any>` does
//! with a heap block.

#![allow(unsafe_code)]

use std::any::{Any, TypeId};
use std::marker::PhantomData;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

use crate::package::Payload;

/// Room for three machine words: a `String` or a `Vec`, a PID and two
/// integers, a `(u64, u64, u64)`. Larger values are boxed.
type Buffer = MaybeUninit<[usize; 3]>;

/// A value of some `Send + 'static` type that fits in [`Buffer`].
pub(crate) struct Inline {
    buffer: Buffer,
    vtable: &'static VTable,
    /// `Send` (only `Send` values are stored) but not `Sync`: a `&Inline`
    /// hands out `&T`, and `T` need not be `Sync`. `Payload` is exactly
    /// `Send + !Sync`.
    _send_not_sync: PhantomData<Payload>,
}

/// What the stored type's code does, chosen when the value was stored.
struct VTable {
    /// The stored type's id, as a value: a check of the type (every
    /// downcast, and the engine's look for an urgent wrapper on every
    /// message) compares it without an indirect call.
    type_id: TypeId,
    /// Drops the value in place.
    drop: unsafe fn(*mut u8),
    /// Moves the value out into a heap box.
    into_box: unsafe fn(*mut u8) -> Payload,
}

/// The [`VTable`] of `T`, a constant promoted to `'static`.
struct VTableOf<T>(PhantomData<T>);

impl<T: Any + Send> VTableOf<T> {
    const VTABLE: VTable = VTable {
        type_id: TypeId::of::<T>(),
        drop: drop_erased::<T>,
        into_box: into_box_erased::<T>,
    };
}

/// # Safety
///
/// `value` points to a live `T` that is never used again.
unsafe fn drop_erased<T>(value: *mut u8) {
    // SAFETY: the caller guarantees a live `T`, dropped once.
    unsafe { value.cast::<T>().drop_in_place() }
}

/// # Safety
///
/// `value` points to a live `T` that is never used (nor dropped) again.
unsafe fn into_box_erased<T: Any + Send>(value: *mut u8) -> Payload {
    // SAFETY: the caller guarantees a live `T`, moved out once.
    Box::new(unsafe { value.cast::<T>().read() })
}

impl Inline {
    /// Whether a `T` fits without a heap allocation.
    pub(crate) const fn fits<T>() -> bool {
        size_of::<T>() <= size_of::<Buffer>() && align_of::<T>() <= align_of::<Buffer>()
    }

    /// Stores `value`, or gives it back if it does not fit.
    pub(crate) fn new<T: Any + Send>(value: T) -> Result<Inline, T> {
        if !Self::fits::<T>() {
            return Err(value);
        }
        let mut buffer = Buffer::uninit();
        // SAFETY: `fits` checked that a `T` fits in the buffer's size and
        // alignment, and the buffer is ours to write.
        unsafe { buffer.as_mut_ptr().cast::<T>().write(value) };
        Ok(Inline {
            buffer,
            vtable: &VTableOf::<T>::VTABLE,
            _send_not_sync: PhantomData,
        })
    }

    /// Whether the stored value is a `T`.
    pub(crate) fn is<T: Any>(&self) -> bool {
        self.vtable.type_id == TypeId::of::<T>()
    }

    /// The stored value, if it is a `T`.
    pub(crate) fn get<T: Any>(&self) -> Option<&T> {
        // SAFETY: the buffer holds a live value of the type `vtable` was
        // made for, and that type is `T`.
        self.is::<T>()
            .then(|| unsafe { &*self.buffer.as_ptr().cast::<T>() })
    }

    /// The stored value mutably, if it is a `T`.
    pub(crate) fn get_mut<T: Any>(&mut self) -> Option<&mut T> {
        // SAFETY: as in `get`; `&mut self` makes the borrow unique.
        self.is::<T>()
            .then(|| unsafe { &mut *self.buffer.as_mut_ptr().cast::<T>() })
    }

    /// Moves the value out if it is a `T`.
    pub(crate) fn take<T: Any>(self) -> Result<T, Inline> {
        if !self.is::<T>() {
            return Err(self);
        }
        let this = ManuallyDrop::new(self);
        // SAFETY: the buffer holds a live `T`; `ManuallyDrop` keeps `Drop`
        // from running on it after this read moved it out.
        Ok(unsafe { this.buffer.as_ptr().cast::<T>().read() })
    }

    /// Moves the value into a heap box (for callers that want the
    /// type-erased [`Payload`]).
    pub(crate) fn into_box(self) -> Payload {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the buffer holds a live value of the vtable's type, moved
        // out once; `ManuallyDrop` keeps `Drop` from touching it again.
        unsafe { (this.vtable.into_box)(this.buffer.as_mut_ptr().cast()) }
    }
}

/// The stored type is erased; only its presence shows.
impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline").finish_non_exhaustive()
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        // SAFETY: the buffer holds a live value of the vtable's type (every
        // path that moves it out wraps `self` in `ManuallyDrop`), dropped
        // here once.
        unsafe { (self.vtable.drop)(self.buffer.as_mut_ptr().cast()) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn small_values_fit_and_large_ones_do_not() {
        assert!(Inline::fits::<u64>());
        assert!(Inline::fits::<String>());
        assert!(Inline::fits::<(u64, u64, u64)>());
        assert!(Inline::fits::<()>());
        assert!(!Inline::fits::<[u64; 4]>());
        assert!(!Inline::fits::<u128>() || align_of::<u128>() <= align_of::<usize>());
        assert!(Inline::new([0u8; 64]).is_err());
    }

    #[test]
    fn values_come_back_by_reference_and_by_value() {
        let mut inline = Inline::new(String::from("hi")).unwrap();
        assert!(inline.is::<String>());
        assert_eq!(inline.get::<u32>(), None);
        inline.get_mut::<String>().unwrap().push('!');
        assert_eq!(inline.get::<String>().map(String::as_str), Some("hi!"));
        let inline = inline.take::<u8>().unwrap_err();
        assert_eq!(inline.take::<String>().unwrap(), "hi!");
    }

    #[test]
    fn boxing_moves_the_value_once() {
        let payload = Inline::new(vec![1, 2, 3]).unwrap().into_box();
        assert_eq!(payload.downcast_ref::<Vec<i32>>(), Some(&vec![1, 2, 3]));
    }

    /// Counts drops, to check every path drops the value exactly once.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn every_path_drops_the_value_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        drop(Inline::new(Counted(drops.clone())).ok().unwrap());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(
            Inline::new(Counted(drops.clone()))
                .ok()
                .unwrap()
                .take::<Counted>(),
        );
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        drop(Inline::new(Counted(drops.clone())).ok().unwrap().into_box());
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        let failed = Inline::new(Counted(drops.clone()))
            .ok()
            .unwrap()
            .take::<u8>();
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        drop(failed);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_moved_inline_value_stays_valid() {
        let inline = Inline::new(String::from("moved")).unwrap();
        let mut moved = vec![inline];
        moved.reserve(64); // reallocates: the storage moves again
        let inline = moved.pop().unwrap();
        assert_eq!(inline.take::<String>().ok().as_deref(), Some("moved"));
    }
}
