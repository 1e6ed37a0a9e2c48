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

use std::cmp::Ordering;
use std::sync::LazyLock;

use tinygrad_dtype::{ConstValue, DType, Scalar, can_lossless_cast};

use crate::divmod::{Lin, fold_divmod, gcd};
use crate::{Arg, Ops, PatternMatcher, UOp, UPat, exec_alu, graph_rewrite, rules};

// ---------------------------------------------------------------------------------------------
// bounds

/// Whether bounds are tracked for `dt`: its values fit in `i64` (bool, index, int8..int64,
/// uint8..uint32).
pub fn is_bounded(dt: DType) -> bool {
    !dt.is_ptr() && (dt.is_bool() || (dt.is_int() && dt.kind() != Scalar::UInt64))
}

/// Whether `dt` is an integer dtype whose values fit in `i64` (index, int8..int64,
/// uint8..uint32): the dtypes the integer folding rules work on.
pub fn is_sym_int(dt: DType) -> bool {
    is_bounded(dt) && !dt.is_bool()
}

/// The range of values of `dt` as `i64` (`i64::MIN..=i64::MAX` for unbounded dtypes).
pub fn dtype_range(dt: DType) -> (i64, i64) {
    if !is_bounded(dt) {
        return (i64::MIN, i64::MAX);
    }
    if dt.is_bool() {
        return (0, 1);
    }
    let s = dt.scalar();
    (s.min().as_i64(), s.max().as_i64())
}

/// Whether `lo..=hi` lies within the range of `dt`.
pub(crate) fn fits(dt: DType, lo: i128, hi: i128) -> bool {
    let (a, b) = dtype_range(dt);
    lo >= a as i128 && hi <= b as i128
}

impl UOp {
    /// The smallest value this node can take (see the module docs; `i64::MIN` if unknown).
    pub fn vmin(&self) -> i64 {
        self.bounds().0
    }

    /// The largest value this node can take (see the module docs; `i64::MAX` if unknown).
    pub fn vmax(&self) -> i64 {
        self.bounds().1
    }

    /// `(vmin, vmax)`, computed once per node (iteratively, so deep graphs are fine).
    pub fn bounds(&self) -> (i64, i64) {
        if let Some(b) = self.cache().bounds.get() {
            return *b;
        }
        if self.src().iter().all(|s| s.cache().bounds.get().is_some()) {
            let b = compute_bounds(self);
            let _ = self.cache().bounds.set(b);
            return b;
        }
        for n in self.toposort_filtered(|n| n.cache().bounds.get().is_none()) {
            if n.cache().bounds.get().is_none() {
                let b = compute_bounds(&n);
                let _ = n.cache().bounds.set(b);
            }
        }
        self.cache()
            .bounds
            .get()
            .copied()
            .unwrap_or((i64::MIN, i64::MAX))
    }
}

/// `u`'s bounds widened to `i128`.
pub(crate) fn b128(u: &UOp) -> (i128, i128) {
    let (a, b) = u.bounds();
    (a as i128, b as i128)
}

fn min_max(v: &[i128]) -> (i128, i128) {
    let lo = v.iter().copied().min().unwrap_or(0);
    let hi = v.iter().copied().max().unwrap_or(0);
    (lo, hi)
}

/// Truncating division on `i128` with `x / 0 == 0`.
pub(crate) fn cdiv(x: i128, y: i128) -> i128 {
    if y == 0 { 0 } else { x / y }
}

/// Truncating remainder on `i128` with `x % 0 == 0`.
pub(crate) fn cmod(x: i128, y: i128) -> i128 {
    if y == 0 { 0 } else { x % y }
}

fn compute_bounds(u: &UOp) -> (i64, i64) {
    let dt = u.dtype();
    let full = dtype_range(dt);
    if !is_bounded(dt) {
        return full;
    }
    let src_ok = u.src().iter().all(|s| is_bounded(s.dtype()));
    let (lo, hi) = match interval(u, src_ok) {
        Some(iv) => iv,
        None => return full,
    };
    if lo > hi || !fits(dt, lo, hi) {
        return full;
    }
    (lo as i64, hi as i64)
}

