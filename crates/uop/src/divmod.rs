//! Folding of integer `IDiv`/`Mod` using bounds (tinygrad's `divandmod.py`), and `Lin`, the
//! linear form `sum(f_i * base_i) + k` the folding reasons about.
//!
//! Division and modulo truncate toward zero (C semantics), and `x // 0 == x % 0 == 0`. Rules
//! that reason about `x`'s value as a true integer first check that its linear form cannot wrap
//! (its interval lies within the dtype); identities that need a non-negative numerator check
//! that too, since truncating and flooring division differ below zero.

use crate::symbolic::{b128, cdiv, cmod, cmp_uop, dtype_range, fits, is_sym_int, split_term, wrap};
use crate::{Arg, DType, Ops, UOp};

/// Greatest common divisor of `|a|` and `|b|` (`gcd(0, b) == |b|`).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.min(i64::MAX as u64) as i64
}

/// A linear form `sum(f_i * base_i) + k` over one integer dtype.
#[derive(Clone, Default, Debug)]
pub(crate) struct Lin {
    /// `(base, coefficient)` pairs; bases are not constants.
    pub terms: Vec<(UOp, i64)>,
    /// The constant.
    pub k: i64,
}

impl Lin {
    /// The linear form of `x`, flattening its chain of `Add`s.
    pub fn of(x: &UOp) -> Lin {
        let mut lin = Lin::default();
        lin.add_scaled(x, 1);
        lin
    }

    /// Adds `f * x` (flattening `x`'s `Add`s), with wrapping coefficients.
    pub fn add_scaled(&mut self, x: &UOp, f: i64) {
        let dt = x.dtype();
        let mut stack = vec![x];
        while let Some(u) = stack.pop() {
            if u.op() == Ops::Add && u.dtype() == dt {
                stack.push(u.s(1));
                stack.push(u.s(0));
            } else if let Some(c) = u.as_int() {
                self.k = self.k.wrapping_add(c.wrapping_mul(f));
            } else {
                let (b, g) = split_term(u);
                self.terms.push((b, g.wrapping_mul(f)));
            }
        }
    }

    /// `x` without its trailing constant: `rest + k -> (rest, k)`, `k -> (0, k)`.
    pub fn pop_const(x: &UOp) -> (UOp, i64) {
        if let Some(k) = x.as_int() {
            return (x.const_like(0), k);
        }
        if x.op() == Ops::Add
            && let Some(k) = x.s(1).as_int()
        {
            return (x.s(0).clone(), k);
        }
        (x.clone(), 0)
    }

    /// Sorts terms canonically, merges equal bases and drops zero coefficients.
    pub fn canonicalize(&mut self, dt: DType) {
        self.terms.sort_by(|a, b| cmp_uop(&a.0, &b.0));
        let mut out: Vec<(UOp, i64)> = Vec::with_capacity(self.terms.len());
        for (b, f) in self.terms.drain(..) {
            match out.last_mut() {
                Some(last) if last.0 == b => last.1 = last.1.wrapping_add(f),
                _ => out.push((b, f)),
            }
        }
        for t in out.iter_mut() {
            t.1 = wrap(dt, t.1);
        }
        out.retain(|t| t.1 != 0);
        self.terms = out;
    }

    /// Builds the form as a left-leaning chain of `Add`s, the constant last.
    pub fn build(&self, dt: DType) -> UOp {
        let term = |(b, f): &(UOp, i64)| {
            if *f == 1 {
                b.clone()
            } else {
                UOp::new(Ops::Mul, dt, vec![b.clone(), UOp::cnst(dt, *f)], Arg::None)
            }
        };
        let mut it = self.terms.iter().filter(|t| t.1 != 0);
        let Some(first) = it.next() else {
            return UOp::cnst(dt, self.k);
        };
        let mut out = term(first);
        for t in it {
            out = UOp::new(Ops::Add, dt, vec![out, term(t)], Arg::None);
        }
        if self.k != 0 {
            out = UOp::new(Ops::Add, dt, vec![out, UOp::cnst(dt, self.k)], Arg::None);
        }
        out
    }

