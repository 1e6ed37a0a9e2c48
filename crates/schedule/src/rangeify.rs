//! Lowering one realized tensor node into a kernel AST: movement ops become index arithmetic on
//! loop ranges (tinygrad's "rangeify"), so views are never copied.
//!
//! Each kernel output gets one `Range` per dimension of size > 1. Walking the tensor graph from
//! the output, every node is evaluated at a tuple of index expressions (one per dimension of its
//! shape) and an optional validity condition (from padding):
//! - `Reshape`: linearize with the output shape, de-linearize with the input shape;
//! - `Permute`: reorder; `Expand`: broadcast axes read index 0; `Shrink`: add the start;
//!   `Flip`: `size-1-i`; `Pad`: subtract the padding, and the result is `valid ? x : 0`;
//! - `ReduceAxis`: fresh `Reduce` ranges for the reduced axes, wrapped in a kernel `Reduce`;
//! - buffers and realized nodes: a `Load` from a global, gated by the validity condition.
//!
//! While walking, the lowering finds reductions that must be realized first (see
//! [`Lowering::must_realize_reduce`]) and reports them instead of inlining them.

use std::collections::HashMap;

use tinygrad_dtype::{AddrSpace, DType};
use tinygrad_uop::{Arg, AxisKind, Ops, SInt, UOp};

/// Row-major strides of a contiguous shape.
pub fn strides_for(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1].max(1);
    }
    st
}

/// Linear index of `idx` in a contiguous buffer of `shape`.
pub fn linearize(idx: &[UOp], shape: &[usize]) -> UOp {
    let shape: Vec<SInt> = shape.iter().map(|&d| SInt::Const(d)).collect();
    linearize_sym(idx, &shape)
}

/// Row-major strides of a contiguous shape whose sizes may be symbolic.
pub fn strides_sym(shape: &[SInt]) -> Vec<SInt> {
    let mut st = vec![SInt::Const(1); shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        let d = match &shape[i + 1] {
            SInt::Const(0) => SInt::Const(1),
            d => d.clone(),
        };
        st[i] = &st[i + 1] * &d;
    }
    st
}

/// [`linearize`] for a shape whose sizes may be symbolic (the strides are then expressions of
/// the variables).
pub fn linearize_sym(idx: &[UOp], shape: &[SInt]) -> UOp {
    let st = strides_sym(shape);
    let mut acc: Option<UOp> = None;
    for ((i, s), d) in idx.iter().zip(&st).zip(shape) {
        if *d == 1 {
            continue;
        }
        let term = match s {
            SInt::Const(1) => i.clone(),
            SInt::Const(c) => i * (*c as i64),
            SInt::Sym(u) => i * u,
        };
        acc = Some(match acc {
            None => term,
            Some(a) => a + term,
        });
    }
    acc.unwrap_or_else(|| UOp::index(0))
}

/// The identity element of a reduction.
pub fn reduce_identity(op: Ops, dt: DType) -> UOp {
    match op {
        // -0.0 for floats: the exact identity (`-0.0 + x == x` for every x, `+0.0 + -0.0` is
        // `+0.0`), so a sum or a one-hot gather of `-0.0` keeps its sign, as in torch
        Ops::Add if dt.base().is_float() => UOp::cnst(dt, -0.0),
        Ops::Add => UOp::cnst(dt, 0i64),
        Ops::Mul => UOp::cnst(dt, 1i64),
        Ops::Max => UOp::cnst(dt, dt.min()),
        _ => panic!("reduce_identity: {op} is not a reduce op"),
    }
}

/// The result of lowering a node: what the kernel computes, or a reduce that must be realized
/// first.
pub enum Lowered {
    /// The kernel's value expression.
    Value(UOp),
    /// This reduce node must become its own buffer before the kernel can be built.
    NeedsRealize(UOp),
}

