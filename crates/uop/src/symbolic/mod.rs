//! Range analysis ([`UOp::vmin`], [`UOp::vmax`]) and the symbolic rule sets
//! ([`symbolic_simple`] ⊂ [`symbolic`] ⊂ [`sym`]), with [`UOp::simplify`].
//!
//! **Bounds.** Every node of a *bounded* dtype (`bool`, `index`, `int8..int64`, `uint8..uint32`:
//! the dtypes whose values fit in `i64`) has inclusive bounds `vmin..=vmax` that hold for every
//! value the node can take. They are computed once per node from its sources by interval
//! arithmetic in `i128`; whenever an interval leaves the dtype's range (the operation may wrap),
//! the node gets the dtype's full range. So bounds are sound under wrapping arithmetic, and a
//! node whose bounds are not the full range did not wrap. Nodes of other dtypes (floats,
//! `uint64`, pointers, void) report `i64::MIN..=i64::MAX`, meaning "unknown".
//!
//! **Canonical forms** (integer dtypes) that the rules maintain:
//! - a sum is a left-leaning chain of terms sorted by [`cmp_uop`] with like terms collected and
//!   the constant last: `((a*3)+b)+5`; subtraction is `a + b*-1`;
//! - a product has its constant factor last: `(a*b)*4`, and a constant times a sum is
//!   distributed: `(a+b)*4 -> a*4 + b*4`;
//! - other commutative ops put their sources in [`cmp_uop`] order (constants last).
//!
//! Every rule holds for all values within the variables' bounds, negative values included, with
//! C-style (truncating) division and modulo and the `x // 0 == 0` convention of
//! [`exec_alu`](crate::exec_alu()). Float rules are only the ones exact in IEEE arithmetic.
//!
//! Files: `bounds` (dtype ranges, [`UOp::vmin`]/[`UOp::vmax`] by interval arithmetic), `order`
//! ([`cmp_uop`]), `normal` (the normal forms of sums and products), `rule_sets` (the folding
//! helpers and the rule sets, with [`UOp::simplify`]).
//!
//! [`UOp::vmin`]: crate::UOp::vmin
//! [`UOp::vmax`]: crate::UOp::vmax
//! [`UOp::simplify`]: crate::UOp::simplify

mod bounds;
mod normal;
mod order;
mod rule_sets;

pub(crate) use bounds::{b128, cdiv, cmod, fits};
pub use bounds::{dtype_range, is_bounded, is_sym_int};
pub(crate) use normal::{split_term, wrap};
pub use order::cmp_uop;
pub use rule_sets::{sym, symbolic, symbolic_simple};
