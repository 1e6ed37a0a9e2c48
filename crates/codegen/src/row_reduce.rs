//! Reductions over contiguous runs of one buffer, planned for native vector loops (the CPU's
//! AVX-512/AVX2 path for `sum`, `max`, `mean` along any axis of a plain tensor).
//!
//! A kernel of the form `STORE(out[s(o)], e(REDUCE_{ADD|MAX}(LOAD(x[b(o) + S*r]), r)))` reduces
//! elements of one `float32` buffer, then applies an epilogue `e` of constant arithmetic
//! (`mean`'s division). Two layouts read memory in the patterns a CPU streams fastest:
//! - **rows** (`S == 1`): each output reduces `k` consecutive elements (`sum(axis=-1)`, the
//!   first stage of a split full reduction);
//! - **columns**: an output range `c` along which the input is consecutive (`b(o)` has
//!   coefficient 1 in it) is reduced as a block: for each of the `k` rows, a run of consecutive
//!   elements is combined into as many accumulators (`sum(axis=0)`, a bias gradient). The
//!   generic kernel walks each column down the rows instead, one cache line per row.
//!
//! The Cranelift renderer's vectors are 128 bits wide, and streaming a buffer from the
//! last-level cache with 128-bit loads reaches about half the bandwidth of 256- or 512-bit loads
//! (measured on a Xeon with a 480 MiB L3: 10.3 vs 20.1 vs 23.3 GB/s on one thread), so these
//! kernels go to hand-written vector loops instead.
//!
//! [`plan_row_reduce`] matches the kernel after the pipeline's index simplification and reduce
//! range merging (so a split reduction's `(r1*4096 + r2)` over two ranges is one range of
//! contiguous elements), proves with [`crate::opt::affine_coeff`] (a structural proof, not a
//! sample) that the load index is `b(o) + S*r (+ c)` with the coefficients the layout needs,
//! and evaluates the bases and store indices of every group of outputs into tables. It refuses
//! (returns `None`) anything else: gated loads, other dtypes, several loads, negative strides,
//! epilogues that are not constant arithmetic, store indices that repeat.

use std::collections::HashMap;

use tinygrad_dtype::{ConstValue, DType};
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

use crate::opt::affine_coeff;

/// The reductions the native kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowOp {
    /// `sum` (IEEE addition, in an order of the kernel's choosing).
    Sum,
    /// `max`, NaN-propagating (the IR's `Max`): a NaN anywhere in the row gives NaN; `+0.0`
    /// wins over `-0.0`.
    Max,
}

/// One step of the epilogue applied to each reduced value `v`, in `float32`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EpilogueStep {
    /// `v * c`.
    Mul(f32),
    /// `v / c`.
    Div(f32),
    /// `c / v`.
    DivBy(f32),
    /// `v + c`.
    Add(f32),
    /// `v - c`.
    Sub(f32),
    /// `c - v`.
    SubFrom(f32),
}

impl EpilogueStep {
    /// The step applied to `v` (each one IEEE operation in `float32`, as the IR defines it).
    pub fn apply(self, v: f32) -> f32 {
        match self {
            EpilogueStep::Mul(c) => v * c,
            EpilogueStep::Div(c) => v / c,
            EpilogueStep::DivBy(c) => c / v,
            EpilogueStep::Add(c) => v + c,
            EpilogueStep::Sub(c) => v - c,
            EpilogueStep::SubFrom(c) => c - v,
        }
    }
}

/// How a plan's elements lie in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Each group is one output element, reducing `k` consecutive elements from its base.
    Rows,
    /// Each group is `cols` output elements (`out_stride` apart from the group's store index)
    /// reducing the `cols` consecutive elements of `k` rows, `stride` apart, from its base:
    /// `sum(axis=0)`, a bias gradient. The loop streams whole rows of a block of columns.
    Columns {
        /// Consecutive elements per row (outputs per group).
        cols: usize,
        /// Elements between consecutive rows.
        stride: i64,
        /// Elements between consecutive outputs of a group.
        out_stride: i64,
    },
}

/// A kernel planned as groups of reductions over contiguous runs of one buffer.
#[derive(Clone, Debug)]
pub struct RowReducePlan {
    /// The reduction.
    pub op: RowOp,
    /// Elements each output reduces (at least 1).
    pub k: usize,
    /// Where the elements are.
    pub layout: Layout,
    /// For each group, the index of its first element in the input (slot 1).
    pub bases: Vec<i64>,
    /// For each group, the index of its (first) output element (slot 0); every element the
    /// groups store is distinct.
    pub stores: Vec<i64>,
    /// Applied to each reduced value before it is stored, in order.
    pub epilogue: Vec<EpilogueStep>,
    /// The least sizes of slots 0 and 1 (the largest index each is accessed at, plus one).
    pub extents: [usize; 2],
}

