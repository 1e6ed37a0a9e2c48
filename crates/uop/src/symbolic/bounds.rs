//! Bounds: the value ranges of dtypes and of nodes ([`UOp::vmin`], [`UOp::vmax`]), computed by
//! interval arithmetic in `i128`.

use tinygrad_dtype::{DType, Scalar};

use crate::{Arg, Ops, UOp};

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

pub(super) fn min_max(v: &[i128]) -> (i128, i128) {
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