/// The interval of `u` from its sources' bounds, before checking it against the dtype.
fn interval(u: &UOp, src_ok: bool) -> Option<(i128, i128)> {
    let s = |i: usize| b128(u.s(i));
    let op = u.op();
    if op.alu_arity().is_some_and(|n| n != u.src().len()) {
        return None; // malformed: no bounds beyond the dtype's
    }
    Some(match op {
        Ops::Const => {
            let v = u.as_int()? as i128;
            (v, v)
        }
        Ops::DefineVar => match u.arg() {
            Arg::Var(_, lo, hi) => (*lo as i128, *hi as i128),
            _ => return None,
        },
        Ops::Bind => b128(u.src().first()?),
        Ops::Range | Ops::Special => {
            let hi = u.src().first().map(|n| n.vmax() as i128 - 1).unwrap_or(0);
            (0, hi.max(0))
        }
        Ops::Cast => {
            let src = u.src().first()?;
            if !is_bounded(src.dtype()) {
                return None;
            }
            let (lo, hi) = b128(src);
            if u.dtype().is_bool() {
                if lo > 0 || hi < 0 {
                    (1, 1)
                } else if lo == 0 && hi == 0 {
                    (0, 0)
                } else {
                    (0, 1)
                }
            } else {
                (lo, hi)
            }
        }
        Ops::Trunc | Ops::Round | Ops::Noop if src_ok && !u.src().is_empty() => s(0),
        Ops::Where => {
            let (cl, ch) = s(0);
            let (t, f) = (s(1), s(2));
            if !is_bounded(u.s(1).dtype()) || !is_bounded(u.s(2).dtype()) {
                return None;
            }
            if cl == 1 {
                t
            } else if ch == 0 {
                f
            } else {
                (t.0.min(f.0), t.1.max(f.1))
            }
        }
        Ops::CmpLt | Ops::CmpNe | Ops::CmpEq => {
            if !src_ok {
                return Some((0, 1));
            }
            let ((al, ah), (bl, bh)) = (s(0), s(1));
            let r = match op {
                Ops::CmpLt if ah < bl => (1, 1),
                Ops::CmpLt if al >= bh => (0, 0),
                Ops::CmpNe | Ops::CmpEq if ah < bl || al > bh => (1, 1),
                Ops::CmpNe | Ops::CmpEq if al == ah && bl == bh && al == bl => (0, 0),
                _ => (0, 1),
            };
            if op == Ops::CmpEq {
                (1 - r.1, 1 - r.0)
            } else {
                r
            }
        }
        _ if !src_ok => return None,
        Ops::Add => {
            let ((al, ah), (bl, bh)) = (s(0), s(1));
            (al + bl, ah + bh)
        }
        Ops::Sub => {
            let ((al, ah), (bl, bh)) = (s(0), s(1));
            (al - bh, ah - bl)
        }
        Ops::Neg => {
            let (al, ah) = s(0);
            if u.dtype().is_bool() {
                (1 - ah, 1 - al)
            } else {
                (-ah, -al)
            }
        }
        Ops::Mul => {
            let ((al, ah), (bl, bh)) = (s(0), s(1));
            min_max(&[al * bl, al * bh, ah * bl, ah * bh])
        }
        Ops::MulAcc => {
            let ((al, ah), (bl, bh), (cl, ch)) = (s(0), s(1), s(2));
            let (pl, ph) = min_max(&[al * bl, al * bh, ah * bl, ah * bh]);
            (pl + cl, ph + ch)
        }
        Ops::Max => {
            let ((al, ah), (bl, bh)) = (s(0), s(1));
            (al.max(bl), ah.max(bh))
        }
        Ops::IDiv | Ops::FDiv => div_interval(s(0), s(1)),
        Ops::Mod => mod_interval(s(0), s(1)),
        Ops::And | Ops::Or | Ops::Xor => bitwise_interval(op, u.dtype(), s(0), s(1))?,
        Ops::Shl | Ops::Shr => {
            let (al, ah) = s(0);
            let (kl, kh) = s(1);
            let bits = u.dtype().kind().bitsize() as i128;
            if kl != kh || kl < 0 || kl >= bits.min(63) {
                return None;
            }
            if op == Ops::Shl {
                (al << kl, ah << kl)
            } else {
                (al >> kl, ah >> kl)
            }
        }
        _ => return None,
    })
}

fn div_interval((xl, xh): (i128, i128), (yl, yh): (i128, i128)) -> (i128, i128) {
    // Truncating division is monotone in x for fixed y and in y on each side of zero, so the
    // extremes are at the corners of each sign-constant part of y's range (plus 0 for y == 0).
    let mut vals = Vec::with_capacity(9);
    for y in [yl, -1, 1, yh] {
        if y != 0 && yl <= y && y <= yh {
            vals.push(cdiv(xl, y));
            vals.push(cdiv(xh, y));
        }
    }
    if yl <= 0 && 0 <= yh {
        vals.push(0);
    }
    min_max(&vals)
}

fn mod_interval((xl, xh): (i128, i128), (yl, yh): (i128, i128)) -> (i128, i128) {
    // |x % y| <= min(|x|, |y| - 1), with the sign of x (and x % 0 == 0).
    let m = yl.abs().max(yh.abs()) - 1;
    let m = m.max(0);
    let ymin_abs = if yl <= 0 && 0 <= yh {
        0
    } else {
        yl.abs().min(yh.abs())
    };
    if xl >= 0 && xh < ymin_abs {
        return (xl, xh); // x % y == x
    }
    if xh <= 0 && -xl < ymin_abs {
        return (xl, xh);
    }
    let lo = if xl < 0 { xl.max(-m) } else { 0 };
    let hi = if xh > 0 { xh.min(m) } else { 0 };
    (lo, hi)
}