/// The most output elements a plan covers (its tables hold two `i64` per group); kernels with
/// more stay generic.
pub const MAX_ROWS: usize = 1 << 22;

/// Plans `ast` (a scheduled kernel AST) as a row reduction, or `None` when it is not one.
pub fn plan_row_reduce(ast: &UOp) -> Option<RowReducePlan> {
    // a cheap look first (every CPU kernel passes here): one float32 sum or max of one load
    let raw = ast.toposort();
    let reduces: Vec<&UOp> = raw.iter().filter(|u| u.op() == Ops::Reduce).collect();
    if reduces.len() != 1
        || reduces[0].dtype() != DType::FLOAT32
        || !matches!(reduces[0].arg(), Arg::Op(Ops::Add | Ops::Max))
        || raw.iter().filter(|u| u.op() == Ops::Load).count() != 1
    {
        return None;
    }
    let ast = tinygrad_uop::graph_rewrite(ast, tinygrad_uop::sym(), &mut (), false);
    let ast = crate::merge_ranges::merge_reduce_ranges(&ast);
    if ast.op() != Ops::Sink || ast.src().len() != 1 {
        return None;
    }
    let store = ast.s(0);
    if store.op() != Ops::Store || store.src().len() != 2 {
        return None;
    }
    let nodes = ast.toposort();
    let count = |op: Ops| nodes.iter().filter(|u| u.op() == op).count();
    if count(Ops::Reduce) != 1 || count(Ops::Load) != 1 || count(Ops::DefineGlobal) != 2 {
        return None;
    }
    if nodes
        .iter()
        .any(|u| matches!(u.op(), Ops::DefineVar | Ops::DefineLocal | Ops::Bind))
    {
        return None;
    }
    let out_index = slot_index(store.s(0), 0)?;
    // the stored value: the epilogue over the reduction
    let mut epilogue = Vec::new();
    let mut v = store.s(1).clone();
    while v.op() != Ops::Reduce {
        let step = epilogue_step(&v)?;
        epilogue.push(step.0);
        v = step.1;
    }
    epilogue.reverse();
    let red = v;
    let f32_only = |u: &UOp| u.dtype() == DType::FLOAT32;
    if !f32_only(&red) || !f32_only(store.s(1)) || red.src().len() != 2 {
        return None;
    }
    let op = match red.arg() {
        Arg::Op(Ops::Add) => RowOp::Sum,
        Arg::Op(Ops::Max) => RowOp::Max,
        _ => return None,
    };
    let (load, r) = (red.s(0), red.s(1));
    if load.op() != Ops::Load || load.src().len() != 1 || !f32_only(load) {
        return None;
    }
    if r.op() != Ops::Range || !matches!(r.arg(), Arg::Range(_, AxisKind::Reduce)) {
        return None;
    }
    let k = usize::try_from(r.s(0).as_int()?).ok().filter(|&k| k >= 1)?;
    let in_index = slot_index(load.s(0), 1)?;
    let coeff = |e: &UOp, v: &UOp| affine_coeff(e, v, &mut HashMap::new());
    let stride = coeff(&in_index, r)?;
    if stride <= 0 || coeff(&out_index, r) != Some(0) {
        return None;
    }
    // the output ranges, each of a constant size
    let mut outs: Vec<(usize, usize, UOp)> = Vec::new();
    for u in &nodes {
        if u.op() == Ops::Range && u != r {
            let Arg::Range(id, AxisKind::Loop) = u.arg() else {
                return None;
            };
            outs.push((*id, usize::try_from(u.s(0).as_int()?).ok()?, u.clone()));
        }
    }
    outs.sort_unstable_by_key(|o| o.0);
    // Rows when the reduction walks consecutive elements; otherwise columns: an output range
    // along which the input is consecutive (the last such), whose outputs are reduced together
    let (layout, zeroed) = if stride == 1 {
        (Layout::Rows, vec![r.clone()])
    } else {
        let (pos, out_stride) = outs.iter().enumerate().rev().find_map(|(i, o)| {
            (coeff(&in_index, &o.2) == Some(1))
                .then(|| coeff(&out_index, &o.2))
                .flatten()
                .filter(|&t| t > 0)
                .map(|t| (i, t))
        })?;
        let col = outs.remove(pos);
        let mut cols = col.1;
        let mut zeroed = vec![r.clone(), col.2];
        // [128,64,32,3,3].sum(0): 10 -> 0.8 ms (see docs/performance.md)
        // Output ranges that continue the columns in both the input and the output (a weight
        // gradient's `[co, ci, kh, kw]` over partials `[div, co, ci, kh, kw]`: `kw` alone is 3
        // columns, all four 18,432) join them, innermost first.
        while let Some(next) = outs.iter().rposition(|o| {
            let c = i64::try_from(cols).ok();
            let out_c = c.and_then(|c| c.checked_mul(out_stride));
            c.is_some() && coeff(&in_index, &o.2) == c && coeff(&out_index, &o.2) == out_c
        }) {
            let o = outs.remove(next);
            cols = cols.checked_mul(o.1)?;
            zeroed.push(o.2);
        }
        let layout = Layout::Columns {
            cols,
            stride,
            out_stride,
        };
        (layout, zeroed)
    };
    let groups = outs.iter().try_fold(1usize, |n, o| n.checked_mul(o.1))?;
    let cols = match layout {
        Layout::Rows => 1,
        Layout::Columns { cols, .. } => cols,
    };
    if groups == 0 || cols == 0 || groups.checked_mul(cols)? > MAX_ROWS {
        return None;
    }
    let ids: Vec<usize> = outs.iter().map(|o| o.0).collect();
    let base_prog = IndexProgram::compile(&in_index, &zeroed, &ids)?;
    let store_prog = IndexProgram::compile(&out_index, &zeroed, &ids)?;
    let (mut bases, mut stores) = (Vec::with_capacity(groups), Vec::with_capacity(groups));
    let mut at = vec![0i64; outs.len()];
    let mut scratch = Vec::new();
    for _ in 0..groups {
        bases.push(base_prog.eval(&at, &mut scratch)?);
        stores.push(store_prog.eval(&at, &mut scratch)?);
        // the next group, row-major over the ranges by id
        for (d, o) in outs.iter().enumerate().rev() {
            at[d] += 1;
            if (at[d] as usize) < o.1 {
                break;
            }
            at[d] = 0;
        }
    }
    if bases.iter().chain(&stores).any(|&i| i < 0) {
        return None;
    }
    // every element each group stores: all distinct, or two tasks would race on one
    let out_step = match layout {
        Layout::Rows => 0,
        Layout::Columns { out_stride, .. } => out_stride,
    };
    let mut written: Vec<i64> = Vec::with_capacity(groups * cols);
    for &st in &stores {
        for j in 0..cols as i64 {
            written.push(st.checked_add(j.checked_mul(out_step)?)?);
        }
    }
    written.sort_unstable();
    if written.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let span = (k as i64 - 1)
        .checked_mul(stride)?
        .checked_add(cols as i64)?;
    let in_extent = bases.iter().max()?.checked_add(span)?;
    let out_extent = written.last()? + 1;
    Some(RowReducePlan {
        op,
        k,
        layout,
        bases,
        stores,
        epilogue,
        extents: [out_extent as usize, in_extent as usize],
    })
}

