//! Expansion of lane axes: every node computed once per lane combination, with the vector axis
//! as SIMD vectors (tinygrad's "expand").

use std::collections::HashMap;

use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use super::apply::LaneAxis;
use super::{VECTOR_WIDTH, affine_coeff, vector_io, vector_native};

/// One value of an expanded node at one combination of its non-vector lanes.
#[derive(Clone, Debug)]
enum Val {
    /// The same for every vector lane.
    S(UOp),
    /// One scalar per vector lane.
    L(Vec<UOp>),
    /// A vector UOp (`dtype.vec(VECTOR_WIDTH)`).
    V(UOp),
}

/// An expanded node: its values for every combination of the (non-vector) lane axes it depends
/// on (`axes`, row-major, the last axis fastest).
#[derive(Clone, Debug)]
struct Ex {
    axes: Vec<usize>,
    vals: Vec<Val>,
}

pub(super) struct Expander {
    lanes: Vec<LaneAxis>,
    vector: Option<UOp>,
    memo: HashMap<UOp, Ex>,
    coeff_memo: HashMap<UOp, Option<i64>>,
}

impl Expander {
    pub(super) fn new(lanes: Vec<LaneAxis>, vector: Option<UOp>) -> Self {
        Expander {
            lanes,
            vector,
            memo: HashMap::new(),
            coeff_memo: HashMap::new(),
        }
    }

    fn w(&self) -> usize {
        VECTOR_WIDTH
    }