/// State of one kernel's lowering.
pub struct Lowering<'a> {
    /// Nodes already realized (or to be): node -> global slot lookup key.
    pub realized: &'a dyn Fn(&UOp) -> bool,
    /// Global slot of each buffer-like input, in order of first use (slot 0 is the output).
    pub inputs: Vec<UOp>,
    /// Number of iterations of the kernel's output loops.
    pub out_elems: usize,
    next_range: usize,
    memo: HashMap<Key, UOp>,
    /// Set when a reduce that must be realized is found.
    pub found: Option<UOp>,
    /// Where each reduce and each computed node was inlined so far in this schedule: (kernel,
    /// index). Inlining the same reduce (or expensive node) a second time elsewhere would compute
    /// it twice, so it gets realized instead.
    pub seen: &'a mut HashMap<UOp, (usize, Vec<UOp>)>,
    /// Which kernel of the schedule this lowering builds.
    pub kernel: usize,
    /// The node this kernel computes (never realized from inside its own kernel).
    pub output: Option<UOp>,
    /// The buffers each node asked about reads (more than two make it expensive), in this
    /// schedule round.
    pub cost: &'a mut HashMap<UOp, Leaves>,
    /// The first reduction this kernel computes outside any other (one-hot gathers, which
    /// become loads, not counted): a second one beside it gets its own kernel.
    top_reduce: Option<UOp>,
}

impl<'a> Lowering<'a> {
    /// A lowering for a kernel whose output has `out_elems` elements and `n_out_ranges` ranges.
    pub fn new(
        realized: &'a dyn Fn(&UOp) -> bool,
        out_elems: usize,
        first_range: usize,
        seen: &'a mut HashMap<UOp, (usize, Vec<UOp>)>,
        cost: &'a mut HashMap<UOp, Leaves>,
        kernel: usize,
    ) -> Self {
        Lowering {
            realized,
            inputs: Vec::new(),
            out_elems,
            next_range: first_range,
            memo: HashMap::new(),
            found: None,
            seen,
            kernel,
            cost,
            output: None,
            top_reduce: None,
        }
    }

    fn global(&mut self, buf_node: &UOp) -> UOp {
        let slot = match self.inputs.iter().position(|b| b == buf_node) {
            Some(p) => p + 1,
            None => {
                self.inputs.push(buf_node.clone());
                self.inputs.len()
            }
        };
        global_for(buf_node.dtype(), slot)
    }

    /// Whether a reduce met inside the kernel must be realized on its own: when it sits inside
    /// another reduction, or when its result is broadcast (fewer results than the kernel loops
    /// over, so inlining would recompute it). (Symbolic sizes count at their largest values.)
    pub fn must_realize_reduce(&self, r: &UOp, inside_reduce: bool) -> bool {
        let elems: usize = r.shape_vec().iter().product();
        inside_reduce || elems < self.out_elems
    }

    /// Records the reduction `r`, lowered to `value` outside any other reduction: when this
    /// kernel already computes another one, `r` is realized instead. Two reductions side by side
    /// in one kernel (`conv(x) + conv(y)`: a ResNet block's residual branch and its projection
    /// shortcut) run as one loop nest that no GEMM path takes — ~20x slower than two GEMM
    /// kernels — and tinygrad gives each reduction its own kernel too. A one-hot gather is not a
    /// reduction here: it collapses into a load ([`crate::gather`]).
    // ResNet-50 ONNX batch 1: 377 -> 94 ms (with the GEMM orientation) (see docs/performance.md)
    fn note_top_reduce(&mut self, r: &UOp, value: &UOp) {
        if value.op() != Ops::Reduce || crate::gather::collapse_gathers(value).op() != Ops::Reduce {
            return;
        }
        match &self.top_reduce {
            None => self.top_reduce = Some(r.clone()),
            Some(first) if first != r && self.output.as_ref() != Some(r) => {
                if self.found.is_none() {
                    self.found = Some(r.clone());
                }
            }
            Some(_) => {}
        }
    }