fn bitwise_interval(
    op: Ops,
    dt: DType,
    (al, ah): (i128, i128),
    (bl, bh): (i128, i128),
) -> Option<(i128, i128)> {
    if dt.is_bool() {
        return Some(match op {
            Ops::And => (al & bl, ah & bh),
            Ops::Or => (al | bl, ah | bh),
            _ if al == ah && bl == bh => (al ^ bl, al ^ bl),
            _ => (0, 1),
        });
    }
    let pow2 = |v: i128| -> i128 {
        let mut p = 1i128;
        while p <= v {
            p <<= 1;
        }
        p - 1
    };
    match op {
        Ops::And if al >= 0 && bl >= 0 => Some((0, ah.min(bh))),
        Ops::And if al >= 0 => Some((0, ah)),
        Ops::And if bl >= 0 => Some((0, bh)),
        Ops::Or if al >= 0 && bl >= 0 => Some((al.max(bl), pow2(ah.max(bh)))),
        Ops::Xor if al >= 0 && bl >= 0 => Some((0, pow2(ah.max(bh)))),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// canonical order

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

// ---------------------------------------------------------------------------------------------
// normal forms of sums and products

/// `u` as `(base, coefficient)`: `base*c` gives `(base, c)`, anything else `(u, 1)`.
pub(crate) fn split_term(u: &UOp) -> (UOp, i64) {
    if u.op() == Ops::Mul {
        if let Some(c) = u.s(1).as_int() {
            return (u.s(0).clone(), c);
        }
        if let Some(c) = u.s(0).as_int() {
            return (u.s(1).clone(), c);
        }
    }
    (u.clone(), 1)
}

/// Wraps `v` to the values of integer dtype `dt`.
pub(crate) fn wrap(dt: DType, v: i64) -> i64 {
    ConstValue::Int(v).cast(dt.scalar()).as_i64()
}

fn normalize_sum(root: &UOp) -> Option<UOp> {
    let dt = root.dtype();
    let mut lin = Lin::of(root);
    lin.k = wrap(dt, lin.k);
    lin.canonicalize(dt);
    recombine_divmod(&mut lin, dt);
    fold_unrolled_divs(&mut lin, dt);
    if lin.is_built(root, dt) {
        return None;
    }
    Some(lin.build(dt))
}

/// `k*(x%c) + k*c*(x//c) -> k*x` and `k*(x%c) + k*c*((x//c)%m) -> k*(x%(c*m))` (both valid
/// for any sign of `x` with truncating division: every remainder has the sign of `x`). The
/// second folds the binary digits of a ramp (`Tensor::nn_ramp`) back into its index.
fn recombine_divmod(lin: &mut Lin, dt: DType) {
    if !lin.terms.iter().any(|(b, _)| b.op() == Ops::Mod) {
        return;
    }
    loop {
        let mut found = None;
        'outer: for (i, (m, k1)) in lin.terms.iter().enumerate() {
            if m.op() != Ops::Mod {
                continue;
            }
            let Some(c) = m.s(1).as_int().filter(|c| *c != 0) else {
                continue;
            };
            for (j, (d, k2)) in lin.terms.iter().enumerate() {
                if d.op() == Ops::IDiv
                    && d.s(0) == m.s(0)
                    && d.s(1) == m.s(1)
                    && k1.checked_mul(c).map(|v| wrap(dt, v)) == Some(*k2)
                {
                    found = Some((i, j));
                    break 'outer;
                }
            }
        }
        // (x%c) + c*((x//c)%m) -> x%(c*m)
        let mut digit = None;
        if found.is_none() {
            'digits: for (i, (m, k1)) in lin.terms.iter().enumerate() {
                if m.op() != Ops::Mod {
                    continue;
                }
                let Some(c) = m.s(1).as_int().filter(|c| *c > 0) else {
                    continue;
                };
                for (j, (d, k2)) in lin.terms.iter().enumerate() {
                    let Some(mm) = (d.op() == Ops::Mod && d.s(0).op() == Ops::IDiv)
                        .then(|| d.s(1).as_int())
                        .flatten()
                        .filter(|v| *v > 0)
                    else {
                        continue;
                    };
                    let inner = d.s(0);
                    if inner.s(0) == m.s(0)
                        && inner.s(1) == m.s(1)
                        && k1.checked_mul(c).map(|v| wrap(dt, v)) == Some(*k2)
                        && let Some(cm) = c.checked_mul(mm)
                        // (the merged modulus must be a value of dt: no wrapped constant)
                        && fits(dt, cm as i128, cm as i128)
                    {
                        digit = Some((i, j, cm));
                        break 'digits;
                    }
                }
            }
        }
        let (i, j, merged) = match (found, digit) {
            (Some((i, j)), _) => (i, j, None),
            (None, Some((i, j, cm))) => (i, j, Some(cm)),
            (None, None) => return,
        };
        let (m, k1) = lin.terms[i].clone();
        let x = m.s(0).clone();
        let (a, b) = (i.max(j), i.min(j));
        lin.terms.remove(a);
        lin.terms.remove(b);
        match merged {
            None => lin.add_scaled(&x, k1),
            Some(cm) => lin.add_scaled(&x.modulo(cm), k1),
        }
        lin.k = wrap(dt, lin.k);
        lin.canonicalize(dt);
    }
}