    /// The entry of `ex` at the full lane assignment `at` (one value per lane axis).
    fn at<'e>(&self, ex: &'e Ex, at: &[usize]) -> &'e Val {
        let mut i = 0;
        for &a in &ex.axes {
            i = i * self.lanes[a].size + at[a];
        }
        &ex.vals[i]
    }

    /// Every assignment of the lane axes `axes` (others 0), row-major.
    fn combos(&self, axes: &[usize]) -> Vec<Vec<usize>> {
        let mut out = vec![vec![0usize; self.lanes.len()]];
        for &a in axes {
            let mut next = Vec::with_capacity(out.len() * self.lanes[a].size);
            for c in &out {
                for v in 0..self.lanes[a].size {
                    let mut c = c.clone();
                    c[a] = v;
                    next.push(c);
                }
            }
            out = next;
        }
        out
    }

    fn to_v(&self, v: &Val) -> UOp {
        match v {
            Val::V(x) => x.clone(),
            Val::S(x) => UOp::new(
                Ops::Vectorize,
                x.dtype().vec(self.w()),
                vec![x.clone(); self.w()],
                Arg::None,
            ),
            Val::L(xs) => UOp::new(
                Ops::Vectorize,
                xs[0].dtype().vec(self.w()),
                xs.clone(),
                Arg::None,
            ),
        }
    }

    fn to_l(&self, v: &Val) -> Vec<UOp> {
        match v {
            Val::S(x) => vec![x.clone(); self.w()],
            Val::L(xs) => xs.clone(),
            Val::V(x) => (0..self.w())
                .map(|k| {
                    UOp::new(
                        Ops::Gep,
                        x.dtype().scalar(),
                        vec![x.clone()],
                        Arg::Int(k as i64),
                    )
                })
                .collect(),
        }
    }

    /// Builds `op` (scalar result dtype `dt`) over expanded sources.
    fn build(&self, op: Ops, dt: DType, arg: &Arg, vals: &[Val]) -> Val {
        if vals.iter().all(|v| matches!(v, Val::S(_))) {
            let src: Vec<UOp> = vals
                .iter()
                .map(|v| match v {
                    Val::S(x) => x.clone(),
                    _ => unreachable!("all scalar"),
                })
                .collect();
            return Val::S(UOp::new(op, dt, src, arg.clone()));
        }
        let src_dts: Vec<DType> = vals
            .iter()
            .map(|v| match v {
                Val::S(x) | Val::V(x) => x.dtype().scalar(),
                Val::L(xs) => xs[0].dtype(),
            })
            .collect();
        let shift = matches!(op, Ops::Shl | Ops::Shr);
        let scalar_shift = shift && matches!(vals[1], Val::S(_));
        // Per-lane 32-bit values (computed from lane indices, e.g. a counter for a random
        // generator) are packed into a vector once, so the ops after them run as vectors too;
        // bool lanes are left alone (their vector form is a comparison's mask).
        let packable = vals.iter().any(|v| matches!(v, Val::L(_)))
            && src_dts
                .iter()
                .all(|d| matches!(d.kind(), Scalar::Float32 | Scalar::Int32 | Scalar::UInt32));
        if (vals.iter().any(|v| matches!(v, Val::V(_))) || packable)
            && vector_native(op, dt, &src_dts, scalar_shift)
        {
            let src: Vec<UOp> = vals
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Val::S(x) if shift && i == 1 => x.clone(),
                    v => self.to_v(v),
                })
                .collect();
            return Val::V(UOp::new(op, dt.vec(self.w()), src, arg.clone()));
        }
        let lanes: Vec<Vec<UOp>> = vals.iter().map(|v| self.to_l(v)).collect();
        Val::L(
            (0..self.w())
                .map(|k| {
                    let src: Vec<UOp> = lanes.iter().map(|l| l[k].clone()).collect();
                    UOp::new(op, dt, src, arg.clone())
                })
                .collect(),
        )
    }

    fn union_axes(&self, exs: &[&Ex]) -> Vec<usize> {
        let mut axes: Vec<usize> = exs.iter().flat_map(|e| e.axes.iter().copied()).collect();
        axes.sort_unstable();
        axes.dedup();
        axes
    }

    fn coeff_vec(&mut self, idx: &UOp) -> Option<i64> {
        match &self.vector {
            Some(v) => affine_coeff(idx, &v.clone(), &mut self.coeff_memo),
            None => Some(0),
        }
    }

    pub(super) fn run(mut self, ast: &UOp) -> UOp {
        for (i, l) in self.lanes.iter().enumerate() {
            let ex = Ex {
                axes: vec![i],
                vals: (0..l.size).map(|v| Val::S(UOp::index(v as i64))).collect(),
            };
            self.memo.insert(l.range.clone(), ex);
        }
        if let Some(v) = &self.vector {
            let ex = Ex {
                axes: vec![],
                vals: vec![Val::L(
                    (0..self.w()).map(|k| UOp::index(k as i64)).collect(),
                )],
            };
            self.memo.insert(v.clone(), ex);
        }
        let topo = ast.toposort();
        for n in &topo {
            if self.memo.contains_key(n) {
                continue;
            }
            let ex = match n.op() {
                Ops::Load if n.s(0).op() == Ops::Index => self.load(n),
                Ops::Store => self.store(n),
                Ops::Reduce => self.reduce(n),
                Ops::Sink => {
                    let mut stores = Vec::new();
                    for s in n.src() {
                        for v in &self.memo[s].vals {
                            match v {
                                Val::S(x) | Val::V(x) => stores.push(x.clone()),
                                Val::L(xs) => stores.extend(xs.iter().cloned()),
                            }
                        }
                    }
                    Ex {
                        axes: vec![],
                        vals: vec![Val::S(n.with_src(stores))],
                    }
                }
                _ if n.src().is_empty() => Ex {
                    axes: vec![],
                    vals: vec![Val::S(n.clone())],
                },
                _ => self.generic(n),
            };
            self.memo.insert(n.clone(), ex);
        }
        match &self.memo[ast].vals[0] {
            Val::S(x) => x.clone(),
            _ => unreachable!("the sink is scalar"),
        }
    }

    fn generic(&mut self, n: &UOp) -> Ex {
        let srcs: Vec<Ex> = n.src().iter().map(|s| self.memo[s].clone()).collect();
        let axes = self.union_axes(&srcs.iter().collect::<Vec<_>>());
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let v: Vec<Val> = srcs.iter().map(|e| self.at(e, c).clone()).collect();
                self.build(n.op(), n.dtype(), n.arg(), &v)
            })
            .collect();
        Ex { axes, vals }
    }

    fn index_parts(&self, index: &UOp) -> (UOp, Ex, Option<Ex>) {
        let g = index.s(0).clone();
        let idx = self.memo[index.s(1)].clone();
        let gate = index.src().get(2).map(|v| self.memo[v].clone());
        (g, idx, gate)
    }

    fn mk_index(g: &UOp, idx: &UOp, gate: Option<&UOp>) -> UOp {
        let mut src = vec![g.clone(), idx.simplify()];
        if let Some(v) = gate {
            src.push(v.simplify());
        }
        UOp::new(Ops::Index, g.dtype(), src, Arg::None)
    }

    fn load(&mut self, n: &UOp) -> Ex {
        let index = n.s(0);
        let (g, idx, gate) = self.index_parts(index);
        let contiguous = self.coeff_vec(index.s(1)) == Some(1);
        let mut parts = vec![&idx];
        if let Some(gx) = &gate {
            parts.push(gx);
        }
        let axes = self.union_axes(&parts);
        let dt = n.dtype();
        let mk_load = |i: &UOp, gv: Option<&UOp>, dt: DType| {
            UOp::new(
                Ops::Load,
                dt,
                vec![Self::mk_index(&g, i, gv)],
                n.arg().clone(),
            )
        };
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let iv = self.at(&idx, c);
                let gv = gate.as_ref().map(|gx| self.at(gx, c));
                let gate_scalar = match gv {
                    None => Some(None),
                    Some(Val::S(x)) => Some(Some(x)),
                    _ => None,
                };
                match (iv, gate_scalar) {
                    (Val::S(i), Some(gs)) => Val::S(mk_load(i, gs, dt)),
                    (Val::L(ls), Some(gs)) if contiguous && vector_io(dt) => {
                        Val::V(mk_load(&ls[0], gs, dt.vec(self.w())))
                    }
                    // A contiguous load gated lane by lane (a padded row, whose border lanes
                    // read nothing): one vector load with a lane mask, which the backend runs
                    // as a plain vector load where every lane is valid (the row's interior).
                    (Val::L(ls), None) if contiguous && vector_io(dt) && !dt.is_bool() => {
                        let mask = gv.map(|g| self.to_v(g));
                        Val::V(mk_load(&ls[0], mask.as_ref(), dt.vec(self.w())))
                    }
                    _ => {
                        let il = self.to_l(iv);
                        let gl = gv.map(|g| self.to_l(g));
                        Val::L(
                            (0..self.w())
                                .map(|k| mk_load(&il[k], gl.as_ref().map(|g| &g[k]), dt))
                                .collect(),
                        )
                    }
                }
            })
            .collect();
        Ex { axes, vals }
    }

    fn store(&mut self, n: &UOp) -> Ex {
        let index = n.s(0);
        let (g, idx, gate) = self.index_parts(index);
        let value = self.memo[n.s(1)].clone();
        let contiguous = self.coeff_vec(index.s(1)) == Some(1);
        let mut parts = vec![&idx, &value];
        if let Some(gx) = &gate {
            parts.push(gx);
        }
        let axes = self.union_axes(&parts);
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let iv = self.at(&idx, c);
                let vv = self.at(&value, c);
                let gv = gate.as_ref().map(|gx| self.at(gx, c));
                let st = |i: &UOp, gv: Option<&UOp>, v: UOp| {
                    UOp::new(
                        Ops::Store,
                        DType::VOID,
                        vec![Self::mk_index(&g, i, gv), v],
                        n.arg().clone(),
                    )
                };
                match (iv, vv, gv) {
                    (Val::S(i), Val::S(v), None | Some(Val::S(_))) => {
                        let gs = gv.map(|g| self.to_l(g)[0].clone());
                        Val::S(st(i, gs.as_ref(), v.clone()))
                    }
                    (Val::L(ls), vv, None | Some(Val::S(_)))
                        if contiguous && vector_io(n.s(1).dtype()) =>
                    {
                        let gs = gv.map(|g| self.to_l(g)[0].clone());
                        Val::S(st(&ls[0], gs.as_ref(), self.to_v(vv)))
                    }
                    _ => {
                        let il = self.to_l(iv);
                        let vl = self.to_l(vv);
                        let gl = gv.map(|g| self.to_l(g));
                        Val::L(
                            (0..self.w())
                                .map(|k| st(&il[k], gl.as_ref().map(|g| &g[k]), vl[k].clone()))
                                .collect(),
                        )
                    }
                }
            })
            .collect();
        Ex { axes, vals }
    }

    /// Folds `vals` with `op` pairwise (a balanced tree).
    fn fold(&self, op: Ops, dt: DType, mut vals: Vec<Val>) -> Val {
        while vals.len() > 1 {
            let mut next = Vec::with_capacity(vals.len().div_ceil(2));
            let mut it = vals.into_iter();
            while let Some(a) = it.next() {
                match it.next() {
                    Some(b) => next.push(self.build(op, dt, &Arg::None, &[a, b])),
                    None => next.push(a),
                }
            }
            vals = next;
        }
        vals.pop().expect("at least one value")
    }

    fn reduce(&mut self, n: &UOp) -> Ex {
        let Arg::Op(op) = n.arg().clone() else {
            panic!("Reduce without op")
        };
        let dt = n.dtype();
        let value = self.memo[n.s(0)].clone();
        let lane_of: HashMap<UOp, usize> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(i, l)| (l.range.clone(), i))
            .collect();
        let mut real = Vec::new();
        let mut reduced = Vec::new();
        let mut vec_reduced = false;
        for r in &n.src()[1..] {
            if let Some(&a) = lane_of.get(r) {
                reduced.push(a);
            } else if Some(r) == self.vector.as_ref() {
                vec_reduced = true;
            } else {
                real.push(r.clone());
            }
        }
        let axes: Vec<usize> = value
            .axes
            .iter()
            .copied()
            .filter(|a| !reduced.contains(a))
            .collect();
        let acc = |x: UOp| {
            if real.is_empty() {
                x
            } else {
                let mut src = vec![x.clone()];
                src.extend(real.iter().cloned());
                UOp::new(Ops::Reduce, x.dtype(), src, Arg::Op(op))
            }
        };
        let vals = self
            .combos(&axes)
            .iter()
            .map(|c| {
                let mut accs = Vec::new();
                for u in self.combos(&reduced) {
                    let mut full = c.clone();
                    for &a in &reduced {
                        full[a] = u[a];
                    }
                    let e = self.at(&value, &full).clone();
                    let e = match e {
                        Val::V(x) if !vector_native(op, dt, &[dt, dt], false) => {
                            Val::L(self.to_l(&Val::V(x)))
                        }
                        e => e,
                    };
                    let a = match e {
                        Val::S(x) => Val::S(acc(x)),
                        Val::V(x) => Val::V(acc(x)),
                        Val::L(xs) => Val::L(xs.into_iter().map(acc).collect()),
                    };
                    let a = if vec_reduced {
                        let lanes = match &a {
                            Val::S(x) => vec![x.clone(); self.w()],
                            other => self.to_l(other),
                        };
                        self.fold(op, dt, lanes.into_iter().map(Val::S).collect())
                    } else {
                        a
                    };
                    accs.push(a);
                }
                self.fold(op, dt, accs)
            })
            .collect();
        Ex { axes, vals }
    }
}
