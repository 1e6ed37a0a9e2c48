//! Emulated dtypes: `float16` and `bfloat16` on targets without half-precision arithmetic.
//!
//! Half values stay 16-bit in memory and in registers (loads, stores, `Where` move bits); every
//! computation happens in `float32`: an ALU op on halves becomes `cast(op(cast(a, f32), ...))`,
//! a reduction over halves accumulates in `float32`, and casts between a half and anything but
//! `float32` go through `float32`. The renderer then only needs half <-> `float32` conversions.

use std::sync::LazyLock;

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, PatternMatcher, UOp, UPat, rules};

fn is_half(dt: DType) -> bool {
    matches!(dt.scalar(), DType::FLOAT16 | DType::BFLOAT16)
}

fn to_f32(u: &UOp) -> UOp {
    UOp::new(
        Ops::Cast,
        DType::FLOAT32.vec(u.dtype().count()),
        vec![u.clone()],
        Arg::None,
    )
}

fn cast_to(u: UOp, dt: DType) -> UOp {
    UOp::new(Ops::Cast, dt, vec![u], Arg::None)
}

/// An ALU op (not `Where`, which only moves bits) computed on halves: compute in float32.
fn alu_in_f32(x: &UOp) -> Option<UOp> {
    let op = x.op();
    if !op.is_alu() || op == Ops::Where || !x.src().iter().any(|s| is_half(s.dtype())) {
        return None;
    }
    let src: Vec<UOp> = x
        .src()
        .iter()
        .map(|s| {
            if is_half(s.dtype()) {
                to_f32(s)
            } else {
                s.clone()
            }
        })
        .collect();
    let out_dt = if is_half(x.dtype()) {
        DType::FLOAT32.vec(x.dtype().count())
    } else {
        x.dtype()
    };
    let r = UOp::new(op, out_dt, src, Arg::None);
    Some(if is_half(x.dtype()) {
        cast_to(r, x.dtype())
    } else {
        r
    })
}

/// A cast between a half and something other than float32 goes through float32.
fn cast_via_f32(x: &UOp) -> Option<UOp> {
    let (from, to) = (x.s(0).dtype().scalar(), x.dtype().scalar());
    let half_from = is_half(from) && to != DType::FLOAT32;
    let half_to = is_half(to) && from != DType::FLOAT32;
    if !(half_from || half_to) || from == to {
        return None;
    }
    Some(cast_to(to_f32(x.s(0)), x.dtype()))
}

/// A reduction over halves accumulates in float32.
fn reduce_in_f32(x: &UOp) -> Option<UOp> {
    if !is_half(x.dtype()) {
        return None;
    }
    let mut src = vec![to_f32(x.s(0))];
    src.extend_from_slice(&x.src()[1..]);
    Some(cast_to(
        UOp::new(Ops::Reduce, DType::FLOAT32, src, x.arg().clone()),
        x.dtype(),
    ))
}

/// The rewrite rules (for `graph_rewrite` on a kernel AST).
pub fn emulate_half_rules() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Cast).named("x") => |x| cast_via_f32(x),
            UPat::op(Ops::Reduce).named("x") => |x| reduce_in_f32(x),
            UPat::any().named("x") => |x| alu_in_f32(x),
        ])
    });
    &PM
}
