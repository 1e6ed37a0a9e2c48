//! Late rewrites, just before linearizing: subtraction and negation as their own ops, and
//! fused multiply-adds where the target has them.
//!
//! The UOp graph spells `a - b` as `a + b*-1` and `-x` as `x*-1` (tinygrad's convention: the
//! simplifier and the pattern matchers before this point have fewer ops to know). Every
//! renderer has `Sub` and `Neg`, one instruction where the spelled-out form takes two, and the
//! multiply by -1 is a real multiply (on integer vectors a slow one). Both forms give the same
//! values: `b*-1` is exact, `a + (-b)` rounds exactly like `a - b`, and integers wrap alike.
//!
//! [`fma_rules`] contracts float `a*b + c` into `MulAcc` (one rounding instead of two), which
//! tinygrad's C backends also get from their compilers. The transcendental decompositions stay
//! within their error bounds when contracted (the `decomp` tests measure both forms).

use std::sync::LazyLock;

use tinygrad_uop::{ConstValue, Ops, PatternMatcher, UOp, UPat, rules};

/// The rewrites: `a + b*-1` (either order) -> `Sub(a, b)`, `x*-1` -> `Neg(x)`, for every
/// non-bool value dtype.
pub fn late_rules() -> &'static PatternMatcher {
    static RULES: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Add).named("x") => |x| as_sub(x),
            UPat::op(Ops::Mul).named("x") => |x| as_neg(x),
        ])
    });
    &RULES
}

/// The contraction: float `a*b + c` (either order of the sum) -> `MulAcc(a, b, c)`. A product
/// with other users is then computed twice, once fused (no slower than a multiply and an add).
pub fn fma_rules() -> &'static PatternMatcher {
    static RULES: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Add).named("x") => |x| as_mul_acc(x),
        ])
    });
    &RULES
}

fn as_mul_acc(add: &UOp) -> Option<UOp> {
    if !add.dtype().is_float() {
        return None;
    }
    let (a, b) = (add.s(0), add.s(1));
    let (m, c) = if a.op() == Ops::Mul {
        (a, b)
    } else if b.op() == Ops::Mul {
        (b, a)
    } else {
        return None;
    };
    Some(m.s(0).alu(Ops::MulAcc, &[m.s(1).clone(), c.clone()]))
}

/// Whether `u` is the constant -1 (a scalar, a vector constant or a vector of -1s). For an
/// unsigned dtype that is the all-ones value (`UOp::neg` multiplies by -1, which wraps to it).
fn is_minus_one(u: &UOp) -> bool {
    match u.op() {
        Ops::Const if u.dtype().is_unsigned() => {
            let all_ones = u64::MAX >> (64 - u.dtype().scalar().bitsize());
            u.as_const()
                .is_some_and(|c| matches!(c, ConstValue::UInt(v) if v == all_ones))
        }
        Ops::Const => u.as_const().is_some_and(|c| c.as_f64() == -1.0),
        Ops::Vectorize => !u.src().is_empty() && u.src().iter().all(is_minus_one),
        _ => false,
    }
}

/// Whether arithmetic on `u`'s dtype may be rewritten (not bool, not a pointer).
fn arithmetic(u: &UOp) -> bool {
    let dt = u.dtype();
    !dt.is_bool() && !dt.is_ptr()
}

/// `y` when `m` is `y * -1` (or already `Neg(y)`: the rewrite works bottom-up, so a product
/// has become `Neg` by the time the sum using it is seen).
fn negated(m: &UOp) -> Option<UOp> {
    if m.op() == Ops::Neg {
        return Some(m.s(0).clone());
    }
    if m.op() != Ops::Mul {
        return None;
    }
    let (a, b) = (m.s(0), m.s(1));
    if is_minus_one(b) {
        Some(a.clone())
    } else if is_minus_one(a) {
        Some(b.clone())
    } else {
        None
    }
}

fn as_sub(add: &UOp) -> Option<UOp> {
    if !arithmetic(add) {
        return None;
    }
    let (a, b) = (add.s(0), add.s(1));
    let (x, y) = match (negated(b), negated(a)) {
        (Some(y), _) => (a.clone(), y),
        (None, Some(y)) => (b.clone(), y),
        (None, None) => return None,
    };
    Some(x.alu(Ops::Sub, &[y]))
}

fn as_neg(mul: &UOp) -> Option<UOp> {
    if !arithmetic(mul) {
        return None;
    }
    negated(mul).map(|x| x.alu(Ops::Neg, &[]))
}

#[cfg(test)]
mod tests {
    use tinygrad_dtype::DType;
    use tinygrad_uop::{Arg, AxisKind};

    use super::*;

    fn rewrite(u: &UOp) -> UOp {
        tinygrad_uop::graph_rewrite(u, late_rules(), &mut (), false)
    }

    fn var(dt: DType, name: &str) -> UOp {
        UOp::new(Ops::DefineVar, dt, vec![], Arg::Var(name.into(), 0, 10))
    }

    #[test]
    fn subtraction_and_negation_become_their_ops() {
        for dt in [
            DType::FLOAT32,
            DType::INT32,
            DType::FLOAT64,
            DType::INDEX,
            DType::UINT32,
            DType::UINT8,
            DType::UINT64,
        ] {
            let (a, b) = (var(dt, "a"), var(dt, "b"));
            assert_eq!(
                rewrite(&a.sub(&b)),
                a.alu(Ops::Sub, std::slice::from_ref(&b))
            );
            // the negated operand first
            let swapped = b.neg().alu(Ops::Add, std::slice::from_ref(&a));
            assert_eq!(rewrite(&swapped), a.alu(Ops::Sub, std::slice::from_ref(&b)));
            assert_eq!(rewrite(&a.neg()), a.alu(Ops::Neg, &[]));
        }
    }

    #[test]
    fn float_products_plus_a_term_are_fused() {
        let (a, b, c) = (
            var(DType::FLOAT32, "a"),
            var(DType::FLOAT32, "b"),
            var(DType::FLOAT32, "c"),
        );
        let fused = a.alu(Ops::MulAcc, &[b.clone(), c.clone()]);
        let fma = |u: &UOp| tinygrad_uop::graph_rewrite(u, fma_rules(), &mut (), false);
        assert_eq!(fma(&(&(&a * &b) + &c)), fused);
        assert_eq!(fma(&(&c + &(&a * &b))), fused);
        // integers are left alone (no fused integer instruction to gain)
        let (i, j) = (var(DType::INT32, "i"), var(DType::INT32, "j"));
        let isum = &(&i * &j) + &i;
        assert_eq!(fma(&isum), isum);
    }

    #[test]
    fn other_products_and_bools_stay() {
        let a = var(DType::FLOAT32, "a");
        let r = UOp::range(8i64, 0, AxisKind::Loop);
        let twice = &a * 2.0;
        assert_eq!(rewrite(&twice), twice);
        let sum = &a + &twice;
        assert_eq!(rewrite(&sum), sum);
        // bool negation is `!= true`, not a product: untouched
        let not = r.lt(3i64).neg();
        assert_eq!(rewrite(&not), not);
    }
}