/// `where(y < k, t, f)` with integer constants `t`, `f` and `y` in `[lo, hi]` with
/// `lo < k <= hi < 2k - lo`: `[y >= k]` is `(y - lo) // (k - lo)`, so the select is
/// `t + cast((y - lo) // (k - lo)) * (f - t)` — arithmetic, so that sums of such digits (a ramp
/// built from padded constants) fold like index arithmetic.
fn fold_where_bit(w: &UOp) -> Option<UOp> {
    let dt = w.dtype();
    if !is_sym_int(dt) || dt == DType::INDEX || dt.count() != 1 {
        return None;
    }
    let (c, t, f) = (w.s(0), w.s(1), w.s(2));
    let (t, f) = (t.as_int()?, f.as_int()?);
    if c.op() != Ops::CmpLt {
        return None;
    }
    let (y, k) = (c.s(0), c.s(1).as_int()?);
    if !is_sym_int(y.dtype()) || y.dtype().count() != 1 {
        return None;
    }
    let (lo, hi) = b128(y);
    let (k128, span) = (k as i128, k as i128 - lo);
    // (y - lo must not wrap in y's dtype either)
    if !(lo < k128 && k128 <= hi && hi - lo < 2 * span && fits(y.dtype(), 0, hi - lo)) {
        return None;
    }
    let span = span as i64;
    let d = if lo == 0 { y.clone() } else { y - lo as i64 };
    let d = if span == 1 { d } else { d.idiv(span) };
    // f - t must be a value of dt (else t + bit*(f - t) wraps where the select did not)
    let diff = f as i128 - t as i128;
    if !fits(dt, diff, diff) {
        return None;
    }
    let diff = diff as i64;
    Some(d.cast(dt) * UOp::cnst(dt, diff) + UOp::cnst(dt, t))
}

/// An integer `cast(x) * c`, `cast(x) + c` or `cast(x) + cast(y)` (casts from the same integer
/// dtype) as one cast of the arithmetic done in the source dtype, when no intermediate leaves
/// either dtype's range (so neither side wraps).
fn fold_cast_arith(root: &UOp) -> Option<UOp> {
    let dt = root.dtype();
    if !is_sym_int(dt) || dt == DType::INDEX || dt.count() != 1 {
        return None;
    }
    let (a, b) = (root.s(0), root.s(1));
    let (cast, other) = if a.op() == Ops::Cast { (a, b) } else { (b, a) };
    if cast.op() != Ops::Cast {
        return None;
    }
    let x = cast.s(0);
    let sdt = x.dtype();
    if !is_sym_int(sdt) || sdt.count() != 1 {
        return None;
    }
    let y = match other.op() {
        // (a constant that is no value of the source dtype would wrap there)
        Ops::Const => {
            let c = other.as_int()?;
            if !fits(sdt, c as i128, c as i128) {
                return None;
            }
            UOp::cnst(sdt, c)
        }
        Ops::Cast if other.s(0).dtype() == sdt => other.s(0).clone(),
        _ => return None,
    };
    let ((xl, xh), (yl, yh)) = (b128(x), b128(&y));
    let (lo, hi) = match root.op() {
        Ops::Add => (xl + yl, xh + yh),
        _ if y.op() == Ops::Const => min_max(&[xl * yl, xh * yl]),
        _ => return None,
    };
    // the cast must not have changed x's values either
    (fits(sdt, lo, hi) && fits(dt, lo, hi) && fits(dt, xl, xh) && fits(dt, yl, yh))
        .then(|| UOp::new(root.op(), sdt, vec![x.clone(), y], Arg::None).cast(dt))
}

/// Hermite's identity on unrolled aranges: `sum_{j<d} (u+k0+j)//d == u+k0` when every numerator
/// is non-negative. Terms whose numerator is provably in `0..d` may already have folded to 0.
fn fold_unrolled_divs(lin: &mut Lin, dt: DType) {
    if lin
        .terms
        .iter()
        .filter(|(b, _)| b.op() == Ops::IDiv)
        .count()
        < 2
    {
        return;
    }
    let mut i = 0;
    while i < lin.terms.len() {
        let (t, f) = &lin.terms[i];
        let (t, f) = (t.clone(), *f);
        let Some(d) = (t.op() == Ops::IDiv).then(|| t.s(1).as_int()).flatten() else {
            i += 1;
            continue;
        };
        if !(2..=4096).contains(&d) {
            i += 1;
            continue;
        }
        let (u, _) = Lin::pop_const(t.s(0));
        // members: (index in terms, offset)
        let mut members: Vec<(usize, i64)> = Vec::new();
        for (j, (b, g)) in lin.terms.iter().enumerate() {
            if *g == f && b.op() == Ops::IDiv && b.s(1) == t.s(1) {
                let (u2, off) = Lin::pop_const(b.s(0));
                if u2 == u {
                    members.push((j, off));
                }
            }
        }
        let offs: Vec<i64> = members.iter().map(|m| m.1).collect();
        let (mn, mx) = (
            *offs.iter().min().unwrap_or(&0),
            *offs.iter().max().unwrap_or(&0),
        );
        let (ul, uh) = b128(&u);
        let mut done = false;
        if members.len() >= 2 && mx - mn < d {
            for k0 in (mx - d + 1)..=mn {
                if ul + (k0 as i128) < 0 {
                    continue;
                }
                let ok = (k0..k0 + d).all(|j| {
                    offs.contains(&j) || (ul + j as i128 >= 0 && uh + (j as i128) < d as i128)
                });
                if ok {
                    let mut idx: Vec<usize> = members.iter().map(|m| m.0).collect();
                    idx.sort_unstable();
                    for j in idx.into_iter().rev() {
                        lin.terms.remove(j);
                    }
                    lin.add_scaled(&u, f);
                    lin.k = wrap(dt, lin.k.wrapping_add(k0.wrapping_mul(f)));
                    lin.canonicalize(dt);
                    done = true;
                    break;
                }
            }
        }
        if done {
            i = 0;
        } else {
            i += 1;
        }
    }
}