    /// Whether the computed (elementwise) node `n`, evaluated here at `idx` with `red_iters`
    /// iterations of the reductions around it, must be realized instead of inlined: when it is
    /// expensive (it reads more than two buffers, or its float work is a transcendental's or
    /// more) and either inlined somewhere else too (another kernel, or another indexing in this
    /// one), or broadcast, so that this kernel evaluates it more times than it has elements (a
    /// matmul's operand, read once per output column).
    ///
    /// This is tinygrad's rule for keeping a buffer (`remove_bufferize`: a node read by several
    /// consumers stays a buffer unless it is computed from at most two buffers). Without it a
    /// transformer's residual stream is recomputed, every earlier layer over again, inside each
    /// later kernel: the cost of a kernel would grow with the depth of the graph before it.
    fn must_realize_computed(&mut self, n: &UOp, idx: &[UOp], red_iters: usize) -> bool {
        if self.output.as_ref() == Some(n) {
            // the kernel's own node: it is the buffer being computed
            return false;
        }
        let here = (self.kernel, idx.to_vec());
        let elsewhere = self.seen.get(n).is_some_and(|seen| *seen != here);
        let elems: usize = n.shape_vec().iter().product();
        let evaluations = self.out_elems.saturating_mul(red_iters.max(1));
        let broadcast = elems > 0 && evaluations >= elems.saturating_mul(2);
        if (elsewhere || broadcast) && (self.reads_many_buffers(n) || self.costly_to_recompute(n)) {
            return true;
        }
        self.seen.entry(n.clone()).or_insert(here);
        false
    }

    /// Whether computing `n` inline reads more than two buffers (buffers and realized nodes,
    /// counted once each), or contains a reduction — tinygrad's measure of a node too expensive
    /// to recompute in each consumer. Cheap nodes (a cast or a scale of one buffer, an `arange`)
    /// stay fused wherever they are used.
    fn reads_many_buffers(&mut self, n: &UOp) -> bool {
        matches!(self.leaves(n), Leaves::Many)
    }

    /// Whether computing `n` inline again costs more than storing it once and loading it: its
    /// float work per element (a transcendental counts [`TRANSCENDENTAL_WORK`] operations, every
    /// other float op one) reaches [`TRANSCENDENTAL_WORK`]. Storing and loading an element moves 8
    /// bytes (~0.4 ns at this machine's 20 GB/s on 2 cores), where the CPU's `exp` takes ~1.2 ns
    /// per element: softmax's `exp(x - max)` is computed once, not in both the sum's kernel and
    /// the division's. Integer and bool work (index arithmetic, `arange`, one-hot masks) is not
    /// counted: it stays fused, so gathers still collapse.
    fn costly_to_recompute(&mut self, n: &UOp) -> bool {
        matches!(self.leaves(n), Leaves::Few(_, work) if work >= TRANSCENDENTAL_WORK)
    }

    /// The buffers `n` reads when computed inline, memoized per schedule round: each node's set
    /// is the union of its sources' (so asking about every node of a graph is linear in it).
    fn leaves(&mut self, n: &UOp) -> Leaves {
        if let Some(l) = self.cost.get(n) {
            return l.clone();
        }
        let realized = self.realized;
        let is_leaf = |u: &UOp| u.op() == Ops::Buffer || (u != n && realized(u));
        // sources first, stopping at leaves and at nodes already known
        let order = n.toposort_filtered(|u| !self.cost.contains_key(u) && (u == n || !is_leaf(u)));
        for u in order {
            if self.cost.contains_key(&u) {
                continue;
            }
            let l = if u != *n && is_leaf(&u) || u.op() == Ops::Buffer {
                Leaves::Few(vec![u.clone()], 0)
            } else if u.op() == Ops::ReduceAxis {
                Leaves::Many
            } else {
                let mut few: Vec<UOp> = Vec::new();
                let mut many = false;
                let mut work = float_work(&u);
                for s in u.src() {
                    let ls = if s.op() == Ops::Buffer || realized(s) {
                        Leaves::Few(vec![s.clone()], 0)
                    } else {
                        self.cost.get(s).cloned().unwrap_or(Leaves::Many)
                    };
                    match ls {
                        Leaves::Many => many = true,
                        Leaves::Few(v, w) => {
                            work = work.saturating_add(w);
                            for b in v {
                                if !few.contains(&b) {
                                    few.push(b);
                                }
                            }
                        }
                    }
                    if many || few.len() > 2 {
                        many = true;
                        break;
                    }
                }
                if many {
                    Leaves::Many
                } else {
                    Leaves::Few(few, work)
                }
            };
            self.cost.insert(u, l);
        }
        self.cost.get(n).cloned().unwrap_or(Leaves::Many)
    }

