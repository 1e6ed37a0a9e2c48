//! Kernel optimizations (tinygrad's `codegen/opt`): tinygrad-style opts applied to a kernel AST
//! before it is linearized.
//!
//! An opt is a [`Split`] of one loop range into an outer range and *lane* axes whose iterations
//! are laid out in registers instead of a loop:
//! - on an output range it is tinygrad's **UPCAST**: each outer iteration computes a tile of
//!   outputs, so a value loaded once (`A[i, k]`) serves every lane that needs it (register
//!   tiling: a 4x8 tile of a matmul keeps 8 vector accumulators in registers);
//! - on a reduce range it is **UNROLL**: several independent accumulators per reduction, combined
//!   after the loop, so consecutive additions do not wait for each other.
//!
//! One lane axis may be the **vector** axis: its 4 lanes become SIMD lanes (`float32.vec(4)`).
//! Loads and stores whose index moves by exactly 1 along it become vector loads and stores,
//! values that do not depend on it are broadcast, other accesses gather lane by lane. Operations
//! that the target executes on vectors ([`vector_native`]) stay vectors; everything else (index
//! arithmetic, 64-bit types, divisions, ...) is computed per lane, so every kernel can be
//! vectorized correctly, only more or less profitably. [`KernelOpts::order`] reorders the output
//! loops (the outermost one is what the launcher splits across threads).
//!
//! Sizes that are not a multiple of a split:
//! - output ranges: the last tile is shifted back to end at the last element (`min(o*P, N-P)`),
//!   overlapping the previous one. Overlapping outputs are recomputed and stored again with the
//!   same value, which is harmless because a kernel's output never aliases its inputs;
//! - reduce ranges: the remainder gets its own (tail) reduction over the last `N % P` elements,
//!   combined with the unrolled one.
//!
//! A split needs the range to have at least as many iterations as its lanes; [`heuristic`] picks
//! only valid splits, [`apply_opts`] rejects invalid ones.
//!
//! After [`apply_opts`] the AST has no lane ranges: every lane axis has been expanded into
//! explicit copies and vectors ("expand" in tinygrad). Reductions over lanes become several
//! `Reduce` nodes over the same ranges, which the linearizer runs in one loop.
//!
//! Module map:
//! - this file: [`KernelOpts`] and [`Split`] (with their text form, BEAM's cache), and the
//!   helpers the others share: range ids/kinds/sizes, [`affine_coeff`], [`vector_native`],
//!   which dtypes are vectors in registers and in memory.
//! - `choose`: the hand-coded [`heuristic`] and the moves BEAM search tries ([`beam_moves`]).
//! - `apply`: [`apply_opts`]: the splits and loop order applied to the AST.
//! - `expand`: the expansion of lane axes into explicit copies and vectors.

mod apply;
mod choose;
mod expand;
#[cfg(test)]
mod tests;

pub use apply::apply_opts;
pub use choose::{BEAM_LANES, beam_moves, heuristic};

use std::collections::HashMap;

use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// The SIMD width (in 32-bit lanes) the vector axis uses.
pub const VECTOR_WIDTH: usize = 4;

/// Splits one range (by its id) into an outer range and lane axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Split {
    /// The range's id (`Arg::Range(id, _)`).
    pub axis: usize,
    /// Lane axis sizes, innermost (stride 1) first: `[4, 2]` makes a range of 8 lanes, `r =
    /// outer*8 + l1*4 + l0`.
    pub lanes: Vec<usize>,
    /// Whether the first lane axis becomes SIMD vector lanes (its size must be
    /// [`VECTOR_WIDTH`]). At most one split per kernel may set it.
    pub vector: bool,
}

/// The optimizations of one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelOpts {
    /// Splits, applied in order (at most one per reduce range).
    pub splits: Vec<Split>,
    /// The output ranges' ids from the outermost loop to the innermost; `None` keeps the
    /// scheduled order (the output's row-major order).
    pub order: Option<Vec<usize>>,
}

