//! What the CPU's native kernels share ([`crate::quant`], [`crate::attention`],
//! [`crate::int_matmul`], [`crate::depthwise`], [`crate::pad`]): each is a `Noop` AST carrying
//! its payload as an `Opaque` (only the CPU device compiles it), with a process-unique id per
//! distinct payload and an environment switch that turns it off.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

use tinygrad_uop::{Arg, Ops, UOp};

/// The payload of type `T` that a native kernel's AST carries (`None` for any other AST).
pub(crate) fn payload_of<T: Copy + 'static>(ast: &UOp) -> Option<T> {
    match (ast.op(), ast.arg()) {
        (Ops::Noop, Arg::Opaque(o)) => o.as_any().downcast_ref::<T>().copied(),
        _ => None,
    }
}

/// Whether the switch `var` leaves a native kernel on (unset, or anything but `0`), read once
/// into `cell`.
pub(crate) fn switch_on(var: &str, cell: &OnceLock<bool>) -> bool {
    *cell.get_or_init(|| std::env::var(var).map_or(true, |v| v != "0"))
}

/// The id of `key` in `registry`: `prefix | n` for the `n`-th distinct key, the same for equal
/// keys (one compile per distinct kernel). Each kind of payload has its own prefix, high bits
/// no count reaches, so no two payloads of different kinds share an id.
pub(crate) fn payload_id<K: Hash + Eq>(
    registry: &OnceLock<Mutex<HashMap<K, u64>>>,
    key: K,
    prefix: u64,
) -> u64 {
    let mut ids = registry
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let next = prefix | ids.len() as u64;
    *ids.entry(key).or_insert(next)
}