    /// Lowers `node` evaluated at `idx` (one index per dimension) under `valid`.
    ///
    /// Iterative (an explicit stack of pending evaluations), so a graph of any depth lowers on a
    /// small thread stack. Evaluations are expanded in the order a recursive walk would meet them
    /// (sources left to right, each one's whole subgraph first), which keeps the numbering of
    /// reduce ranges and the realize decisions the same as the recursive definition's.
    pub fn lower(&mut self, node: &UOp, idx: &[UOp], valid: Option<&UOp>, in_red: bool) -> UOp {
        let root: Key = (
            node.clone(),
            idx.to_vec(),
            valid.cloned(),
            usize::from(in_red),
        );
        if let Some(v) = self.memo.get(&root) {
            return v.clone();
        }
        let mut stack = vec![Task::Expand(root.clone())];
        while let Some(task) = stack.pop() {
            match task {
                Task::Expand(key) => {
                    if self.memo.contains_key(&key) {
                        continue;
                    }
                    match self.step(&key) {
                        Step::Done(v) => {
                            self.memo.insert(key, v);
                        }
                        Step::Need(children, finish) => {
                            let pending: Vec<Task> =
                                children.iter().rev().cloned().map(Task::Expand).collect();
                            stack.push(Task::Finish(key, children, finish));
                            stack.extend(pending);
                        }
                    }
                }
                Task::Finish(key, children, finish) => {
                    let vals: Vec<UOp> = children
                        .iter()
                        .map(|c| self.memo.get(c).expect("sources lowered first").clone())
                        .collect();
                    let v = finish.apply(&key.0, vals);
                    if key.0.op() == Ops::ReduceAxis && key.3 == 0 {
                        self.note_top_reduce(&key.0, &v);
                    }
                    self.memo.insert(key, v);
                }
            }
        }
        self.memo.get(&root).expect("lowered").clone()
    }

    fn load(&mut self, buf_node: &UOp, idx: UOp, valid: Option<&UOp>) -> UOp {
        let g = self.global(buf_node);
        // An index computed from a variable may have bounds the range analysis cannot narrow
        // (`n - 1 - i` for `i < n` looks negative; a division by `n` looks large): it is gated
        // by the buffer's extent, always true for a value the graph was built for. (The launcher
        // refuses an ungated index that may leave its buffer; other kernels keep that check.)
        let size = match buf_node.arg() {
            Arg::Buffer(n, _) => *n,
            _ => buf_node.shape_vec().iter().product(),
        } as i64;
        let (lo, hi) = idx.bounds();
        let valid =
            if (lo < 0 || hi >= size) && idx.toposort().iter().any(|u| u.op() == Ops::DefineVar) {
                let inside = idx.lt(0i64).neg() & idx.lt(size);
                Some(match valid {
                    Some(v) => v & &inside,
                    None => inside,
                })
            } else {
                valid.cloned()
            };
        let mut src = vec![g.clone(), idx];
        if let Some(v) = valid {
            src.push(v);
        }
        let index = UOp::new(Ops::Index, g.dtype(), src, Arg::None);
        UOp::new(Ops::Load, buf_node.dtype(), vec![index], Arg::None)
    }

