//! The rule helpers (constant folding, casts, `where`, comparisons, `max`) and the rule sets
//! [`symbolic_simple`], [`symbolic`] and [`sym`], with [`UOp::simplify`].

use std::sync::LazyLock;

use tinygrad_dtype::{ConstValue, DType, Scalar, can_lossless_cast};

use crate::divmod::{Lin, fold_divmod, gcd};
use crate::{Arg, Ops, PatternMatcher, UOp, UPat, exec_alu, graph_rewrite, rules};

use super::normal::{commute, fold_cast_arith, fold_where_bit, normalize_mul, normalize_sum};
use super::{dtype_range, fits, is_bounded, is_sym_int};

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