impl KernelOpts {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.splits.is_empty() && self.order.is_none()
    }
}

fn range_id(r: &UOp) -> usize {
    match r.arg() {
        Arg::Range(id, _) => *id,
        _ => usize::MAX,
    }
}

fn range_kind(r: &UOp) -> AxisKind {
    match r.arg() {
        Arg::Range(_, k) => *k,
        _ => AxisKind::Loop,
    }
}

fn range_size(r: &UOp) -> Option<usize> {
    r.s(0).as_int().map(|s| s.max(0) as usize)
}

/// The coefficient of `var` in the integer expression `e` if `e` is affine in it (`Some(0)`
/// when `e` does not depend on it), `None` when it is not affine (divisions, modulo, products
/// of two variables, ...) or a coefficient overflows `i64`.
pub fn affine_coeff(e: &UOp, var: &UOp, memo: &mut HashMap<UOp, Option<i64>>) -> Option<i64> {
    if let Some(c) = memo.get(e) {
        return *c;
    }
    let c = if e == var {
        Some(1)
    } else if e.src().is_empty() {
        Some(0)
    } else {
        match e.op() {
            Ops::Add => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                a.zip(b).and_then(|(a, b)| a.checked_add(b))
            }
            Ops::Sub => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                a.zip(b).and_then(|(a, b)| a.checked_sub(b))
            }
            Ops::Neg => affine_coeff(e.s(0), var, memo).and_then(i64::checked_neg),
            Ops::Mul => {
                let a = affine_coeff(e.s(0), var, memo);
                let b = affine_coeff(e.s(1), var, memo);
                match (a, b, e.s(0).as_int(), e.s(1).as_int()) {
                    (_, Some(b), Some(ca), _) => ca.checked_mul(b),
                    (Some(a), _, _, Some(cb)) => a.checked_mul(cb),
                    (Some(0), Some(0), _, _) => Some(0),
                    _ => None,
                }
            }
            _ => {
                let mut all_zero = true;
                for s in e.src() {
                    if affine_coeff(s, var, memo) != Some(0) {
                        all_zero = false;
                        break;
                    }
                }
                if all_zero { Some(0) } else { None }
            }
        }
    };
    memo.insert(e.clone(), c);
    c
}

/// Whether the target runs `op` on 4-lane vectors of these dtypes natively (32-bit lanes:
/// `float32`, `int32`, `uint32`, and `bool` as a 32-bit lane mask). `scalar_shift`: a shift's
/// amount is the same for every lane.
pub fn vector_native(op: Ops, out: DType, srcs: &[DType], scalar_shift: bool) -> bool {
    let lane32 = |d: DType| {
        d.count() == 1
            && !d.is_ptr()
            && matches!(
                d.kind(),
                Scalar::Float32 | Scalar::Int32 | Scalar::UInt32 | Scalar::Bool
            )
    };
    if !lane32(out) || !srcs.iter().all(|d| lane32(*d)) {
        return false;
    }
    let s0 = srcs.first().map_or(out, |d| *d);
    let float = s0.kind() == Scalar::Float32;
    let int = matches!(s0.kind(), Scalar::Int32 | Scalar::UInt32);
    let boolean = s0.kind() == Scalar::Bool;
    match op {
        Ops::Add | Ops::Sub | Ops::Mul => float || int,
        Ops::Max => float || s0.kind() == Scalar::Int32,
        Ops::Neg | Ops::FDiv | Ops::Sqrt | Ops::Trunc | Ops::Round | Ops::Recip | Ops::MulAcc => {
            float
        }
        Ops::And | Ops::Or | Ops::Xor => int || boolean,
        Ops::CmpEq | Ops::CmpNe => true,
        Ops::CmpLt => float || s0.kind() == Scalar::Int32,
        Ops::Where => srcs.len() == 3 && srcs[0].kind() == Scalar::Bool && srcs[1] == srcs[2],
        Ops::Shl | Ops::Shr => int && scalar_shift,
        Ops::Cast => {
            (s0.kind() == Scalar::Int32 && out.kind() == Scalar::Float32)
                || (boolean && matches!(out.kind(), Scalar::Float32 | Scalar::Int32))
        }
        Ops::Bitcast => {
            (float && matches!(out.kind(), Scalar::Int32 | Scalar::UInt32))
                || (int && out.kind() == Scalar::Float32)
        }
        _ => false,
    }
}