    /// One node's lowering: its value, or the evaluations of its sources it needs and how to
    /// combine them.
    fn step(&mut self, key: &Key) -> Step {
        let (n, idx, valid, red_iters) = (&key.0, key.1.as_slice(), key.2.as_ref(), key.3);
        let in_red = red_iters > 0;
        let pass = |new_idx: Vec<UOp>| {
            Step::Need(
                vec![(n.s(0).clone(), new_idx, valid.cloned(), red_iters)],
                Finish::Same,
            )
        };
        if self.found.is_some() {
            return Step::Done(UOp::cnst(n.dtype(), 0i64));
        }
        if n.op() == Ops::Buffer {
            return Step::Done(self.load(n, idx[0].clone(), valid));
        }
        if (self.realized)(n) {
            let lin = linearize_sym(idx, &n.sym_shape_vec());
            return Step::Done(self.load(n, lin, valid));
        }
        let shape_in = |i: usize| n.s(i).sym_shape_vec();
        match n.op() {
            Ops::Const => Step::Done(n.clone()),
            Ops::Contiguous | Ops::Detach | Ops::ContiguousBackward | Ops::Noop => {
                pass(idx.to_vec())
            }
            op if op.is_elementwise() => {
                if self.must_realize_computed(n, idx, red_iters) {
                    self.found = Some(n.clone());
                    return Step::Done(UOp::cnst(n.dtype(), 0i64));
                }
                Step::Need(
                    n.src()
                        .iter()
                        .map(|s| (s.clone(), idx.to_vec(), valid.cloned(), red_iters))
                        .collect(),
                    Finish::Elementwise,
                )
            }
            Ops::Reshape => {
                let out_shape = n.sym_shape_vec();
                let in_shape = shape_in(0);
                pass(reshape_index(idx, &out_shape, &in_shape))
            }
            Ops::Permute => {
                let order = n.arg().as_shape().expect("permute arg").to_vec();
                let mut new_idx = vec![UOp::index(0); order.len()];
                for (i, &o) in order.iter().enumerate() {
                    new_idx[o] = idx[i].clone();
                }
                pass(new_idx)
            }
            Ops::Expand => {
                let in_shape = shape_in(0);
                let out_shape = n.sym_shape_vec();
                let new_idx: Vec<UOp> = idx
                    .iter()
                    .zip(in_shape.iter().zip(&out_shape))
                    .map(|(i, (si, so))| {
                        // a broadcast axis (a size-1 axis, or a symbolic one whose value is 1
                        // in this graph, made larger) reads index 0
                        if si != so { UOp::index(0) } else { i.clone() }
                    })
                    .collect();
                pass(new_idx)
            }
            Ops::Shrink => {
                let b = n.arg().sym_pairs().expect("shrink arg");
                let new_idx: Vec<UOp> = idx
                    .iter()
                    .zip(&b)
                    .map(|(i, (s, _))| if *s == 0 { i.clone() } else { i + s.to_uop() })
                    .collect();
                pass(new_idx)
            }
            Ops::Flip => {
                let axes = n.arg().as_shape().expect("flip arg").to_vec();
                let shape = n.sym_shape_vec();
                let new_idx: Vec<UOp> = idx
                    .iter()
                    .enumerate()
                    .map(|(d, i)| {
                        if axes.contains(&d) {
                            shape[d].to_uop() - 1i64 - i
                        } else {
                            i.clone()
                        }
                    })
                    .collect();
                pass(new_idx)
            }
            Ops::Pad => {
                let p = n.arg().sym_pairs().expect("pad arg");
                let in_shape = shape_in(0);
                let mut conds: Vec<UOp> = Vec::new();
                let mut new_idx = Vec::with_capacity(idx.len());
                for ((i, (b, a)), s) in idx.iter().zip(&p).zip(&in_shape) {
                    let shifted = if *b == 0 { i.clone() } else { i - b.to_uop() };
                    if *b != 0 {
                        conds.push(i.lt(b.to_uop()).neg());
                    }
                    if *a != 0 {
                        conds.push(i.lt((b + s).to_uop()));
                    }
                    new_idx.push(shifted);
                }
                let pad_valid = conds.into_iter().reduce(|a, c| a & c);
                let Some(pv) = pad_valid else {
                    return pass(new_idx);
                };
                let inner_valid = match valid {
                    Some(v) => v & &pv,
                    None => pv.clone(),
                };
                Step::Need(
                    vec![(n.s(0).clone(), new_idx, Some(inner_valid), red_iters)],
                    Finish::Gate(pv),
                )
            }
            Ops::ReduceAxis => {
                let here = (self.kernel, idx.to_vec());
                let elsewhere = self.seen.get(n).is_some_and(|seen| *seen != here);
                if elsewhere || self.must_realize_reduce(n, in_red) {
                    self.found = Some(n.clone());
                    return Step::Done(UOp::cnst(n.dtype(), 0i64));
                }
                self.seen.insert(n.clone(), here);
                let Arg::Reduce(op, axes) = n.arg().clone() else {
                    panic!("reduce_axis arg")
                };
                let in_shape = shape_in(0);
                if in_shape.iter().any(|d| *d == 0) {
                    // an empty sum is +0.0, as torch's
                    let empty = match op {
                        Ops::Add => UOp::cnst(n.dtype(), 0i64),
                        _ => reduce_identity(op, n.dtype()),
                    };
                    return Step::Done(empty);
                }
                let mut new_idx = idx.to_vec();
                let mut ranges = Vec::new();
                let mut iters = red_iters.max(1);
                for &a in axes.iter() {
                    if in_shape[a] == 1 {
                        new_idx[a] = UOp::index(0);
                    } else {
                        let r = UOp::range(in_shape[a].to_uop(), self.next_range, AxisKind::Reduce);
                        iters = iters.saturating_mul(in_shape[a].max_value());
                        self.next_range += 1;
                        new_idx[a] = r.clone();
                        ranges.push(r);
                    }
                }
                Step::Need(
                    vec![(n.s(0).clone(), new_idx, valid.cloned(), iters)],
                    Finish::Reduce(op, ranges),
                )
            }
            op => panic!("schedule: can't lower {op} into a kernel ({:?})", n.dtype()),
        }
    }
}

