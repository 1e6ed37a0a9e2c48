//! Redundant selects around gated loads.
//!
//! A gated load yields 0 when its gate is off (every renderer and `REF`), so
//! `WHERE(c, LOAD(INDEX(buf, i, g)), 0)` is the load itself when `g` implies `c` (every
//! conjunct of `c` is a conjunct of `g`). Padding produces exactly that: the view's validity
//! gates the load and selects its value again, once per padded view — two selects per element
//! of a padded convolution's packing kernel, each a compare, moves and a `cmov` on the CPU.

use std::collections::HashSet;
use std::sync::LazyLock;

use tinygrad_uop::{Ops, PatternMatcher, UOp, UPat, rules};

/// The rewrite: `WHERE(c, gated load, 0)` -> the load, when the load's gate implies `c`.
// mnist GEMM kernels 1,351 -> 1,092 ms per step (see docs/performance.md)
pub fn gated_load_rules() -> &'static PatternMatcher {
    static RULES: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Where).named("w") => |w| drop_select_on_gated_load(w),
        ])
    });
    &RULES
}

/// The conjuncts of a boolean `AND` tree.
fn conjuncts(u: &UOp, out: &mut HashSet<UOp>) {
    if u.op() == Ops::And && u.dtype() == tinygrad_dtype::DType::BOOL {
        for s in u.src() {
            conjuncts(s, out);
        }
    } else {
        out.insert(u.clone());
    }
}

fn drop_select_on_gated_load(w: &UOp) -> Option<UOp> {
    let (c, x, z) = (w.s(0), w.s(1), w.s(2));
    // +0 exactly: a gated-off load yields +0, and `-0.0` must stay what the select gave.
    let zero = z.as_const().is_some_and(|v| v.as_f64().to_bits() == 0);
    // A load without an alternative value, through a gated index.
    if !zero || x.op() != Ops::Load || x.src().len() != 1 || x.dtype().count() != 1 {
        return None;
    }
    let idx = x.s(0);
    let gate = idx.src().get(2).filter(|_| idx.op() == Ops::Index)?;
    let (mut have, mut need) = (HashSet::new(), HashSet::new());
    conjuncts(gate, &mut have);
    conjuncts(c, &mut need);
    need.is_subset(&have).then(|| x.clone())
}

#[cfg(test)]
mod tests {
    use tinygrad_dtype::{AddrSpace, DType};
    use tinygrad_uop::{Arg, AxisKind};

    use super::*;

    fn gated_load(gate: &UOp) -> UOp {
        let buf = UOp::new(
            Ops::DefineGlobal,
            DType::FLOAT32.ptr(AddrSpace::Global),
            vec![],
            Arg::Int(1),
        );
        let r = UOp::range(8i64, 0, AxisKind::Loop);
        let idx = UOp::new(
            Ops::Index,
            buf.dtype(),
            vec![buf.clone(), r - 2i64, gate.clone()],
            Arg::None,
        );
        UOp::new(Ops::Load, DType::FLOAT32, vec![idx], Arg::None)
    }

    fn rewrite(u: &UOp) -> UOp {
        tinygrad_uop::graph_rewrite(u, gated_load_rules(), &mut (), false)
    }

    #[test]
    fn selects_implied_by_the_gate_are_dropped() {
        let r = UOp::range(8i64, 0, AxisKind::Loop);
        let (lo, hi) = (
            r.lt(2i64).alu(Ops::CmpNe, &[UOp::cnst(DType::BOOL, true)]),
            r.lt(6i64),
        );
        let g = lo.alu(Ops::And, std::slice::from_ref(&hi));
        let load = gated_load(&g);
        let zero = UOp::cnst(DType::FLOAT32, 0.0f32);
        // one conjunct, then the other, nested (two views' selects)
        let nested = lo.where_(hi.where_(load.clone(), zero.clone()), zero.clone());
        assert_eq!(rewrite(&nested), load);
        assert_eq!(rewrite(&g.where_(load.clone(), zero.clone())), load);
    }

    #[test]
    fn other_selects_stay() {
        let r = UOp::range(8i64, 0, AxisKind::Loop);
        let g = r.lt(6i64);
        let load = gated_load(&g);
        let zero = UOp::cnst(DType::FLOAT32, 0.0f32);
        // a condition the gate does not imply
        let other = r.lt(3i64).where_(load.clone(), zero.clone());
        assert_eq!(rewrite(&other), other);
        // a nonzero alternative
        let one = g.where_(load.clone(), UOp::cnst(DType::FLOAT32, 1.0f32));
        assert_eq!(rewrite(&one), one);
        // the load on the false side
        let flipped = g.where_(zero, load);
        assert_eq!(rewrite(&flipped), flipped);
    }
}
