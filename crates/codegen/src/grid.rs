//! Which loops of a program a GPU renderer maps to its grid (PTX, WGSL): the outer output loops
//! that are perfectly nested from the top, flattened into one index space that threads stride
//! over. Every other loop stays a loop inside the thread.

use std::collections::{HashMap, HashSet};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// The loops mapped to the grid: uop positions and sizes, outermost first.
pub(crate) struct GridPlan {
    /// `(uop position, size)` of each grid-mapped range, outermost first.
    pub ranges: Vec<(usize, u64)>,
    /// The product of their sizes.
    pub total: u64,
}

fn is_reduce_kind(r: &UOp) -> bool {
    matches!(r.arg(), Arg::Range(_, AxisKind::Reduce | AxisKind::Unroll))
}

pub(crate) fn grid_plan(uops: &[UOp]) -> GridPlan {
    let none = GridPlan {
        ranges: Vec::new(),
        total: 1,
    };
    // Where each loop ends.
    let mut end_of: HashMap<usize, usize> = HashMap::new();
    let mut open = Vec::new();
    for (i, u) in uops.iter().enumerate() {
        match u.op() {
            Ops::Range => open.push(i),
            Ops::End => match open.pop() {
                Some(s) => {
                    end_of.insert(s, i);
                }
                None => return none,
            },
            _ => {}
        }
    }
    if !open.is_empty() {
        return none;
    }
    let Some(first) = uops.iter().position(|u| u.op() == Ops::Range) else {
        return none;
    };
    let last = uops
        .iter()
        .rposition(|u| !matches!(u.op(), Ops::Sink | Ops::Noop))
        .unwrap_or(0);
    // Work before the first loop runs once per thread: it must not write memory.
    if uops[..first].iter().any(|u| u.op() == Ops::Store) || end_of[&first] != last {
        return none;
    }
    let size_of = |r: &UOp| -> Option<u64> {
        let s = r.s(0).as_int()?;
        u64::try_from(s).ok()
    };
    let mut ranges = Vec::new();
    let mut total: u64 = 1;
    let mut cur = first;
    loop {
        let r = &uops[cur];
        let Some(size) = size_of(r) else { break };
        if is_reduce_kind(r) {
            break;
        }
        match total.checked_mul(size) {
            Some(t) if t <= i64::MAX as u64 => total = t,
            _ => break,
        }
        ranges.push((cur, size));
        // The next loop must open before any other loop and close right before this one.
        let Some(next) =
            (cur + 1..uops.len()).find(|&j| matches!(uops[j].op(), Ops::Range | Ops::End))
        else {
            break;
        };
        if uops[next].op() != Ops::Range || end_of[&next] + 1 != end_of[&cur] {
            break;
        }
        cur = next;
    }
    GridPlan { ranges, total }
}

/// A reduction loop split across the invocations of a workgroup (tinygrad's `GROUP` opt): each
/// of the group's `lanes` invocations runs iterations `lane, lane + lanes, ...` (adjacent
/// invocations read adjacent elements) into its own accumulators, which are then combined
/// through workgroup (shared) memory after a barrier. Every invocation computes the same
/// combined value and runs the rest of the body; the grid loop strides over workgroups, one
/// output element per workgroup.
pub(crate) struct GroupPlan {
    /// The uop position of the grouped `Range`.
    pub range: usize,
    /// The accumulators updated in it (their `DefineReg`s) and each one's reduce op.
    pub accs: Vec<(UOp, Ops)>,
}

/// Reductions at least this long are grouped (shorter ones are cheaper per invocation).
pub(crate) const GROUP_MIN_REDUCE: u64 = 256;

/// Kernels with at most this many output elements group their reduction: with more, one
/// invocation per output already fills the device.
pub(crate) const GROUP_MAX_OUTPUTS: u64 = 1 << 14;

