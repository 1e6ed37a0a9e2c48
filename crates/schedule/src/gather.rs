//! Gathers as indexed loads: the one-hot sum that tinygrad's API builds for `Embedding`,
//! `gather` and tensor indexing, `sum_r(where(idx == r, w[.., r, ..], 0))` over a reduce range
//! `r`, collapses to one load at the data-dependent index, `where(0 <= idx < N, w[.., idx, ..],
//! 0)` (tinygrad's reduce-collapse of an `arange` comparison). An embedding of a 30k vocabulary
//! then costs O(tokens x dim) instead of O(tokens x vocab x dim).
//!
//! The collapse is exact: at most one `r` of the range equals `idx`, so the sum is that term (the
//! reduction's identity is `-0.0`, so only a `-0.0` for the unselected terms keeps the selected
//! value's sign of zero: other zeros are left alone), and an `idx` out of the range selects
//! nothing, as before. Every load whose address depends on `r` is gated by the range check and
//! its index clamped into the range, so an out-of-range index never reads out of bounds.
//!
//! The `arange` side is what the tensor crate's `Tensor::arange` and one-hot helpers
//! build without data: a sum over binary digits, `sum_k where((r // 2^k) % 2 >= 1, 2^k, 0)`,
//! possibly cast. [`as_ramp`] recognizes it (and `r` itself) and proves it equals `r` on the
//! whole range.

use std::collections::HashMap;

use tinygrad_dtype::{ConstValue, DType};
use tinygrad_uop::{Arg, Ops, UOp};

/// `value` with every one-hot reduction collapsed into a gated load (the same node when there
/// is none).
pub fn collapse_gathers(value: &UOp) -> UOp {
    let nodes = value.toposort();
    if !nodes.iter().any(|n| n.op() == Ops::Reduce) {
        return value.clone();
    }
    let mut done: HashMap<UOp, UOp> = HashMap::new();
    for n in nodes {
        let src: Vec<UOp> = n.src().iter().map(|s| done[s].clone()).collect();
        let rebuilt = if src.as_slice() == n.src() {
            n.clone()
        } else {
            n.with_src(src)
        };
        let new = if rebuilt.op() == Ops::Reduce {
            collapse_one(&rebuilt).unwrap_or(rebuilt)
        } else {
            rebuilt
        };
        done.insert(n, new);
    }
    done[value].clone()
}

/// Whether `c` is a zero that leaves a sum's selected term exactly as it is: `-0.0` for floats
/// (the sum's identity), `0` for integers and bools.
fn is_neutral_zero(c: &UOp) -> bool {
    match c.as_const() {
        Some(ConstValue::Float(f)) => f == 0.0 && f.is_sign_negative(),
        Some(ConstValue::Int(0) | ConstValue::UInt(0) | ConstValue::Bool(false)) => true,
        _ => false,
    }
}

/// The conjuncts of a bool condition (`a & b & ...`).
fn conjuncts(c: &UOp, out: &mut Vec<UOp>) {
    if c.op() == Ops::And && c.dtype() == DType::BOOL {
        conjuncts(c.s(0), out);
        conjuncts(c.s(1), out);
    } else {
        out.push(c.clone());
    }
}

/// One `Reduce(Add)` collapsed, or `None` when it is not a one-hot sum over any of its ranges.
fn collapse_one(red: &UOp) -> Option<UOp> {
    if red.arg() != &Arg::Op(Ops::Add) {
        return None;
    }
    let ranges: Vec<UOp> = red.src()[1..].to_vec();
    // an optional cast between the reduction and the selection (sums of small ints, halves)
    let (body, cast_to) = match red.s(0) {
        c if c.op() == Ops::Cast && c.s(0).op() == Ops::Where => (c.s(0).clone(), Some(c.dtype())),
        w => (w.clone(), None),
    };
    if body.op() != Ops::Where || !is_neutral_zero(body.s(2)) {
        return None;
    }
    let mut terms = Vec::new();
    conjuncts(body.s(0), &mut terms);
    // each range picked by a conjunct `idx == ramp(r)`, idx not depending on r
    let mut picks: Vec<(UOp, UOp)> = Vec::new(); // (range, idx)
    let mut rest: Vec<UOp> = Vec::new();
    for t in terms {
        match pick(&t, &ranges, &picks) {
            Some(p) => picks.push(p),
            None => rest.push(t),
        }
    }
    if picks.is_empty() {
        return None;
    }
    // an index of one pick may not depend on another picked range (it would be substituted)
    if picks
        .iter()
        .any(|(_, i)| picks.iter().any(|(r, _)| depends_on(i, r)))
    {
        return None;
    }
    let mut value = body.s(1).clone();
    let mut rest_cond = rest.into_iter().reduce(|a, b| &a & &b);
    let mut in_range_all: Option<UOp> = None;
    for (r, idx) in &picks {
        let size = r.s(0).as_int()?;
        // `idx <= size - 1`, not `idx < size`: `size` itself may not fit the index's dtype (an
        // int8 index into 128 rows; `as_ramp` only checks that `size - 1` does)
        let last = UOp::cnst(idx.dtype(), size - 1);
        let in_range = &idx.ge(UOp::cnst(idx.dtype(), 0i64)) & &last.lt(idx).neg();
        // clamped into the range as well as gated: the index arithmetic built on it then has
        // the range's bounds (an int32 index near 2^31 would not fit a 32-bit target's index
        // constants), and an address is in bounds even before the gate
        let at = idx
            .cast(DType::INDEX)
            .maximum(UOp::index(0))
            .minimum(UOp::index(size - 1));
        value = gate_and_substitute(&value, r, &at, &in_range);
        rest_cond = rest_cond.map(|c| gate_and_substitute(&c, r, &at, &in_range));
        in_range_all = Some(match in_range_all {
            None => in_range,
            Some(a) => &a & &in_range,
        });
    }
    let cond = match rest_cond {
        Some(c) => &in_range_all.expect("a pick") & &c,
        None => in_range_all.expect("a pick"),
    };
    let selected = cond.where_(value, body.s(2).clone());
    let selected = match cast_to {
        Some(dt) => selected.cast(dt),
        None => selected,
    };
    let left: Vec<UOp> = ranges
        .iter()
        .filter(|r| !picks.iter().any(|(p, _)| p == *r))
        .cloned()
        .collect();
    if left.is_empty() {
        return Some(selected);
    }
    let mut src = vec![selected];
    src.extend(left);
    Some(UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone()))
}