/// The index of an ungated `Index(DefineGlobal(slot), i)` of a `float32` buffer.
fn slot_index(index: &UOp, slot: i64) -> Option<UOp> {
    if index.op() != Ops::Index || index.src().len() != 2 {
        return None;
    }
    let g = index.s(0);
    if g.op() != Ops::DefineGlobal
        || *g.arg() != Arg::Int(slot)
        || g.dtype().base() != DType::FLOAT32
    {
        return None;
    }
    Some(index.s(1).clone())
}

/// `v` as one epilogue step over its non-constant source, which it returns.
fn epilogue_step(v: &UOp) -> Option<(EpilogueStep, UOp)> {
    if v.dtype() != DType::FLOAT32 || v.src().len() != 2 {
        return None;
    }
    let constant = |u: &UOp| match u.as_const() {
        Some(ConstValue::Float(c)) if u.dtype() == DType::FLOAT32 => Some(c as f32),
        _ => None,
    };
    let (a, b) = (v.s(0), v.s(1));
    let (step, rest) = match (v.op(), constant(a), constant(b)) {
        (_, Some(_), Some(_)) => return None,
        (Ops::Mul, Some(c), None) => (EpilogueStep::Mul(c), b),
        (Ops::Mul, None, Some(c)) => (EpilogueStep::Mul(c), a),
        (Ops::Add, Some(c), None) => (EpilogueStep::Add(c), b),
        (Ops::Add, None, Some(c)) => (EpilogueStep::Add(c), a),
        (Ops::FDiv, None, Some(c)) => (EpilogueStep::Div(c), a),
        (Ops::FDiv, Some(c), None) => (EpilogueStep::DivBy(c), b),
        (Ops::Sub, None, Some(c)) => (EpilogueStep::Sub(c), a),
        (Ops::Sub, Some(c), None) => (EpilogueStep::SubFrom(c), b),
        _ => return None,
    };
    Some((step, rest.clone()))
}