/// Products with more factors than this are left as they are: flattening a product that shares
/// sub-products (repeated squaring, `x^(2^k)`) would build a chain of `2^k` factors.
const MAX_PRODUCT_FACTORS: usize = 64;

fn normalize_mul(root: &UOp) -> Option<UOp> {
    let dt = root.dtype();
    let mut factors: Vec<UOp> = Vec::new();
    let mut c: i64 = 1;
    let mut stack = vec![root];
    while let Some(u) = stack.pop() {
        if factors.len() + stack.len() > MAX_PRODUCT_FACTORS {
            return None;
        }
        if u.op() == Ops::Mul && u.dtype() == dt {
            stack.push(u.s(1));
            stack.push(u.s(0));
        } else if let Some(v) = u.as_int() {
            c = c.wrapping_mul(v);
        } else {
            factors.push(u.clone());
        }
    }
    let c = wrap(dt, c);
    if c == 0 || factors.is_empty() {
        return Some(UOp::cnst(dt, c));
    }
    if c != 1 && factors.len() == 1 && factors[0].op() == Ops::Add && factors[0].dtype() == dt {
        let mut lin = Lin::default();
        lin.add_scaled(&factors[0], c);
        lin.k = wrap(dt, lin.k);
        lin.canonicalize(dt);
        return Some(lin.build(dt));
    }
    factors.sort_by(cmp_uop);
    if is_built_product(root, &factors, c) {
        return None;
    }
    let mut out = factors[0].clone();
    for f in &factors[1..] {
        out = UOp::new(Ops::Mul, dt, vec![out, f.clone()], Arg::None);
    }
    if c != 1 {
        out = UOp::new(Ops::Mul, dt, vec![out, UOp::cnst(dt, c)], Arg::None);
    }
    (out != *root).then_some(out)
}

/// Whether `root` is the left-leaning product of `factors` (in order) times `c` (if not 1).
fn is_built_product(root: &UOp, factors: &[UOp], c: i64) -> bool {
    let dt = root.dtype();
    let mut cur = root;
    if c != 1 {
        if cur.op() != Ops::Mul || cur.s(1).op() != Ops::Const || cur.s(1).as_int() != Some(c) {
            return false;
        }
        cur = cur.s(0);
    }
    for f in factors[1..].iter().rev() {
        if cur.op() != Ops::Mul || cur.dtype() != dt || cur.s(1) != f {
            return false;
        }
        cur = cur.s(0);
    }
    *cur == factors[0]
}

/// Puts the sources of a binary commutative op in canonical order.
fn commute(root: &UOp) -> Option<UOp> {
    if root.src().len() != 2 || cmp_uop(root.s(1), root.s(0)) != Ordering::Less {
        return None;
    }
    Some(root.with_src(vec![root.s(1).clone(), root.s(0).clone()]))
}

// ---------------------------------------------------------------------------------------------
// rule helpers

fn int_dt(u: &UOp) -> bool {
    u.dtype().is_int() && u.dtype().count() == 1
}

fn not_float(u: &UOp) -> bool {
    !u.dtype().is_float()
}

fn const_fold(a: &UOp) -> Option<UOp> {
    if a.src().is_empty() || !a.src().iter().all(|s| s.op() == Ops::Const) {
        return None;
    }
    let vals: Vec<ConstValue> = a
        .src()
        .iter()
        .map(|s| s.arg().as_const().unwrap_or(ConstValue::Int(0)))
        .collect();
    if a.dtype().kind() == Scalar::Void || a.dtype().is_ptr() {
        return None;
    }
    Some(UOp::cnst(a.dtype(), exec_alu(a.op(), a.dtype(), &vals)))
}

fn fold_bitcast(root: &UOp, c: &UOp) -> Option<UOp> {
    let (from, to) = (c.dtype(), root.dtype());
    if from.count() != 1
        || to.count() != 1
        || from.itemsize() != to.itemsize()
        || from.is_ptr()
        || to.is_ptr()
    {
        return None;
    }
    if from.kind() == Scalar::Void || to.kind() == Scalar::Void || from.is_bool() || to.is_bool() {
        return None;
    }
    let bytes = c.arg().as_const()?.to_le_bytes(from);
    Some(UOp::cnst(to, ConstValue::from_le_bytes(to, &bytes)))
}

/// `x.cast(a).cast(b) -> x` when `b == x.dtype` and `a` holds every value of `b`.
fn fold_double_cast(x: &UOp, a: &UOp, b: &UOp) -> Option<UOp> {
    (x.dtype() == b.dtype() && can_lossless_cast(b.dtype(), a.dtype())).then(|| x.clone())
}

fn is_not(u: &UOp) -> Option<&UOp> {
    (u.op() == Ops::CmpNe
        && u.dtype().is_bool()
        && u.s(1).as_const() == Some(ConstValue::Bool(true)))
    .then(|| u.s(0))
}

/// `!x` for a bool `x`, folding double negation.
pub(crate) fn logical_not(x: &UOp) -> UOp {
    match is_not(x) {
        Some(inner) => inner.clone(),
        None => x.ne(true),
    }
}

