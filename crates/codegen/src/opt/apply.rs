//! Applying opts: [`apply_opts`] splits ranges into lane axes, reorders the output loops and
//! hands the AST to the lane expansion.

use std::collections::{HashMap, HashSet};

use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

use super::expand::Expander;
use super::{KernelOpts, VECTOR_WIDTH, range_id, range_kind, range_size};

/// One lane axis after a split.
#[derive(Clone, Debug)]
pub(super) struct LaneAxis {
    pub(super) range: UOp,
    pub(super) size: usize,
}

/// Applies `opts` to a kernel AST and expands the lane axes. Returns the new AST, or why the
/// opts do not fit this kernel.
pub fn apply_opts(ast: &UOp, opts: &KernelOpts) -> Result<UOp, String> {
    if opts.is_empty() {
        return Ok(ast.clone());
    }
    let mut next_id = ast
        .toposort()
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .map(|r| range_id(r) + 1)
        .max()
        .unwrap_or(0);
    let mut ast = ast.clone();
    let mut lanes: Vec<LaneAxis> = Vec::new();
    let mut vector: Option<UOp> = None;
    // Reductions split with a remainder (a main part and a tail over fresh copies of the other
    // ranges): another split of them would have to split both consistently, so it is refused.
    // A split without a remainder leaves one reduction that can be split again.
    let mut split_reduces: HashSet<UOp> = HashSet::new();
    for sp in &opts.splits {
        let topo = ast.toposort();
        let r = topo
            .iter()
            .find(|n| n.op() == Ops::Range && range_id(n) == sp.axis)
            .cloned()
            .ok_or_else(|| format!("no range {} to split", sp.axis))?;
        let n = range_size(&r).ok_or("symbolic range size")?;
        let p: usize = sp.lanes.iter().product();
        if sp.lanes.is_empty() || sp.lanes.contains(&0) || p < 2 || n < p {
            return Err(format!(
                "can't split range {} of {n} into {:?}",
                sp.axis, sp.lanes
            ));
        }
        if sp.vector && (sp.lanes[0] != VECTOR_WIDTH || vector.is_some()) {
            return Err("one vector axis of the vector width".into());
        }
        let kind = range_kind(&r);
        let reduce = kind == AxisKind::Reduce;
        let lane_kind = if reduce {
            AxisKind::Unroll
        } else {
            AxisKind::Upcast
        };
        let mut lane_expr: Option<UOp> = None;
        let mut lane_ranges = Vec::new();
        let mut stride = 1usize;
        for (i, &sz) in sp.lanes.iter().enumerate() {
            let l = UOp::range(sz as i64, next_id, lane_kind);
            next_id += 1;
            if sp.vector && i == 0 {
                vector = Some(l.clone());
            } else {
                lanes.push(LaneAxis {
                    range: l.clone(),
                    size: sz,
                });
            }
            let term = if stride == 1 {
                l.clone()
            } else {
                &l * (stride as i64)
            };
            lane_expr = Some(match lane_expr {
                None => term,
                Some(e) => e + term,
            });
            lane_ranges.push(l);
            stride *= sz;
        }
        let lane_expr = lane_expr.expect("at least one lane");
        if !reduce {
            // Split entirely into lanes: no outer loop of one iteration is left (a loop in the
            // generated code, whose header every lane's values would have to live across),
            // unless a loop order names it.
            if n == p && opts.order.is_none() {
                ast = ast.substitute(&HashMap::from([(r, lane_expr)]));
                continue;
            }
            let o = UOp::range(n.div_ceil(p) as i64, sp.axis, kind);
            let base = if n % p == 0 {
                &o * (p as i64)
            } else {
                (&o * (p as i64)).minimum((n - p) as i64)
            };
            ast = ast.substitute(&HashMap::from([(r, base + lane_expr)]));
            continue;
        }
        let (m, t) = (n / p, n % p);
        let o = UOp::range(m as i64, sp.axis, kind);
        let mut map = HashMap::new();
        for red in topo
            .iter()
            .filter(|x| x.op() == Ops::Reduce && x.src()[1..].contains(&r))
        {
            if split_reduces.contains(red) {
                return Err("one split per reduction".into());
            }
            let Arg::Op(op) = red.arg() else {
                return Err("Reduce without op".into());
            };
            let val = red.s(0);
            // Split entirely into lanes (m == 1): no loop of one iteration is left.
            let whole = m == 1;
            let main_val = val.substitute(&HashMap::from([(
                r.clone(),
                if whole {
                    lane_expr.clone()
                } else {
                    &o * (p as i64) + lane_expr.clone()
                },
            )]));
            let mut src = vec![main_val];
            src.extend(red.src()[1..].iter().filter_map(|x| {
                if *x != r {
                    Some(x.clone())
                } else if whole {
                    None
                } else {
                    Some(o.clone())
                }
            }));
            src.extend(lane_ranges.iter().cloned());
            let main = UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone());
            let result = if t == 0 {
                main
            } else {
                // The remainder: the last t iterations, with fresh copies of the other ranges.
                let tr = UOp::range(t as i64, next_id, AxisKind::Reduce);
                next_id += 1;
                let mut tmap = HashMap::new();
                tmap.insert(r.clone(), UOp::index((m * p) as i64) + tr.clone());
                let mut tail_src = vec![];
                for x in &red.src()[1..] {
                    if *x == r {
                        tail_src.push(tr.clone());
                    } else {
                        let f = UOp::range(x.s(0).clone(), next_id, AxisKind::Reduce);
                        next_id += 1;
                        tmap.insert(x.clone(), f.clone());
                        tail_src.push(f);
                    }
                }
                let mut src = vec![val.substitute(&tmap)];
                src.extend(tail_src);
                let tail = UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone());
                split_reduces.insert(main.clone());
                split_reduces.insert(tail.clone());
                main.alu(*op, &[tail])
            };
            map.insert(red.clone(), result);
        }
        if map.is_empty() {
            return Err(format!("reduce range {} is in no reduction", sp.axis));
        }
        ast = ast.substitute(&map);
    }
    if let Some(order) = &opts.order {
        ast = reorder_outputs(&ast, order)?;
    }
    Ok(Expander::new(lanes, vector).run(&ast))
}

/// Renumbers the output ranges so they nest in `order` (outermost first).
fn reorder_outputs(ast: &UOp, order: &[usize]) -> Result<UOp, String> {
    let topo = ast.toposort();
    let in_reduce: HashSet<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Reduce)
        .flat_map(|n| n.src()[1..].to_vec())
        .collect();
    let outs: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range && !in_reduce.contains(*n))
        .filter(|n| matches!(range_kind(n), AxisKind::Loop | AxisKind::Global))
        .cloned()
        .collect();
    let mut ids: Vec<usize> = outs.iter().map(range_id).collect();
    ids.sort_unstable();
    let mut want = order.to_vec();
    want.sort_unstable();
    if want != ids {
        return Err(format!("order {order:?} is not a permutation of {ids:?}"));
    }
    let map: HashMap<UOp, UOp> = outs
        .iter()
        .map(|r| {
            let pos = order
                .iter()
                .position(|&x| x == range_id(r))
                .expect("checked");
            (r.clone(), r.with_arg(Arg::Range(ids[pos], range_kind(r))))
        })
        .collect();
    Ok(ast.substitute(&map))
}