/// An integer index expression over the output ranges (some read as 0), compiled
/// to a list of operations evaluated per output element.
struct IndexProgram {
    /// Each entry computes one value from earlier entries.
    ops: Vec<IndexOp>,
}

#[derive(Clone, Copy)]
enum IndexOp {
    Const(i64),
    /// The output range at this position of the ids.
    Range(usize),
    Bin(Ops, usize, usize),
}

impl IndexProgram {
    /// `None` when the expression uses anything but constants, ranges, `+ - *`, `//` and `%`;
    /// the ranges in `zeroed` read as 0.
    fn compile(e: &UOp, zeroed: &[UOp], out_ids: &[usize]) -> Option<IndexProgram> {
        let mut pos: HashMap<UOp, usize> = HashMap::new();
        let mut ops = Vec::new();
        for u in e.toposort() {
            let op = match u.op() {
                Ops::Const => IndexOp::Const(u.as_int()?),
                Ops::Range if zeroed.contains(&u) => IndexOp::Const(0),
                Ops::Range => {
                    let Arg::Range(id, _) = u.arg() else {
                        return None;
                    };
                    IndexOp::Range(out_ids.iter().position(|i| i == id)?)
                }
                Ops::Add | Ops::Sub | Ops::Mul | Ops::IDiv | Ops::Mod if u.src().len() == 2 => {
                    IndexOp::Bin(u.op(), pos[u.s(0)], pos[u.s(1)])
                }
                _ => return None,
            };
            // the sizes of ranges are constants the toposort also visits: harmless entries
            pos.insert(u.clone(), ops.len());
            ops.push(op);
        }
        Some(IndexProgram { ops })
    }