/// Folds `op` over two `where`s with the same condition when a pair of branches is constant.
fn fold_where_pair(alu: &UOp) -> Option<UOp> {
    let (a, b) = (alu.s(0), alu.s(1));
    if a.op() != Ops::Where || b.op() != Ops::Where || a.s(0) != b.s(0) {
        return None;
    }
    let (t, f, tt, ff) = (a.s(1), a.s(2), b.s(1), b.s(2));
    let both_const = |p: &UOp, q: &UOp| p.op() == Ops::Const && q.op() == Ops::Const;
    if !both_const(t, tt) && !both_const(f, ff) {
        return None;
    }
    let t2 = UOp::new(
        alu.op(),
        alu.dtype(),
        vec![t.clone(), tt.clone()],
        Arg::None,
    );
    let f2 = UOp::new(
        alu.op(),
        alu.dtype(),
        vec![f.clone(), ff.clone()],
        Arg::None,
    );
    Some(a.s(0).where_(t2, f2))
}

fn fold_max(x: &UOp, y: &UOp) -> Option<UOp> {
    if !is_bounded(x.dtype()) || x.dtype().count() != 1 {
        return None;
    }
    if x.vmin() >= y.vmax() {
        Some(x.clone())
    } else if x.vmax() <= y.vmin() {
        Some(y.clone())
    } else {
        None
    }
}

/// Folds an ALU node or a variable whose bounds are a single value into that constant.
fn fold_single_value(x: &UOp) -> Option<UOp> {
    if !is_bounded(x.dtype()) || x.dtype().count() != 1 || x.op() == Ops::Const {
        return None;
    }
    let (lo, hi) = x.bounds();
    (lo == hi).then(|| UOp::cnst(x.dtype(), lo))
}

/// Comparison `x < y` folding for integer operands.
fn fold_lt(root: &UOp) -> Option<UOp> {
    let (x, y) = (root.s(0), root.s(1));
    let dt = x.dtype();
    if !is_sym_int(dt) || dt.count() != 1 || y.dtype() != dt {
        return None;
    }
    // -x < -y  ->  y < x
    if let (Some((a, -1)), Some((b, -1))) = (neg_of(x), neg_of(y))
        && a.vmin() > dtype_range(dt).0
        && b.vmin() > dtype_range(dt).0
    {
        return Some(b.lt(a));
    }
    let c = y.as_int()? as i128;
    // (x//d) < c for d > 0
    if x.op() == Ops::IDiv
        && let Some(d) = x.s(1).as_int().filter(|d| *d > 0)
    {
        let d = d as i128;
        let bound = if c > 0 { c * d } else { c * d - (d - 1) };
        if fits(dt, bound, bound) {
            return Some(x.s(0).lt(UOp::cnst(dt, bound as i64)));
        }
    }
    let lin = Lin::of(x);
    if !lin.fits(dt) || lin.terms.is_empty() {
        return None;
    }
    // x + k < c  ->  x < c - k
    if lin.k != 0 {
        let c2 = c - lin.k as i128;
        if !fits(dt, c2, c2) {
            return None;
        }
        let rest = Lin {
            terms: lin.terms.clone(),
            k: 0,
        };
        return Some(rest.build(dt).lt(UOp::cnst(dt, c2 as i64)));
    }
    // factor out the gcd g of the non-unit coefficients: g*A + U < c with 0 <= U < g
    let (unit, other): (Vec<_>, Vec<_>) = lin.terms.iter().cloned().partition(|t| t.1 == 1);
    if !other.is_empty() {
        let g = other.iter().fold(0i64, |g, t| gcd(g, t.1)) as i128;
        if g > 1 {
            let ub = Lin {
                terms: unit.clone(),
                k: 0,
            }
            .bounds();
            let (q, r) = (c.div_euclid(g), c.rem_euclid(g));
            let lim = if ub.0 >= 0 && ub.1 < g {
                if ub.1 < r {
                    Some(q + 1)
                } else if ub.0 >= r {
                    Some(q)
                } else {
                    None
                }
            } else {
                None
            };
            if let Some(lim) = lim.filter(|l| fits(dt, *l, *l)) {
                let a = Lin {
                    terms: other
                        .iter()
                        .map(|(b, f)| (b.clone(), (*f as i128 / g) as i64))
                        .collect(),
                    k: 0,
                };
                if unit.is_empty() || lim == q + 1 || lim == q {
                    return Some(a.build(dt).lt(UOp::cnst(dt, lim as i64)));
                }
            }
        }
    }
    // simplex: sum a_i*x_i < 1 with a_i > 0, x_i >= 0  ->  sum x_i < 1
    if c == 1
        && lin.terms.iter().all(|(b, f)| *f > 0 && b.vmin() >= 0)
        && lin.terms.iter().any(|(_, f)| *f > 1)
    {
        let s = Lin {
            terms: lin.terms.iter().map(|(b, _)| (b.clone(), 1)).collect(),
            k: 0,
        };
        if s.fits(dt) {
            return Some(s.build(dt).lt(UOp::cnst(dt, 1)));
        }
    }
    None
}

/// `(base, c)` if `u` is `base * c` with a constant `c`.
fn neg_of(u: &UOp) -> Option<(&UOp, i64)> {
    (u.op() == Ops::Mul)
        .then(|| u.s(1).as_int().map(|c| (u.s(0), c)))
        .flatten()
}

