//! Adjacent reduce ranges merged into one, where the kernel's indexing allows.
//!
//! A reduction over a `(6, 6)` window of a contiguous `(..., 6, 6)` buffer reads 36 consecutive
//! elements, but as two loops the inner one has 6 iterations: a 4-lane vector and a scalar tail
//! of 2, with loop overhead per 6 elements (batch-norm statistics of a conv output ran at
//! 1-6 GB/s). Merged, it is one loop of 36 = 9 vectors. Two reduce ranges `a` (outer) and `b`
//! (inner, size `s`) of the same reductions merge into `r` of size `|a| * s` when substituting
//! `a = r // s`, `b = r % s` simplifies every division and modulo of `r` away (tinygrad merges
//! the same dimensions when every view's strides allow it).

use std::collections::HashMap;

use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// Merges adjacent reduce ranges wherever the simplified kernel no longer divides them apart.
pub fn merge_reduce_ranges(ast: &UOp) -> UOp {
    let mut ast = ast.clone();
    // each merge removes a range: at most as many rounds as ranges
    'rounds: loop {
        let reduces: Vec<UOp> = ast
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Ops::Reduce)
            .collect();
        for r in &reduces {
            let ranges = &r.src()[1..];
            for a in ranges {
                for b in ranges {
                    if a != b
                        && let Some(merged) = try_merge(&ast, &reduces, a, b)
                    {
                        ast = merged;
                        continue 'rounds;
                    }
                }
            }
        }
        return ast;
    }
}

/// `ast` with reduce ranges `a` (outer) and `b` (inner) merged, if every reduction uses both or
/// neither and the merged index needs no division.
fn try_merge(ast: &UOp, reduces: &[UOp], a: &UOp, b: &UOp) -> Option<UOp> {
    let reduce_axis = |r: &UOp| matches!(r.arg(), Arg::Range(_, AxisKind::Reduce));
    if a.op() != Ops::Range || b.op() != Ops::Range || !reduce_axis(a) || !reduce_axis(b) {
        return None;
    }
    let (sa, sb) = (a.s(0).as_int()?, b.s(0).as_int()?);
    if sa < 2 || sb < 2 {
        return None;
    }
    let Arg::Range(id, _) = a.arg() else {
        return None;
    };
    let merged = UOp::range(sa * sb, *id, AxisKind::Reduce);
    // the reductions: ranges (.., a, .., b, ..) -> (.., merged, ..)
    let mut new_reduces = HashMap::new();
    for r in reduces {
        let ranges = &r.src()[1..];
        match (ranges.contains(a), ranges.contains(b)) {
            (false, false) => {}
            (true, true) => {
                let mut src = vec![r.s(0).clone()];
                for x in ranges {
                    if x == a {
                        src.push(merged.clone());
                    } else if x != b {
                        src.push(x.clone());
                    }
                }
                new_reduces.insert(r.clone(), r.with_src(src));
            }
            _ => return None,
        }
    }
    let split = HashMap::from([(a.clone(), merged.idiv(sb)), (b.clone(), &merged % sb)]);
    let out = ast.substitute(&new_reduces).substitute(&split);
    let out = tinygrad_uop::graph_rewrite(&out, tinygrad_uop::sym(), &mut (), false);
    let divides = out
        .toposort()
        .into_iter()
        .any(|u| matches!(u.op(), Ops::IDiv | Ops::Mod) && u.has_parent(&merged));
    (!divides).then_some(out)
}

#[cfg(test)]
mod tests {
    use tinygrad_dtype::{AddrSpace, DType};

    use super::*;

    fn global(slot: i64) -> UOp {
        UOp::new(
            Ops::DefineGlobal,
            DType::FLOAT32.ptr(AddrSpace::Global),
            vec![],
            Arg::Int(slot),
        )
    }

    /// `out[c] = sum_{n, i, j} in[n*s_n + c*36 + i*s_i + j]` over ranges of sizes (4, 6, 6).
    fn kernel(s_i: i64) -> (UOp, Vec<UOp>) {
        let c = UOp::range(8i64, 0, AxisKind::Loop);
        let n = UOp::range(4i64, 1, AxisKind::Reduce);
        let i = UOp::range(6i64, 2, AxisKind::Reduce);
        let j = UOp::range(6i64, 3, AxisKind::Reduce);
        let idx = &n * 288 + &c * 36 + &i * s_i + &j;
        let load = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![UOp::new(
                Ops::Index,
                global(1).dtype(),
                vec![global(1), idx],
                Arg::None,
            )],
            Arg::None,
        );
        let red = UOp::new(
            Ops::Reduce,
            DType::FLOAT32,
            vec![load, n.clone(), i.clone(), j.clone()],
            Arg::Op(Ops::Add),
        );
        let store = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![
                UOp::new(Ops::Index, global(0).dtype(), vec![global(0), c], Arg::None),
                red,
            ],
            Arg::None,
        );
        (
            UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None),
            vec![n, i, j],
        )
    }

    fn reduce_sizes(ast: &UOp) -> Vec<i64> {
        let r = ast
            .toposort()
            .into_iter()
            .find(|u| u.op() == Ops::Reduce)
            .expect("a reduce");
        r.src()[1..]
            .iter()
            .map(|x| x.s(0).as_int().unwrap())
            .collect()
    }

    #[test]
    fn contiguous_window_merges() {
        let (ast, _) = kernel(6);
        let merged = merge_reduce_ranges(&ast);
        // (4, 6, 6): the two window axes are contiguous, the batch axis is not (stride 288)
        assert_eq!(reduce_sizes(&merged), vec![4, 36]);
    }

    #[test]
    fn strided_window_stays() {
        // rows 7 apart: i*7 + j is not a 36-element run
        let (ast, _) = kernel(7);
        assert_eq!(reduce_sizes(&merge_reduce_ranges(&ast)), vec![4, 6, 6]);
    }
}