    /// The value at output position `at` (`None` on overflow).
    fn eval(&self, at: &[i64], vals: &mut Vec<i64>) -> Option<i64> {
        vals.clear();
        for op in &self.ops {
            let v = match *op {
                IndexOp::Const(c) => c,
                IndexOp::Range(d) => at[d],
                IndexOp::Bin(op, a, b) => {
                    let (a, b) = (vals[a], vals[b]);
                    match op {
                        Ops::Add => a.checked_add(b)?,
                        Ops::Sub => a.checked_sub(b)?,
                        Ops::Mul => a.checked_mul(b)?,
                        // the IR's integer semantics: truncating, `x // 0 == x % 0 == 0`
                        Ops::IDiv if b == 0 => 0,
                        Ops::Mod if b == 0 => 0,
                        Ops::IDiv => a.checked_div(b)?,
                        _ => a.checked_rem(b)?,
                    }
                }
            };
            vals.push(v);
        }
        vals.last().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tinygrad_dtype::AddrSpace;

    fn global(slot: i64) -> UOp {
        UOp::new(
            Ops::DefineGlobal,
            DType::FLOAT32.ptr(AddrSpace::Global),
            vec![],
            Arg::Int(slot),
        )
    }

    fn index(buf: &UOp, idx: UOp) -> UOp {
        UOp::new(Ops::Index, buf.dtype(), vec![buf.clone(), idx], Arg::None)
    }

    fn kernel(load_index: impl Fn(&UOp, &UOp) -> UOp, op: Ops, post: impl Fn(UOp) -> UOp) -> UOp {
        let i = UOp::range(6i64, 0, AxisKind::Loop);
        let r = UOp::range(10i64, 1, AxisKind::Reduce);
        let x = global(1);
        let v = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&x, load_index(&i, &r))],
            Arg::None,
        );
        let red = UOp::new(Ops::Reduce, DType::FLOAT32, vec![v, r], Arg::Op(op));
        let st = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&global(0), i), post(red)],
            Arg::None,
        );
        UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
    }

    #[test]
    fn rows_of_a_matrix_are_planned_with_their_bases() {
        let ast = kernel(|i, r| i * 12i64 + r + 2i64, Ops::Add, |v| v);
        let p = plan_row_reduce(&ast).expect("a row sum");
        assert_eq!(p.op, RowOp::Sum);
        assert_eq!(p.k, 10);
        assert_eq!(p.bases, vec![2, 14, 26, 38, 50, 62]);
        assert_eq!(p.stores, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(p.extents, [6, 72]);
        assert!(p.epilogue.is_empty());
    }

    #[test]
    fn columns_are_planned_as_one_group_of_consecutive_outputs() {
        // out[i] = sum over r of x[r * 12 + i]: six columns of a 10x12 matrix
        let ast = kernel(|i, r| r * 12i64 + i, Ops::Add, |v| v);
        let p = plan_row_reduce(&ast).expect("a column sum");
        assert_eq!(
            p.layout,
            Layout::Columns {
                cols: 6,
                stride: 12,
                out_stride: 1
            }
        );
        assert_eq!((p.bases.clone(), p.stores.clone()), (vec![0], vec![0]));
        assert_eq!(p.extents, [6, 9 * 12 + 6]);
    }

    #[test]
    fn a_division_after_the_reduction_is_an_epilogue() {
        let ast = kernel(
            |i, r| i * 10i64 + r,
            Ops::Max,
            |v| v.alu(Ops::FDiv, &[UOp::cnst(DType::FLOAT32, 10.0f32)]),
        );
        let p = plan_row_reduce(&ast).expect("planned");
        assert_eq!(p.op, RowOp::Max);
        assert_eq!(p.epilogue, vec![EpilogueStep::Div(10.0)]);
    }

    #[test]
    fn constants_on_either_side_keep_their_order_in_the_epilogue() {
        let c = |v: f32| UOp::cnst(DType::FLOAT32, v);
        let ast = kernel(
            |i, r| i * 10i64 + r,
            Ops::Add,
            |v| {
                let d = c(2.0).alu(Ops::FDiv, &[v]); // 2 / v
                c(1.0).alu(Ops::Sub, &[d]) // 1 - 2 / v
            },
        );
        let p = plan_row_reduce(&ast).expect("planned");
        assert_eq!(
            p.epilogue,
            vec![EpilogueStep::DivBy(2.0), EpilogueStep::SubFrom(1.0)]
        );
        let v = p.epilogue.iter().fold(4.0f32, |v, s| s.apply(v));
        assert_eq!(v, 0.5);
    }

    #[test]
    fn columns_whose_groups_store_over_each_other_are_refused() {
        // out[0] for every i: six columns all stored at one element
        assert!(plan_row_reduce(&stored_at_zero(|i, r| r * 12i64 + i)).is_none());
    }

    /// `out[0] = sum_r in[load(i, r)]` for every i in 0..6, r in 0..10: every group stores to
    /// element 0.
    fn stored_at_zero(load: impl Fn(&UOp, &UOp) -> UOp) -> UOp {
        let i = UOp::range(6i64, 0, AxisKind::Loop);
        let r = UOp::range(10i64, 1, AxisKind::Reduce);
        let v = UOp::new(
            Ops::Load,
            DType::FLOAT32,
            vec![index(&global(1), load(&i, &r))],
            Arg::None,
        );
        let red = UOp::new(Ops::Reduce, DType::FLOAT32, vec![v, r], Arg::Op(Ops::Add));
        let st = UOp::new(
            Ops::Store,
            DType::VOID,
            vec![index(&global(0), UOp::cnst(i.dtype(), 0i64)), red],
            Arg::None,
        );
        UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
    }

    #[test]
    fn strided_or_non_affine_rows_are_refused() {
        // stride 2 along the reduction, and no output range consecutive in the input (so not
        // columns either)
        assert!(plan_row_reduce(&kernel(|i, r| i * 20i64 + r * 2i64, Ops::Add, |v| v)).is_none());
        // a division of the reduce range
        assert!(plan_row_reduce(&kernel(|i, r| i * 10i64 + r.idiv(2), Ops::Add, |v| v)).is_none());
        // a product of the ranges
        assert!(plan_row_reduce(&kernel(|i, r| i * r + r, Ops::Add, |v| v)).is_none());
        // a multiplication (not a sum or max)
        assert!(plan_row_reduce(&kernel(|i, r| i * 10i64 + r, Ops::Mul, |v| v)).is_none());
        // an epilogue that is not constant arithmetic
        assert!(
            plan_row_reduce(&kernel(
                |i, r| i * 10i64 + r,
                Ops::Add,
                |v| v.unary(Ops::Sqrt)
            ))
            .is_none()
        );
    }

    #[test]
    fn rows_storing_to_one_element_are_refused() {
        // every row stores to element 0 (its store index ignores the row)
        assert!(plan_row_reduce(&stored_at_zero(|i, r| i * 10i64 + r)).is_none());
    }
}