/// The buffers (and realized nodes) a node reads when computed inline.
#[derive(Clone, Debug)]
pub enum Leaves {
    /// At most two, listed, and the float work per element of computing it inline (shared
    /// sources counted once per use).
    Few(Vec<UOp>, u32),
    /// More than two, or a reduction.
    Many,
}

/// The float work a transcendental (`exp2`, `log2`, `sin`, `pow`) counts for, and the
/// work from which a node used twice is stored rather than recomputed.
// stored, softmax's exp runs once: softmax 4096^2 47 -> 34 ms (see docs/performance.md)
pub const TRANSCENDENTAL_WORK: u32 = 24;

/// One node's own float work per element (see [`Lowering`]'s `costly_to_recompute`).
fn float_work(u: &UOp) -> u32 {
    if !u.dtype().base().is_float() {
        return 0;
    }
    match u.op() {
        Ops::Exp2 | Ops::Log2 | Ops::Sin | Ops::Pow => TRANSCENDENTAL_WORK,
        Ops::Sqrt | Ops::Recip | Ops::FDiv => 4,
        op if op.is_elementwise() => 1,
        _ => 0,
    }
}

/// One evaluation of the lowering: a node at its indices, under its validity, and the number of
/// iterations of the reductions around it (0: not inside a reduction).
type Key = (UOp, Vec<UOp>, Option<UOp>, usize);

/// Pending work of [`Lowering::lower`].
enum Task {
    /// Lower this evaluation (unless it is memoized).
    Expand(Key),
    /// Its sources' evaluations are lowered: combine them.
    Finish(Key, Vec<Key>, Finish),
}

/// What one node's lowering step found.
enum Step {
    /// The value, without lowering any source.
    Done(UOp),
    /// These evaluations first, then combine them.
    Need(Vec<Key>, Finish),
}

/// How a node combines its sources' lowered values.
enum Finish {
    /// The one source's value (movement ops, contiguous).
    Same,
    /// The same ALU op on the lowered sources.
    Elementwise,
    /// Padding: `valid ? x : 0`.
    Gate(UOp),
    /// A reduction over these ranges (none: the value itself).
    Reduce(Ops, Vec<UOp>),
}