    /// Whether `u` is exactly the node [`Self::build`] would return (without building it).
    pub fn is_built(&self, u: &UOp, dt: DType) -> bool {
        let is_const =
            |n: &UOp, v: i64| n.op() == Ops::Const && n.dtype() == dt && n.as_int() == Some(v);
        let is_term = |n: &UOp, (b, f): &(UOp, i64)| {
            if *f == 1 {
                n == b
            } else {
                n.op() == Ops::Mul && n.dtype() == dt && n.s(0) == b && is_const(n.s(1), *f)
            }
        };
        let terms: Vec<&(UOp, i64)> = self.terms.iter().filter(|t| t.1 != 0).collect();
        let mut cur = u;
        if self.k != 0 {
            if terms.is_empty() {
                return is_const(cur, self.k);
            }
            if cur.op() != Ops::Add || cur.dtype() != dt || !is_const(cur.s(1), self.k) {
                return false;
            }
            cur = cur.s(0);
        }
        let Some((first, rest)) = terms.split_first() else {
            return is_const(cur, 0);
        };
        for t in rest.iter().rev() {
            if cur.op() != Ops::Add || cur.dtype() != dt || !is_term(cur.s(1), t) {
                return false;
            }
            cur = cur.s(0);
        }
        is_term(cur, first)
    }

    /// The interval of the form's true (unwrapped) value.
    pub fn bounds(&self) -> (i128, i128) {
        let (mut lo, mut hi) = (self.k as i128, self.k as i128);
        for (b, f) in &self.terms {
            let (bl, bh) = b128(b);
            let f = *f as i128;
            let (p, q) = (bl * f, bh * f);
            lo += p.min(q);
            hi += p.max(q);
        }
        (lo, hi)
    }

    /// Whether the form's true value always lies within `dt`: then the (wrapping) node built
    /// from it computes exactly that value.
    pub fn fits(&self, dt: DType) -> bool {
        let (lo, hi) = self.bounds();
        fits(dt, lo, hi)
    }

    fn map(&self, f: impl Fn(i64) -> i64, k: i64) -> Lin {
        Lin {
            terms: self.terms.iter().map(|(b, c)| (b.clone(), f(*c))).collect(),
            k,
        }
    }
}

/// Folds `d = x // y` or `x % y` (integer dtypes): see the module docs.
pub(crate) fn fold_divmod(d: &UOp) -> Option<UOp> {
    let dt = d.dtype();
    if !is_sym_int(dt) || dt.count() != 1 {
        return None;
    }
    let (x, y) = (d.s(0), d.s(1));
    if x.dtype() != dt || y.dtype() != dt {
        return None;
    }
    let is_mod = d.op() == Ops::Mod;
    let op = |a: &UOp, b: &UOp| UOp::new(d.op(), dt, vec![a.clone(), b.clone()], Arg::None);
    let cst = |v: i128| UOp::cnst(dt, v as i64);
    if y.as_int() == Some(0) {
        return Some(cst(0));
    }
    let ((xl, xh), (yl, yh)) = (b128(x), b128(y));
    // cancel: the numerator's range lies within one denominator interval
    if yl > 0 || yh < 0 {
        let q = cdiv(xl, yl);
        if [cdiv(xl, yh), cdiv(xh, yl), cdiv(xh, yh)]
            .iter()
            .all(|v| *v == q)
            && fits(dt, q, q)
        {
            return Some(if !is_mod {
                cst(q)
            } else if q == 0 {
                x.clone()
            } else {
                x + &(y * &cst(-q))
            });
        }
    }
    // a range divided by its own size
    if x.op() == Ops::Range && x.s(0) == y {
        return Some(if is_mod { x.clone() } else { cst(0) });
    }
    let lin = Lin::of(x);
    let (dmin, _) = dtype_range(dt);
    if !lin.fits(dt) || yl <= dmin as i128 {
        return None;
    }
    let first = |cands: &mut dyn Iterator<Item = Option<UOp>>| cands.flatten().find(|c| c != d);
    // negative denominator: x // y == -(x // -y), x % y == x % -y
    if yh < 0 {
        let ny = y * -1i64;
        return Some(if is_mod {
            op(x, &ny)
        } else {
            op(x, &ny) * -1i64
        });
    }
    // non-positive numerator: x // y == -((-x) // y), x % y == -((-x) % y)
    if xh <= 0 && xl > dmin as i128 {
        return Some(op(&(x * -1i64), y) * -1i64);
    }
    let c = y.as_int().map(|c| c as i128);
    if let Some(c) = c {
        if c == 1 {
            return Some(if is_mod { cst(0) } else { x.clone() });
        }
        let steps: [&dyn Fn() -> Option<UOp>; 9] = [
            &|| nested_mod(d, x, c),
            &|| nested_div(d, x, &lin, c),
            &|| remove_nested_mod(d, &lin, c),
            &|| binary_numerator(d, &lin, c),
            &|| congruence(d, &lin, c),
            &|| gcd_with_remainder(d, &lin, c),
            &|| nest_by_factor(d, x, &lin, c),
            &|| neg_numerator(d, &lin, c),
            &|| extract_quotient(d, &lin, c),
        ];
        if let Some(r) = first(&mut steps.iter().map(|s| s())) {
            return Some(r);
        }
    }
    first(&mut [divide_by_gcd(d, &lin, y), symbolic_quotient(d, &lin, y)].into_iter())
}