/// Whether a value of `dt` is computed in 4-lane vectors of 32-bit lanes (a reduction's
/// accumulator).
fn vector_memory(dt: DType) -> bool {
    dt.count() == 1 && matches!(dt.kind(), Scalar::Float32 | Scalar::Int32 | Scalar::UInt32)
}

/// Whether a buffer of `dt` is loaded and stored 4 elements at a time: the 32-bit types, and
/// `bool` (4 bytes in memory, a lane mask in registers; ReLU's saved masks are bool buffers).
// mnist non-GEMM kernels 93.0 -> 84.6 ms per step (see docs/performance.md)
fn vector_io(dt: DType) -> bool {
    vector_memory(dt) || (dt.count() == 1 && dt.kind() == Scalar::Bool)
}

impl std::fmt::Display for KernelOpts {
    /// The on-disk form (BEAM's cache): `s<axis>:<lanes, x-separated>[:v]` per split, then
    /// `o<ids, comma-separated>` for an order; `-` for no opts. [`KernelOpts::parse`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .splits
            .iter()
            .map(|s| {
                let lanes: Vec<String> = s.lanes.iter().map(usize::to_string).collect();
                format!(
                    "s{}:{}{}",
                    s.axis,
                    lanes.join("x"),
                    if s.vector { ":v" } else { "" }
                )
            })
            .collect();
        if let Some(order) = &self.order {
            let ids: Vec<String> = order.iter().map(usize::to_string).collect();
            parts.push(format!("o{}", ids.join(",")));
        }
        if parts.is_empty() {
            write!(f, "-")
        } else {
            write!(f, "{}", parts.join(" "))
        }
    }
}

impl KernelOpts {
    /// Parses the [`Display`](std::fmt::Display) form.
    ///
    /// ```
    /// use tinygrad_codegen::opt::{KernelOpts, Split};
    /// let o = KernelOpts {
    ///     splits: vec![Split { axis: 3, lanes: vec![4, 2], vector: true }],
    ///     order: Some(vec![3, 1]),
    /// };
    /// assert_eq!(o.to_string(), "s3:4x2:v o3,1");
    /// assert_eq!(KernelOpts::parse(&o.to_string()), Ok(o));
    /// assert!(KernelOpts::parse("s3:4x").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<KernelOpts, String> {
        let mut opts = KernelOpts::default();
        let text = text.trim();
        if text == "-" {
            return Ok(opts);
        }
        let num = |t: &str| {
            t.parse::<usize>()
                .map_err(|e| format!("bad number {t:?} in {text:?}: {e}"))
        };
        for part in text.split_whitespace() {
            if let Some(rest) = part.strip_prefix('s') {
                let fields: Vec<&str> = rest.split(':').collect();
                let vector = match fields.get(2) {
                    None => false,
                    Some(&"v") if fields.len() == 3 => true,
                    _ => return Err(format!("bad split {part:?} in {text:?}")),
                };
                let (Some(axis), Some(lanes)) = (fields.first(), fields.get(1)) else {
                    return Err(format!("bad split {part:?} in {text:?}"));
                };
                opts.splits.push(Split {
                    axis: num(axis)?,
                    lanes: lanes.split('x').map(num).collect::<Result<_, _>>()?,
                    vector,
                });
            } else if let Some(rest) = part.strip_prefix('o') {
                if opts.order.is_some() {
                    return Err(format!("two orders in {text:?}"));
                }
                opts.order = Some(rest.split(',').map(num).collect::<Result<_, _>>()?);
            } else {
                return Err(format!("unknown opt {part:?} in {text:?}"));
            }
        }
        Ok(opts)
    }
}