/// `t` as `idx == ramp(r)` (either side) for a not yet picked range `r` of `ranges`.
fn pick(t: &UOp, ranges: &[UOp], picks: &[(UOp, UOp)]) -> Option<(UOp, UOp)> {
    if t.op() != Ops::CmpEq || !t.s(0).dtype().is_int() {
        return None;
    }
    for (ramp, idx) in [(t.s(1), t.s(0)), (t.s(0), t.s(1))] {
        if let Some(r) = as_ramp(ramp)
            && ranges.contains(&r)
            && !picks.iter().any(|(p, _)| *p == r)
            && !depends_on(idx, &r)
        {
            return Some((r, idx.clone()));
        }
    }
    None
}

fn depends_on(u: &UOp, r: &UOp) -> bool {
    u.toposort().contains(r)
}

/// `v` with `r` replaced by `at`, and every load whose address used `r` gated by `in_range`, so
/// a load is only made at an index inside the range.
fn gate_and_substitute(v: &UOp, r: &UOp, at: &UOp, in_range: &UOp) -> UOp {
    let mut map: HashMap<UOp, UOp> = HashMap::new();
    for n in v.toposort() {
        if n.op() == Ops::Index && n.src().len() >= 2 && depends_on(n.s(1), r) {
            let gate = match n.src().get(2) {
                Some(g) => g & in_range,
                None => in_range.clone(),
            };
            map.insert(
                n.clone(),
                n.with_src(vec![n.s(0).clone(), n.s(1).clone(), gate]),
            );
        }
    }
    let gated = if map.is_empty() {
        v.clone()
    } else {
        v.substitute(&map)
    };
    gated.substitute(&HashMap::from([(r.clone(), at.clone())]))
}

/// The range `r` when `e` equals `r` at every point of `r`'s range (as an integer of `e`'s
/// dtype): `r` itself, a cast of such an expression to an integer type that holds every value,
/// or the binary-digit sum of `arange`.
pub fn as_ramp(e: &UOp) -> Option<UOp> {
    match e.op() {
        Ops::Range => Some(e.clone()),
        Ops::Cast if e.dtype().is_int() && e.s(0).dtype().is_int() => {
            let r = as_ramp(e.s(0))?;
            let size = r.s(0).as_int()?;
            fits(e.dtype(), size - 1).then_some(r)
        }
        Ops::Add => digit_sum(e),
        _ => None,
    }
}

fn fits(dt: DType, v: i64) -> bool {
    let (lo, hi) = (dt.min(), dt.max());
    let as_i128 = |c: ConstValue| match c {
        ConstValue::Int(i) => i as i128,
        ConstValue::UInt(u) => u as i128,
        ConstValue::Bool(b) => b as i128,
        ConstValue::Float(f) => f as i128,
    };
    dt == DType::INDEX || (as_i128(lo) <= 0 && v as i128 <= as_i128(hi))
}