/// `x + k != c -> x != c - k` (and `==`): valid for any wrapping integer dtype.
fn fold_eq_const(root: &UOp) -> Option<UOp> {
    let (x, y) = (root.s(0), root.s(1));
    let dt = x.dtype();
    if !dt.is_int() || dt.count() != 1 || x.op() != Ops::Add {
        return None;
    }
    let c = y.as_int()?;
    let k = x.s(1).as_int()?;
    let c2 = UOp::cnst(dt, c.wrapping_sub(k));
    Some(UOp::new(
        root.op(),
        root.dtype(),
        vec![x.s(0).clone(), c2],
        Arg::None,
    ))
}

/// `(x < c1) & (x < c2) -> x < min(c1, c2)` and `|` with `max`.
fn fold_lt_pair(root: &UOp) -> Option<UOp> {
    let (a, b) = (root.s(0), root.s(1));
    if a.op() != Ops::CmpLt || b.op() != Ops::CmpLt || a.s(0) != b.s(0) {
        return None;
    }
    let (c1, c2) = (a.s(1).as_int()?, b.s(1).as_int()?);
    if !is_sym_int(a.s(0).dtype()) {
        return None;
    }
    let c = if root.op() == Ops::And {
        c1.min(c2)
    } else {
        c1.max(c2)
    };
    Some(a.s(0).lt(UOp::cnst(a.s(0).dtype(), c)))
}

// ---------------------------------------------------------------------------------------------
// rule sets

fn alu_ops() -> Vec<Ops> {
    Ops::ALL.iter().copied().filter(|o| o.is_alu()).collect()
}

/// Generic folding: identities, constant folding (through [`exec_alu`]), bool algebra and casts
/// of constants (tinygrad's `symbolic_simple`).
pub fn symbolic_simple() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            // ** constant folding **
            UPat::ops(&alu_ops()).named("a") => |a| const_fold(a),
            // ** self folding **
            UPat::var("x") + 0 => |x| not_float(x).then(|| x.clone()),
            UPat::var("x") * 1 => |x| x.clone(),
            UPat::var("x") ^ 0 => |x| int_dt(x).then(|| x.clone()),
            UPat::var("x").idiv(1) => |x| int_dt(x).then(|| x.clone()),
            UPat::var("x").idiv(-1) => |x| int_dt(x).then(|| x.neg()),
            UPat::var("x").bin(Ops::FDiv, 1) => |x| x.clone(),
            UPat::var("x").idiv(UPat::var("x")) =>
                |x| (int_dt(x) && is_bounded(x.dtype()) && (x.vmin() > 0 || x.vmax() < 0)).then(|| x.const_like(1)),
            (UPat::any() % UPat::var("y")).named("base") % UPat::var("y") =>
                |base, y| int_dt(y).then(|| base.clone()),
            // ** zero folding **
            UPat::var("x").bin(Ops::Mod, 1) => |x| int_dt(x).then(|| x.const_like(0)),
            UPat::var("x") % UPat::var("x") => |x| int_dt(x).then(|| x.const_like(0)),
            UPat::var("x").bin(Ops::Mul, 0) => |x| int_dt(x).then(|| x.const_like(0)),
            UPat::var("x").lt(UPat::var("x")) => |x| UOp::cnst(DType::BOOL.vec(x.dtype().count()), false),
            UPat::var("x").ne(UPat::var("x")) =>
                |x| not_float(x).then(|| UOp::cnst(DType::BOOL.vec(x.dtype().count()), false)),
            UPat::var("x").eq(UPat::var("x")) =>
                |x| not_float(x).then(|| UOp::cnst(DType::BOOL.vec(x.dtype().count()), true)),
            // ** bool algebra **
            UPat::var("x").dtype(DType::BOOL) & UPat::cvar("c") =>
                |x, c| Some(if c.arg().as_const()?.as_bool() { x.clone() } else { c.clone() }),
            UPat::var("x").dtype(DType::BOOL) | UPat::cvar("c") =>
                |x, c| Some(if c.arg().as_const()?.as_bool() { c.clone() } else { x.clone() }),
            UPat::ops(&[Ops::Max, Ops::And, Ops::Or]).src(vec![UPat::var("x"), UPat::var("x")]) => |x| x.clone(),
            UPat::var("x").dtype(DType::BOOL).ne(true).ne(true) => |x| x.clone(),
            UPat::var("x").dtype(DType::BOOL).where_(true, false).dtype(DType::BOOL) => |x| x.clone(),
            UPat::var("x").dtype(DType::BOOL).where_(false, true).dtype(DType::BOOL) => |x| logical_not(x),
            UPat::var("x").dtype(DType::BOOL).bin(Ops::Mul, UPat::var("y").dtype(DType::BOOL)) => |x, y| x & y,
            UPat::var("x").dtype(DType::BOOL).bin(Ops::Add, UPat::var("y").dtype(DType::BOOL)) => |x, y| x | y,
            UPat::var("x").dtype(DType::BOOL).max(UPat::var("y").dtype(DType::BOOL)) => |x, y| x | y,
            UPat::op(Ops::Trunc).src(vec![UPat::var("x")]) => |x| (!x.dtype().is_float()).then(|| x.clone()),
            UPat::op(Ops::Round).src(vec![UPat::var("x")]) => |x| (!x.dtype().is_float()).then(|| x.clone()),
            // ** cast / bitcast **
            UPat::op(Ops::Cast).named("root").src(vec![UPat::cvar("c")]) =>
                |root, c| Some(UOp::cnst(root.dtype(), c.arg().as_const()?)),
            UPat::ops(&[Ops::Cast, Ops::Bitcast]).named("root").src(vec![UPat::var("x")]) =>
                |root, x| (root.dtype() == x.dtype()).then(|| x.clone()),
            UPat::op(Ops::Bitcast).named("root").src(vec![UPat::cvar("c")]) => |root, c| fold_bitcast(root, c),
            UPat::var("x").cast().named("a").cast().named("b") => |x, a, b| fold_double_cast(x, a, b),
        ])
    });
    &PM
}

