//! Turning any value into a type-erased payload, without boxing twice.

use std::any::Any;

use relay::Payload;

/// Boxes `value` as a [`Payload`]; a value that already is a `Payload` is
/// passed through instead of being boxed again.
///
/// # Examples
///
/// ```
/// use sched::into_payload;
/// let p = into_payload(5u32);
/// assert_eq!(p.downcast_ref::<u32>(), Some(&5));
/// let again = into_payload(p);
/// assert_eq!(again.downcast_ref::<u32>(), Some(&5), "not boxed twice");
/// ```
pub fn into_payload<T: Any + Send>(value: T) -> Payload {
    let boxed: Payload = Box::new(value);
    match boxed.downcast::<Payload>() {
        Ok(inner) => *inner,
        Err(boxed) => boxed,
    }
}