/// `sum_k where(digit_k(r) >= 1, 2^k, 0)` over every k below `bits`, with `2^bits >= size(r)`:
/// equal to `r` on its range. `digit_k(r)` is `(r // 2^k) % 2`, or `r // 2^k` for the top digit
/// when `r < 2^(k+1)`.
fn digit_sum(e: &UOp) -> Option<UOp> {
    let mut terms = Vec::new();
    let mut stack = vec![e.clone()];
    while let Some(t) = stack.pop() {
        if t.op() == Ops::Add {
            stack.push(t.s(0).clone());
            stack.push(t.s(1).clone());
        } else {
            terms.push(t);
        }
    }
    let mut range: Option<UOp> = None;
    let mut bits = Vec::new();
    for t in &terms {
        let (r, k) = digit_term(t)?;
        match &range {
            None => range = Some(r),
            Some(r0) if *r0 == r => {}
            Some(_) => return None,
        }
        bits.push(k);
    }
    let r = range?;
    let size = r.s(0).as_int()?;
    bits.sort_unstable();
    let n = bits.len() as u32;
    let complete = bits.iter().enumerate().all(|(i, &k)| i as u32 == k);
    if !complete || n >= 63 || (1i64 << n) < size {
        return None;
    }
    // a top digit without `% 2` is only a digit when r < 2^(k+1)
    for t in &terms {
        if let Some((_, k, false)) = digit_parts(t)
            && size > (1i64 << (k + 1))
        {
            return None;
        }
    }
    fits(e.dtype(), size - 1).then_some(r)
}

fn digit_term(t: &UOp) -> Option<(UOp, u32)> {
    digit_parts(t).map(|(r, k, _)| (r, k))
}

/// `where(d >= 1, 2^k, 0)` with `d` digit `k` of a range: (range, k, whether `d` has `% 2`).
fn digit_parts(t: &UOp) -> Option<(UOp, u32, bool)> {
    if t.op() != Ops::Where || !is_int_const(t.s(2), 0) {
        return None;
    }
    let w = t.s(1).as_int()?;
    if w <= 0 || w & (w - 1) != 0 {
        return None;
    }
    let k = w.trailing_zeros();
    // `d >= 1` as `(d < 1) != true`
    let c = t.s(0);
    if c.op() != Ops::CmpNe || c.s(1).as_const() != Some(ConstValue::Bool(true)) {
        return None;
    }
    let lt = c.s(0);
    if lt.op() != Ops::CmpLt || !is_int_const(lt.s(1), 1) {
        return None;
    }
    let (q, has_mod) = match lt.s(0) {
        m if m.op() == Ops::Mod && is_int_const(m.s(1), 2) => (m.s(0).clone(), true),
        d => (d.clone(), false),
    };
    let r = match q.op() {
        Ops::Range if k == 0 => q,
        Ops::IDiv if q.s(0).op() == Ops::Range && q.s(1).as_int() == Some(1i64 << k) => {
            q.s(0).clone()
        }
        _ => return None,
    };
    Some((r, k, has_mod))
}

fn is_int_const(u: &UOp, v: i64) -> bool {
    u.op() == Ops::Const && u.as_int() == Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rangeify::global_for;
    use tinygrad_uop::{AxisKind, graph_rewrite, sym};

    /// `sum_r where(idx == cast(r), table[r], -0.0)` over a range of `size`, with a constant
    /// `idx` of dtype `dt`, collapsed and constant-folded.
    fn collapsed_pick(dt: DType, size: i64, idx: i64) -> UOp {
        let r = UOp::range(size, 0, AxisKind::Reduce);
        let g = global_for(DType::FLOAT32, 1);
        let load = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![UOp::new(
                Ops::Index,
                g.dtype(),
                vec![g, r.clone()],
                Arg::None,
            )],
            Arg::None,
        );
        let hit = UOp::cnst(dt, idx).eq_(r.cast(dt));
        let body = hit.where_(load, UOp::cnst(DType::FLOAT32, -0.0));
        let red = UOp::new(
            Ops::Reduce,
            DType::FLOAT32,
            vec![body, r],
            Arg::Op(Ops::Add),
        );
        let out = collapse_gathers(&red);
        assert!(
            !out.toposort().iter().any(|u| u.op() == Ops::Reduce),
            "not collapsed"
        );
        graph_rewrite(&out, sym(), &mut (), false)
    }

    fn selects(u: &UOp) -> bool {
        u.toposort().iter().any(|n| n.op() == Ops::Load)
    }

    #[test]
    fn the_range_check_fits_the_index_dtype() {
        // an int8 index into a range of 128: the bound must be `<= 127`, never the constant 128
        // (which int8 wraps to -128, selecting nothing)
        assert!(selects(&collapsed_pick(DType::INT8, 128, 5)));
        assert!(selects(&collapsed_pick(DType::INT8, 128, 127)));
        assert!(selects(&collapsed_pick(DType::INT32, 10, 0)));
        // outside the range: nothing selected (the sum of -0.0s)
        for (dt, size, idx) in [
            (DType::INT8, 128, -1),
            (DType::INT32, 10, 10),
            (DType::INT32, 10, -3),
        ] {
            let out = collapsed_pick(dt, size, idx);
            assert!(
                !selects(&out),
                "{dt} {idx} of {size} selected something: {}",
                out.pretty()
            );
        }
    }
}
