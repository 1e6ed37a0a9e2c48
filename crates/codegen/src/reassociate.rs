//! Reassociation of index sums by loop level, so loop-invariant parts are hoisted.
//!
//! The linearizer places every node in the innermost loop among the ranges it depends on. An
//! index sum built by lowering movement ops interleaves terms of different loops, e.g. in the
//! im2col packing of a convolution `((c*576 + row_b) + kx) + row_x + ky*24 + row_y` where `c`,
//! `kx`, `ky` change with the inner (K) loop and the `row_*` terms only with the outer one: every
//! partial sum depends on the inner loop, so all five additions run per element. Summed outer
//! terms first — `(row_b + row_x + row_y) + (c*576 + kx + ky*24)` — the outer part is computed
//! once per outer iteration and each element costs one addition.
//!
//! [`reassociate_index_sums`] flattens every `index`-typed chain of `Add`s into its terms, groups
//! them by the depth of the innermost loop each depends on, sums each group on its own and adds
//! the group sums from the outermost level in, constants last (so a constant offset stays the
//! outermost addition, where renderers fold it into the address). Integer addition is
//! associative, so values are unchanged.

use std::collections::HashMap;

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// The kernel `ast` with its index sums ordered by loop level (see the module docs).
pub fn reassociate_index_sums(ast: &UOp) -> UOp {
    let topo = ast.toposort();
    let depth = loop_depths(&topo);
    // the ranges each node depends on (a reduce hides its own, as in the linearizer) and the
    // deepest of them (-1: none)
    let mut deps: HashMap<UOp, Vec<UOp>> = HashMap::new();
    let mut level: HashMap<UOp, i64> = HashMap::new();
    for n in &topo {
        let srcs = if n.op() == Ops::Reduce {
            &n.src()[..1]
        } else {
            n.src()
        };
        let mut d: Vec<UOp> = Vec::new();
        for s in srcs {
            for r in &deps[s] {
                if !d.contains(r) {
                    d.push(r.clone());
                }
            }
        }
        match n.op() {
            Ops::Range => d.push(n.clone()),
            Ops::Reduce => d.retain(|r| !n.src()[1..].contains(r)),
            _ => {}
        }
        let l = d.iter().map(|r| depth[r]).max().unwrap_or(-1);
        level.insert(n.clone(), l);
        deps.insert(n.clone(), d);
    }
    let mut new: HashMap<UOp, UOp> = HashMap::new();
    for n in &topo {
        let rebuilt = if is_index_add(n) {
            let mut terms = Vec::new();
            flatten(n, &mut terms);
            let mut consts: Vec<UOp> = Vec::new();
            let mut others: Vec<(i64, UOp)> = Vec::new();
            for t in terms {
                if t.op() == Ops::Const {
                    consts.push(new[&t].clone());
                } else {
                    others.push((level[&t], new[&t].clone()));
                }
            }
            others.sort_by_key(|(l, _)| *l);
            if consts.len() > 1
                && let Some(sum) = consts.iter().map(|c| c.as_int()).sum::<Option<i64>>()
            {
                consts = vec![UOp::index(sum)];
            }
            // one partial sum per level, then the levels from the outermost in: each level's
            // sum is computed once in its loop and shared by everything deeper
            let mut groups: Vec<UOp> = Vec::new();
            let mut last_level = None;
            for (l, t) in others {
                match groups.last_mut() {
                    Some(g) if last_level == Some(l) => *g = g.add(&t),
                    _ => groups.push(t),
                }
                last_level = Some(l);
            }
            let mut it = groups.into_iter().chain(consts);
            let first = it.next().expect("an add has terms");
            it.fold(first, |acc, t| acc.add(&t))
        } else {
            let src: Vec<UOp> = n.src().iter().map(|s| new[s].clone()).collect();
            if src.iter().zip(n.src()).all(|(a, b)| a == b) {
                n.clone()
            } else {
                n.with_src(src)
            }
        };
        new.insert(n.clone(), rebuilt);
    }
    new[ast].clone()
}

fn is_index_add(n: &UOp) -> bool {
    n.op() == Ops::Add && n.dtype() == DType::INDEX
}

/// The terms of an `index` add chain (through nested adds), left to right.
fn flatten(n: &UOp, out: &mut Vec<UOp>) {
    for s in n.src() {
        if is_index_add(s) {
            flatten(s, out);
        } else {
            out.push(s.clone());
        }
    }
}

/// The nesting depth of each loop range, as the linearizer nests them: output ranges in id
/// order (outermost first), then reduce ranges in id order inside them.
fn loop_depths(topo: &[UOp]) -> HashMap<UOp, i64> {
    let mut ranges: Vec<(bool, usize, UOp)> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .map(|r| match r.arg() {
            Arg::Range(id, kind) => (*kind == AxisKind::Reduce, *id, r.clone()),
            _ => (false, usize::MAX, r.clone()),
        })
        .collect();
    ranges.sort_by_key(|(reduce, id, _)| (*reduce, *id));
    ranges
        .into_iter()
        .enumerate()
        .map(|(i, (_, _, r))| (r, i as i64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level_of_terms(sum: &UOp, ranges: &[UOp]) -> Vec<i64> {
        let mut terms = Vec::new();
        flatten(sum, &mut terms);
        terms
            .iter()
            .map(|t| {
                let topo = t.toposort();
                ranges
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| topo.contains(r))
                    .map(|(i, _)| i as i64)
                    .max()
                    .unwrap_or(-1)
            })
            .collect()
    }

    #[test]
    fn outer_terms_are_summed_first_and_constants_last() {
        let outer = UOp::range(8, 0, AxisKind::Loop);
        let inner = UOp::range(5, 1, AxisKind::Loop);
        // ((inner*3 + 7) + outer*10) + (inner + outer*2) + 4
        let sum = inner
            .mul(3i64)
            .add(7i64)
            .add(outer.mul(10i64))
            .add(inner.add(outer.mul(2i64)))
            .add(4i64);
        let out = reassociate_index_sums(&sum);
        let ranges = [outer.clone(), inner.clone()];
        assert_eq!(level_of_terms(&out, &ranges), vec![0, 0, 1, 1, -1]);
        // (outer*10 + outer*2) + (inner*3 + inner) + 11: one sum per level
        let (outer_part, inner_part) = (out.s(0).s(0), out.s(0).s(1));
        assert!(!outer_part.toposort().contains(&inner), "{}", out.pretty());
        assert!(!inner_part.toposort().contains(&outer), "{}", out.pretty());
        // constants are folded into one, the last term
        assert_eq!(out.s(1).as_int(), Some(11));
        // same values everywhere
        for o in 0..8i64 {
            for i in 0..5i64 {
                let v = |u: &UOp| {
                    let m: HashMap<UOp, UOp> = [
                        (outer.clone(), UOp::index(o)),
                        (inner.clone(), UOp::index(i)),
                    ]
                    .into();
                    tinygrad_uop::graph_rewrite(
                        &u.substitute(&m),
                        tinygrad_uop::sym(),
                        &mut (),
                        false,
                    )
                    .as_int()
                };
                assert_eq!(v(&out), v(&sum));
                assert_eq!(v(&out), Some(i * 3 + 7 + o * 10 + i + o * 2 + 4));
            }
        }
    }
}