/// [`symbolic_simple`] plus canonical sums/products, term collection, bounds-driven folding of
/// div/mod, comparisons, `max` and `where` (tinygrad's `symbolic`).
pub fn symbolic() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let extra: PatternMatcher = PatternMatcher::new(rules![
            // ** canonical forms **
            // (index sums only: flattening a sum of values copies every shared inner sum into
            // each sum that uses it — threefry's additions over a ramp became 6,000 adds)
            UPat::op(Ops::Add).named("x") =>
                |x| (x.dtype() == DType::INDEX).then(|| normalize_sum(x)).flatten(),
            UPat::op(Ops::Mul).named("x") => |x| int_dt(x).then(|| normalize_mul(x)).flatten(),
            UPat::ops(&[Ops::Max, Ops::And, Ops::Or, Ops::Xor, Ops::CmpNe, Ops::CmpEq]).named("x") =>
                |x| not_float(x.s(0)).then(|| commute(x)).flatten(),
            // ** bool algebra **
            UPat::var("x") | (UPat::var("x") & UPat::any()) => |x| not_float(x).then(|| x.clone()),
            // ** where **
            UPat::any().where_(UPat::var("v"), UPat::var("v")) => |v| v.clone(),
            UPat::op(Ops::Where).named("w") => |w| fold_where_bit(w),
            UPat::ops(&[Ops::Add, Ops::Mul]).named("x") => |x| fold_cast_arith(x),
            UPat::cvar("g").where_(UPat::var("t"), UPat::var("f")) =>
                |g, t, f| Some(if g.arg().as_const()?.as_bool() { t.clone() } else { f.clone() }),
            UPat::var("c").dtype(DType::BOOL).ne(true).where_(UPat::var("t"), UPat::var("f")) => |c, t, f| c.where_(f, t),
            UPat::ops(&[Ops::Add, Ops::Mul, Ops::Max, Ops::And, Ops::Or, Ops::Xor]).named("alu")
                .src(vec![UPat::op(Ops::Where), UPat::op(Ops::Where)]) => |alu| fold_where_pair(alu),
            // ** bounds **
            UPat::ops(&[alu_ops(), vec![Ops::DefineVar]].concat()).named("x") => |x| fold_single_value(x),
            UPat::var("x").max(UPat::var("y")) => |x, y| fold_max(x, y),
            UPat::var("x").max(UPat::cvar("c1")).max(UPat::cvar("c2")) =>
                |x, c1, c2| const_fold(&c1.maximum(c2)).map(|c| x.maximum(c)),
            (UPat::var("x") & UPat::cvar("c1")) & UPat::cvar("c2") =>
                |x, c1, c2| const_fold(&(c1 & c2)).map(|c| x & c),
            // (other integer sums keep their shape but fold their constants, wrapping)
            (UPat::var("x") + UPat::cvar("c1")) + UPat::cvar("c2") =>
                |x, c1, c2| (int_dt(x) && x.dtype() != DType::INDEX)
                    .then(|| const_fold(&(c1 + c2)).map(|c| x + c))
                    .flatten(),
            (UPat::var("x") | UPat::cvar("c1")) | UPat::cvar("c2") =>
                |x, c1, c2| const_fold(&(c1 | c2)).map(|c| x | c),
            // ** comparisons **
            UPat::op(Ops::CmpLt).named("x") => |x| fold_lt(x),
            UPat::ops(&[Ops::CmpNe, Ops::CmpEq]).named("x").src(vec![UPat::op(Ops::Add), UPat::op(Ops::Const)]) =>
                |x| fold_eq_const(x),
            // ** div / mod **
            UPat::ops(&[Ops::IDiv, Ops::Mod]).named("d") => |d| fold_divmod(d),
        ]);
        symbolic_simple().merged(&extra)
    });
    &PM
}

/// [`symbolic`] plus rules that reach across `where`s and comparisons: merging nested `where`s
/// with a shared false branch, pushing casts into `where` branches, and combining bounds on the
/// same expression (`(x<3)&(x<5) -> x<3`).
pub fn sym() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let extra: PatternMatcher = PatternMatcher::new(rules![
            UPat::var("a").where_(UPat::var("b").where_(UPat::var("c"), UPat::var("d")), UPat::var("d")) =>
                |a, b, c, d| (a & b).where_(c, d),
            UPat::var("s").where_(UPat::var("a"), UPat::var("b")).cast().named("cast") =>
                |s, a, b, cast| s.where_(a.cast(cast.dtype()), b.cast(cast.dtype())),
            UPat::ops(&[Ops::And, Ops::Or]).named("x").dtype(DType::BOOL) => |x| fold_lt_pair(x),
        ]);
        symbolic().merged(&extra)
    });
    &PM
}

impl UOp {
    /// The graph rewritten to a fixed point with [`sym`].
    pub fn simplify(&self) -> UOp {
        graph_rewrite(self, sym(), &mut (), false)
    }
}