fn dt_cst(d: &UOp, v: i128) -> UOp {
    UOp::cnst(d.dtype(), v as i64)
}

fn rebuild(d: &UOp, x: UOp, y: UOp) -> UOp {
    UOp::new(d.op(), d.dtype(), vec![x, y], Arg::None)
}

/// `(a % (k*c)) // c -> (a // c) % k` and `(a % (k*c)) % c -> a % c` (any sign of `a`).
fn nested_mod(d: &UOp, x: &UOp, c: i128) -> Option<UOp> {
    if x.op() != Ops::Mod {
        return None;
    }
    let m = x.s(1).as_int()? as i128;
    if m == 0 || m % c != 0 {
        return None;
    }
    let a = x.s(0);
    Some(if d.op() == Ops::Mod {
        a.modulo(dt_cst(d, c))
    } else {
        a.idiv(dt_cst(d, c)).modulo(dt_cst(d, m / c))
    })
}

/// `(a // c1) // c -> a // (c1*c)` (any sign), and `(a // c1 + k) // c -> (a + k*c1) // (c1*c)`
/// for `a, k >= 0`.
fn nested_div(d: &UOp, x: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if d.op() != Ops::IDiv || lin.terms.len() != 1 || lin.terms[0].1 != 1 {
        return None;
    }
    let inner = &lin.terms[0].0;
    if inner.op() != Ops::IDiv {
        return None;
    }
    let c1 = inner.s(1).as_int()? as i128;
    let a = inner.s(0);
    let k = lin.k as i128;
    if c1 == 0 || !fits(d.dtype(), c1 * c, c1 * c) {
        return None;
    }
    if k == 0 && x == inner {
        return Some(a.idiv(dt_cst(d, c1 * c)));
    }
    if c1 > 0 && k >= 0 && a.vmin() >= 0 {
        let (al, ah) = b128(a);
        if fits(d.dtype(), al + k * c1, ah + k * c1) {
            return Some((a + &dt_cst(d, k * c1)).idiv(dt_cst(d, c1 * c)));
        }
    }
    None
}

/// `(a%m + b) % c -> (a + b) % c` when `c` divides `m` and both numerators are non-negative.
fn remove_nested_mod(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if d.op() != Ops::Mod || lin.bounds().0 < 0 {
        return None;
    }
    let mut changed = false;
    let mut new = Lin {
        terms: Vec::with_capacity(lin.terms.len()),
        k: lin.k,
    };
    for (b, f) in &lin.terms {
        if b.op() == Ops::Mod
            && let Some(m) = b.s(1).as_int()
            && m != 0
            && (m as i128) % c == 0
        {
            changed = true;
            new.add_scaled(b.s(0), *f);
        } else {
            new.terms.push((b.clone(), *f));
        }
    }
    let dt = d.dtype();
    (changed && new.fits(dt) && new.bounds().0 >= 0).then(|| new.build(dt).modulo(dt_cst(d, c)))
}

/// A numerator with one term taking two values: `(y2-y1)*(v-vmin) + y1`.
fn binary_numerator(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    let [(v, f)] = lin.terms.as_slice() else {
        return None;
    };
    let (vl, vh) = b128(v);
    if vh - vl != 1 {
        return None;
    }
    let (f, k) = (*f as i128, lin.k as i128);
    let opf = |n: i128| {
        if d.op() == Ops::Mod {
            cmod(n, c)
        } else {
            cdiv(n, c)
        }
    };
    let (y1, y2) = (opf(f * vl + k), opf(f * vh + k));
    let dt = d.dtype();
    let out = Lin {
        terms: vec![(v.clone(), (y2 - y1) as i64)],
        k: (y1 - (y2 - y1) * vl) as i64,
    };
    Some(out.build(dt))
}

