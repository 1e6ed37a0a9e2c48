//! Which loops of a program a GPU renderer maps to its grid (PTX, WGSL): the outer output loops
//! that are perfectly nested from the top, flattened into one index space that threads stride
//! over. Every other loop stays a loop inside the thread.

use std::collections::HashMap;

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