impl Finish {
    fn apply(self, node: &UOp, vals: Vec<UOp>) -> UOp {
        match self {
            Finish::Same => vals.into_iter().next().expect("one source"),
            Finish::Elementwise => node.with_src(vals),
            Finish::Gate(pv) => pv.where_(
                vals.into_iter().next().expect("one source"),
                UOp::cnst(node.dtype(), 0i64),
            ),
            Finish::Reduce(op, ranges) => {
                let val = vals.into_iter().next().expect("one source");
                if ranges.is_empty() {
                    return val;
                }
                let mut src = vec![val];
                src.extend(ranges);
                UOp::new(Ops::Reduce, node.dtype(), src, Arg::Op(op))
            }
        }
    }
}

/// The kernel-level pointer for global slot `slot` holding elements of `dt`.
pub fn global_for(dt: DType, slot: usize) -> UOp {
    UOp::new(
        Ops::DefineGlobal,
        dt.ptr(AddrSpace::Global),
        vec![],
        Arg::Int(slot as i64),
    )
}

/// Index expressions of a reshape's input, given the output's.
fn reshape_index(idx: &[UOp], out_shape: &[SInt], in_shape: &[SInt]) -> Vec<UOp> {
    // Fast path: the same dimensions up to size-1 axes.
    let nz_out: Vec<(&SInt, &UOp)> = out_shape
        .iter()
        .zip(idx)
        .filter(|(d, _)| **d != 1)
        .collect();
    let nz_in: Vec<&SInt> = in_shape.iter().filter(|d| **d != 1).collect();
    if nz_out.len() == nz_in.len() && nz_out.iter().zip(&nz_in).all(|((a, _), b)| *a == *b) {
        let mut it = nz_out.iter();
        return in_shape
            .iter()
            .map(|d| {
                if *d == 1 {
                    UOp::index(0)
                } else {
                    it.next().expect("same count").1.clone()
                }
            })
            .collect();
    }
    let flat = linearize_sym(idx, out_shape);
    if in_shape.iter().chain(out_shape).any(SInt::is_symbolic) {
        // symbolic strides: divide and take the remainder by expressions
        let st = strides_sym(in_shape);
        return in_shape
            .iter()
            .zip(&st)
            .map(|(d, s)| {
                if *d == 1 {
                    UOp::index(0)
                } else {
                    let q = if *s == 1 {
                        flat.clone()
                    } else {
                        flat.idiv(s.to_uop())
                    };
                    q.modulo(d.to_uop())
                }
            })
            .collect();
    }
    let in_shape: Vec<usize> = in_shape
        .iter()
        .map(|d| d.as_const().expect("constant"))
        .collect();
    let out_shape: Vec<usize> = out_shape
        .iter()
        .map(|d| d.as_const().expect("constant"))
        .collect();
    let (in_shape, out_shape) = (&in_shape[..], &out_shape[..]);
    let st = strides_for(in_shape);
    in_shape
        .iter()
        .zip(&st)
        .map(|(&d, &s)| {
            if d == 1 {
                UOp::index(0)
            } else {
                let q = if s == 1 {
                    flat.clone()
                } else {
                    flat.idiv(s as i64)
                };
                if s * d >= out_shape.iter().product::<usize>() {
                    q
                } else {
                    q.modulo(d as i64)
                }
            }
        })
        .collect()
}

/// Builds the kernel AST storing `value` (evaluated with output ranges) into slot 0.
pub fn store_kernel(out_dtype: DType, out_shape: &[SInt], out_idx: &[UOp], value: UOp) -> UOp {
    let g = global_for(out_dtype, 0);
    let lin = linearize_sym(out_idx, out_shape);
    let index = UOp::new(Ops::Index, g.dtype(), vec![g, lin], Arg::None);
    let store = UOp::new(Ops::Store, DType::VOID, vec![index, value], Arg::None);
    UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None)
}

/// Output ranges for a kernel writing `shape`: one `Range` per dimension of size > 1 (a
/// symbolic size is the range's end).
pub fn output_ranges(shape: &[SInt]) -> Vec<UOp> {
    let mut next = 0;
    shape
        .iter()
        .map(|d| {
            if *d == 1 {
                UOp::index(0)
            } else {
                next += 1;
                UOp::range(d.to_uop(), next - 1, AxisKind::Loop)
            }
        })
        .collect()
}