/// Within a modulus, multiples of `c` can be dropped: if `x` is congruent to a form whose range
/// lies within one period, both `x % c` and `x // c` fold (non-negative `x`).
fn congruence(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if lin.bounds().0 < 0 || lin.terms.len() > 16 {
        return None;
    }
    let dt = d.dtype();
    // for each coefficient, the representatives of f mod c closest to 0 (both on a tie)
    let choices: Vec<Vec<i128>> = lin
        .terms
        .iter()
        .map(|(_, f)| {
            let r = (*f as i128).rem_euclid(c);
            if r * 2 == c {
                vec![r, r - c]
            } else if r * 2 > c {
                vec![r - c]
            } else {
                vec![r]
            }
        })
        .collect();
    let combos: usize = choices.iter().map(|v| v.len()).product();
    if combos > 64 {
        return None;
    }
    let k = lin.k as i128;
    for n in 0..combos {
        let mut idx = n;
        let rems: Vec<i128> = choices
            .iter()
            .map(|ch| {
                let r = ch[idx % ch.len()];
                idx /= ch.len();
                r
            })
            .collect();
        let mut rem = Lin {
            terms: Vec::new(),
            k: k.rem_euclid(c) as i64,
        };
        for ((b, _), r) in lin.terms.iter().zip(&rems) {
            rem.terms.push((b.clone(), *r as i64));
        }
        let (lo, hi) = rem.bounds();
        let q = lo.div_euclid(c);
        if q != hi.div_euclid(c) {
            continue;
        }
        if d.op() == Ops::Mod {
            let out = Lin {
                terms: rem.terms,
                k: (k.rem_euclid(c) - q * c) as i64,
            };
            return Some(out.build(dt));
        }
        let terms = lin
            .terms
            .iter()
            .zip(&rems)
            .map(|((b, f), r)| (b.clone(), ((*f as i128 - r) / c) as i64))
            .collect();
        return Some(
            Lin {
                terms,
                k: (k.div_euclid(c) + q) as i64,
            }
            .build(dt),
        );
    }
    None
}

/// Factor out the gcd `g` of the coefficients and `c` (non-negative `x`):
/// `x // c -> (x/g + (k/g)%(c/g)) // (c/g) + k//c`.
fn gcd_with_remainder(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if lin.bounds().0 < 0 || lin.terms.is_empty() {
        return None;
    }
    let g = lin.terms.iter().fold(c as i64, |g, t| gcd(g, t.1)) as i128;
    if g <= 1 {
        return None;
    }
    let k = lin.k as i128;
    let cg = c / g;
    let new = lin.map(
        |f| (f as i128 / g) as i64,
        k.div_euclid(g).rem_euclid(cg) as i64,
    );
    if new.bounds().0 < 0 {
        return None;
    }
    let dt = d.dtype();
    let nx = new.build(dt);
    Some(if d.op() == Ops::Mod {
        nx.modulo(dt_cst(d, cg)) * dt_cst(d, g) + dt_cst(d, k.rem_euclid(g))
    } else {
        nx.idiv(dt_cst(d, cg)) + dt_cst(d, k.div_euclid(c))
    })
}

/// Nest the division by a coefficient `f` dividing `c` (non-negative `x`):
/// `x // c -> (x // f) // (c / f)`, `x % c -> ((x // f) % (c / f)) * f + x % f`, when `x // f`
/// folds. Picks the smallest result.
fn nest_by_factor(d: &UOp, x: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if lin.bounds().0 < 0 {
        return None;
    }
    let mut divs: Vec<i128> = lin
        .terms
        .iter()
        .map(|t| (t.1 as i128).abs())
        .filter(|f| 1 < *f && *f < c && c % f == 0)
        .collect();
    divs.sort_unstable();
    divs.dedup();
    let dt = d.dtype();
    let mut best: Option<(usize, UOp)> = None;
    for div in divs {
        let inner = x.idiv(dt_cst(d, div));
        let Some(newxs) = fold_divmod(&inner) else {
            continue;
        };
        if newxs.vmin() < 0 {
            continue;
        }
        let cand = if d.op() == Ops::IDiv {
            newxs.idiv(dt_cst(d, c / div))
        } else {
            let b = lin.map(
                |f| (f as i128).rem_euclid(div) as i64,
                (lin.k as i128).rem_euclid(div) as i64,
            );
            let (bl, bh) = b.bounds();
            if bl < 0 || bh >= div {
                continue;
            }
            newxs.modulo(dt_cst(d, c / div)) * dt_cst(d, div) + b.build(dt)
        };
        let size = cand.toposort().len();
        if best.as_ref().is_none_or(|(s, _)| size < *s) {
            best = Some((size, cand));
        }
    }
    best.map(|b| b.1)
}