/// The reduction to group in a program whose grid is `grid`, if any: the first loop of the
/// per-element body when it is a constant-size reduction of at least [`GROUP_MIN_REDUCE`]
/// iterations whose only effects are `acc = acc op x` updates (`op` Add, Mul or Max; `x` not
/// reading any accumulator) of accumulators defined before it, initialized to `op`'s identity
/// and of a dtype the target can exchange (`shareable`), whose values are used after the loop
/// only through the accumulators, in a kernel of at most [`GROUP_MAX_OUTPUTS`] outputs with no
/// global store before the loop.
pub(crate) fn group_plan(
    uops: &[UOp],
    grid: &GridPlan,
    shareable: fn(DType) -> bool,
) -> Option<GroupPlan> {
    if grid.total > GROUP_MAX_OUTPUTS {
        return None;
    }
    let start = grid.ranges.last().map_or(0, |&(i, _)| i + 1);
    let j = (start..uops.len()).find(|&j| matches!(uops[j].op(), Ops::Range | Ops::End))?;
    let r = &uops[j];
    if r.op() != Ops::Range
        || !matches!(r.arg(), Arg::Range(_, AxisKind::Reduce))
        || r.s(0).as_int().is_none_or(|n| n < GROUP_MIN_REDUCE as i64)
    {
        return None;
    }
    if uops[start..j]
        .iter()
        .any(|u| u.op() == Ops::Store && u.s(0).s(0).op() != Ops::DefineReg)
    {
        return None;
    }
    // The loop's end.
    let mut depth = 0usize;
    let mut end = None;
    for (k, u) in uops.iter().enumerate().skip(j) {
        match u.op() {
            Ops::Range => depth += 1,
            Ops::End => {
                depth -= 1;
                if depth == 0 {
                    end = Some(k);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end?;
    let before: HashSet<&UOp> = uops[..j]
        .iter()
        .filter(|u| u.op() == Ops::DefineReg)
        .collect();
    let reads_reg = |x: &UOp, regs: &HashSet<&UOp>| {
        x.toposort()
            .iter()
            .any(|n| n.op() == Ops::Load && n.s(0).op() == Ops::Index && regs.contains(n.s(0).s(0)))
    };
    let mut accs: Vec<(UOp, Ops)> = Vec::new();
    for st in uops[j..end].iter().filter(|u| u.op() == Ops::Store) {
        let idx = st.s(0);
        let base = idx.s(0);
        if base.op() != Ops::DefineReg {
            return None; // a store to memory inside the reduction
        }
        if !before.contains(base) {
            continue; // a register of the loop body itself
        }
        let v = st.s(1);
        let op = v.op();
        let reads_acc = |x: &UOp| x.op() == Ops::Load && x.s(0) == idx;
        let other = match v.src() {
            [a, b] if reads_acc(a) => b,
            [a, b] if reads_acc(b) => a,
            _ => return None,
        };
        if !matches!(op, Ops::Add | Ops::Mul | Ops::Max)
            || !shareable(base.dtype().base())
            || reads_reg(other, &before)
        {
            return None;
        }
        match accs.iter().find(|(a, _)| a == base) {
            Some((_, o)) if *o != op => return None,
            Some(_) => {}
            None => accs.push((base.clone(), op)),
        }
    }
    // Every accumulator starts at its op's identity (each invocation's partial includes it).
    for (reg, op) in &accs {
        let dt = reg.dtype().base();
        let ident = tinygrad_schedule::rangeify::reduce_identity(*op, dt);
        let init = uops[..j]
            .iter()
            .rev()
            .find(|u| u.op() == Ops::Store && u.s(0).op() == Ops::Index && u.s(0).s(0) == reg)?;
        if init.s(1) != &ident {
            return None;
        }
    }
    // After the loop, nothing but its `End` uses a value computed inside it.
    let inside: HashSet<&UOp> = uops[j..end].iter().collect();
    if uops[end + 1..]
        .iter()
        .any(|u| u.src().iter().any(|s| inside.contains(s)))
    {
        return None;
    }
    (!accs.is_empty()).then_some(GroupPlan { range: j, accs })
}

/// The fold of a grouped reduction's partials, `op(acc, part)` for accumulator `k`, as a node a
/// renderer draws like any `op` of the kernel (NaN-propagating max included): its two operands
/// are placeholder `Noop`s (unique per accumulator) that the renderer binds to the accumulator
/// and the partial read back from shared memory.
pub(crate) fn group_fold(op: Ops, dt: DType, k: usize) -> (UOp, UOp, UOp) {
    let placeholder = |i: i64| UOp::new(Ops::Noop, dt, vec![], Arg::Int(i));
    let (acc, part) = (
        placeholder(-1 - 2 * k as i64),
        placeholder(-2 - 2 * k as i64),
    );
    let fold = UOp::new(op, dt, vec![acc.clone(), part.clone()], Arg::None);
    (acc, part, fold)
}
