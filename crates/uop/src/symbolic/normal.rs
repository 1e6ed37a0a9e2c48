//! Normal forms of sums and products: collected terms, recombined div/mod pairs, folded selects
//! and casts, canonical products and commutative operands.

use std::cmp::Ordering;

use tinygrad_dtype::{ConstValue, DType};

use crate::divmod::Lin;
use crate::{Arg, Ops, UOp};

use super::bounds::min_max;
use super::{b128, cmp_uop, fits, is_sym_int};

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

pub(super) fn normalize_sum(root: &UOp) -> Option<UOp> {
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
pub(super) fn fold_where_bit(w: &UOp) -> Option<UOp> {
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
pub(super) fn fold_cast_arith(root: &UOp) -> Option<UOp> {
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

pub(super) fn normalize_mul(root: &UOp) -> Option<UOp> {
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
pub(super) fn commute(root: &UOp) -> Option<UOp> {
    if root.src().len() != 2 || cmp_uop(root.s(1), root.s(0)) != Ordering::Less {
        return None;
    }
    Some(root.with_src(vec![root.s(1).clone(), root.s(0).clone()]))
}