/// `(p + k) // c` with `p <= 0 <= p + k`: `-((-p + (c-1) - k%c) // c) + k//c`.
fn neg_numerator(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if d.op() != Ops::IDiv || lin.terms.is_empty() || lin.bounds().0 < 0 {
        return None;
    }
    let p = Lin {
        terms: lin.terms.clone(),
        k: 0,
    };
    if p.bounds().1 > 0 {
        return None;
    }
    let k = lin.k as i128;
    let dt = d.dtype();
    let np = p.map(|f| f.wrapping_neg(), (c - 1 - k.rem_euclid(c)) as i64);
    Some(np.build(dt).idiv(dt_cst(d, c)) * -1i64 + dt_cst(d, k.div_euclid(c)))
}

/// Take out exact multiples of `c` (non-negative `x` and remainder): for `//`, the terms whose
/// coefficient `c` divides and the constant's quotient; for `%`, every coefficient reduced
/// modulo `c`.
fn extract_quotient(d: &UOp, lin: &Lin, c: i128) -> Option<UOp> {
    if lin.bounds().0 < 0 {
        return None;
    }
    let dt = d.dtype();
    let k = lin.k as i128;
    let is_mod = d.op() == Ops::Mod;
    let mut rem = Lin {
        terms: Vec::new(),
        k: k.rem_euclid(c) as i64,
    };
    let mut quo = Lin {
        terms: Vec::new(),
        k: k.div_euclid(c) as i64,
    };
    let mut changed = k != k.rem_euclid(c);
    for (b, f) in &lin.terms {
        let f = *f as i128;
        if f % c == 0 {
            quo.terms.push((b.clone(), (f / c) as i64));
            changed = true;
        } else if is_mod {
            let r = f.rem_euclid(c);
            changed |= r != f;
            rem.terms.push((b.clone(), r as i64));
        } else {
            rem.terms.push((b.clone(), f as i64));
        }
    }
    if !changed || rem.bounds().0 < 0 || !rem.fits(dt) {
        return None;
    }
    let r = rem.build(dt);
    Some(if is_mod {
        r.modulo(dt_cst(d, c))
    } else {
        r.idiv(dt_cst(d, c)) + quo.build(dt)
    })
}

/// `x // y -> (x/g) // (y/g)`, `x % y -> ((x/g) % (y/g)) * g` for the gcd `g` of all
/// coefficients and constants of `x` and `y` (any sign: exact division).
fn divide_by_gcd(d: &UOp, lin: &Lin, y: &UOp) -> Option<UOp> {
    let ylin = Lin::of(y);
    let g = lin
        .terms
        .iter()
        .chain(&ylin.terms)
        .fold(gcd(lin.k, ylin.k), |g, t| gcd(g, t.1));
    if g <= 1 {
        return None;
    }
    let dt = d.dtype();
    let div = |l: &Lin| l.map(|f| f / g, l.k / g).build(dt);
    let r = rebuild(d, div(lin), div(&ylin));
    Some(if d.op() == Ops::Mod {
        r * dt_cst(d, g as i128)
    } else {
        r
    })
}

/// `(y*q + r) // y -> q + r // y` and `(y*q + r) % y -> r % y` for a symbolic `y > 0` and
/// non-negative `x` and `r`.
fn symbolic_quotient(d: &UOp, lin: &Lin, y: &UOp) -> Option<UOp> {
    if y.op() == Ops::Const || y.vmin() <= 0 || lin.bounds().0 < 0 {
        return None;
    }
    let dt = d.dtype();
    let mut quo = Lin::default();
    let mut rem = Lin {
        terms: Vec::new(),
        k: lin.k,
    };
    for (b, f) in &lin.terms {
        if b == y {
            quo.k = quo.k.wrapping_add(*f);
        } else if b.op() == Ops::Mul && b.s(1) == y {
            quo.terms.push((b.s(0).clone(), *f));
        } else if b.op() == Ops::Mul && b.s(0) == y {
            quo.terms.push((b.s(1).clone(), *f));
        } else {
            rem.terms.push((b.clone(), *f));
        }
    }
    if (quo.terms.is_empty() && quo.k == 0) || rem.bounds().0 < 0 || !rem.fits(dt) {
        return None;
    }
    let r = rebuild(d, rem.build(dt), y.clone());
    Some(if d.op() == Ops::Mod {
        r
    } else {
        r + quo.build(dt)
    })
}
