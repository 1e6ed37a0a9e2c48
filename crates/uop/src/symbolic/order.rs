//! The canonical order of nodes ([`cmp_uop`]).

use std::cmp::Ordering;

use tinygrad_dtype::ConstValue;

use crate::{Arg, Ops, UOp};

fn op_rank(op: Ops) -> u16 {
    match op {
        Ops::DefineVar => 0,
        Ops::Special => 1,
        Ops::Range => 2,
        Ops::Const => 1000,
        op => 10 + op as u16,
    }
}

fn arg_cmp(a: &Arg, b: &Arg) -> Ordering {
    match (a, b) {
        (Arg::Var(n1, l1, h1), Arg::Var(n2, l2, h2)) => {
            n1.cmp(n2).then(l1.cmp(l2)).then(h1.cmp(h2))
        }
        (Arg::Range(i1, k1), Arg::Range(i2, k2)) => i1.cmp(i2).then(k1.cmp(k2)),
        (Arg::Str(x), Arg::Str(y)) => x.cmp(y),
        (Arg::Int(x), Arg::Int(y)) => x.cmp(y),
        (Arg::Const(x), Arg::Const(y)) => match (x, y) {
            (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => {
                x.as_f64().total_cmp(&y.as_f64())
            }
            (ConstValue::UInt(p), ConstValue::UInt(q)) => p.cmp(q),
            _ => x.as_i64().cmp(&y.as_i64()),
        },
        _ => Ordering::Equal,
    }
}

/// The canonical order of nodes used to sort the operands of commutative ops and the terms of
/// sums: variables first (by name), then special ids and ranges, then other ops (by op, then
/// argument, dtype and sources, compared lexicographically), constants last. A total order;
/// iterative, so deep graphs are fine.
pub fn cmp_uop(a: &UOp, b: &UOp) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let mut stack: Vec<(&UOp, &UOp)> = vec![(a, b)];
    while let Some((x, y)) = stack.pop() {
        if x == y {
            continue;
        }
        let c = op_rank(x.op())
            .cmp(&op_rank(y.op()))
            .then_with(|| arg_cmp(x.arg(), y.arg()))
            .then_with(|| x.dtype().cmp(&y.dtype()))
            .then(x.src().len().cmp(&y.src().len()));
        if c != Ordering::Equal {
            return c;
        }
        for (p, q) in x.src().iter().zip(y.src()).rev() {
            stack.push((p, q));
        }
    }
    a.structural_hash().cmp(&b.structural_hash())
}
