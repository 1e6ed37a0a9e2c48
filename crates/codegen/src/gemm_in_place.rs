//! GEMM operands read in place instead of packed.
//!
//! Packing evaluates the operand's index arithmetic once per element: for a convolution's
//! im2col side (`x[n, c, oh + kh, ow + kw]` as the `M x K` matrix over `m = (n, oh, ow)`,
//! `k = (c, kh, kw)`) that is ~25 gathered loads per input element and, measured on
//! beautiful_mnist, as much time as the micro-kernel itself. But such an index is **separable**:
//! a sum of terms that each use only row ranges, only reduce ranges or only batch ranges,
//! `idx(b, m, k) = rows[m] + ks[k] + batches[b]`. Then three small tables (one entry per row,
//! per `k`, per batch) describe the whole operand, and the micro-kernel broadcasts
//! `buf[rows[m + i] + ks[p]]` straight from the operand's buffer.
//!
//! The operand must be one ungated load of a buffer, or an elementwise function of one (a
//! `relu` or a cast that the scheduler fused into the next layer's im2col): the function is
//! then applied once per buffer element by a small kernel, and the tables index its output.
//! A gated load (padding) is still packed: its zeros are not in any buffer. The index must be
//! built from ranges and constants only (no loaded or symbolic values).

use std::collections::HashMap;

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

use crate::gemm::{decompose, global, load as load_of, store_kernel};

/// How to read `A` in place: element `(b, m, k)` is `buf[rows[m] + ks[k] + batches[b]]`.
#[derive(Clone, Debug)]
pub struct InPlaceOperand {
    /// The original kernel's slot of the operand's buffer.
    pub slot: usize,
    /// When the operand is an elementwise function of the load (a `relu` or a cast fused into
    /// the next layer's im2col), a kernel applying it to the buffer's elements first: the
    /// tables then index its output (one pass over the buffer instead of one per use).
    pub prepare: Option<Prepare>,
    /// Writes `rows[t]` (`int64`, slot 0) for `t` in `0..mp`; padding rows repeat the last
    /// row (their results are never read, their loads stay in bounds).
    pub rows: UOp,
    /// Writes `ks[t]` for `t` in `0..kp` (K rounded up to whole blocks); padding repeats the
    /// last `k`'s offset (the micro-kernel stops at K; if it did not, it would still read
    /// inside the operand).
    pub ks: UOp,
    /// Writes `batches[t]` for `t` in `0..batch` (the batch is 1 when the kernel has none).
    pub batches: UOp,
}

/// An elementwise function of the operand's buffer, applied to a prefix of it.
#[derive(Clone, Debug)]
pub struct Prepare {
    /// The operand with its load reading element `placeholder` of slot 1.
    value: UOp,
    placeholder: UOp,
}

impl Prepare {
    /// The kernel `out[i] = f(buf[i])` for `i` in `0..len` (`out`: `float32`, slot 0; `buf`:
    /// slot 1).
    pub fn kernel(&self, len: usize) -> UOp {
        let id = match self.placeholder.arg() {
            Arg::Range(id, _) => *id,
            _ => 0,
        };
        let i = UOp::range(len.max(1) as i64, id, AxisKind::Loop);
        let mut map = HashMap::new();
        map.insert(self.placeholder.clone(), i.clone());
        let value = self.value.substitute(&map);
        store_kernel(DType::FLOAT32, i, value)
    }
}

/// Which ranges a term may use.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Part {
    Rows,
    Ks,
    Batches,
}

/// `u` as a list of summands: `Add`/`Sub` flattened, multiplications by a constant distributed
/// over sums.
fn summands(u: &UOp, scale: i64, out: &mut Vec<UOp>) {
    match u.op() {
        Ops::Add => {
            summands(u.s(0), scale, out);
            summands(u.s(1), scale, out);
        }
        Ops::Sub => {
            summands(u.s(0), scale, out);
            summands(u.s(1), -scale, out);
        }
        Ops::Mul => {
            let (a, b) = (u.s(0), u.s(1));
            match (a.as_int(), b.as_int()) {
                (_, Some(c)) => summands(a, scale.wrapping_mul(c), out),
                (Some(c), _) => summands(b, scale.wrapping_mul(c), out),
                _ => out.push(if scale == 1 { u.clone() } else { u.mul(scale) }),
            }
        }
        _ => out.push(if scale == 1 { u.clone() } else { u.mul(scale) }),
    }
}

/// The part a term belongs to; `None` when it mixes parts or uses anything but ranges,
/// constants and integer arithmetic.
fn part_of(term: &UOp, rows: &[UOp], ks: &[UOp], batch: &[UOp]) -> Option<Option<Part>> {
    let mut part = None;
    for n in term.toposort() {
        let p = match n.op() {
            Ops::Range if rows.contains(&n) => Part::Rows,
            Ops::Range if ks.contains(&n) => Part::Ks,
            Ops::Range if batch.contains(&n) => Part::Batches,
            Ops::Range => return None,
            Ops::Const => continue,
            op if n.dtype().is_int() && op.is_alu() => continue,
            _ => return None,
        };
        if part.is_some_and(|q| q != p) {
            return None;
        }
        part = Some(p);
    }
    Some(part)
}

/// The table kernel `out[t] = value(t)` (`int64`) for `t` in `0..len`, the ranges of `value`
/// replaced by the mixed-radix digits of `min(t, last)`.
fn table_kernel(value: &UOp, ranges: &[UOp], len: usize, last: usize, first_id: usize) -> UOp {
    let t = UOp::range(len.max(1) as i64, first_id, AxisKind::Loop);
    let clamped = if last + 1 < len {
        t.minimum(last as i64)
    } else {
        t.clone()
    };
    let mut map = HashMap::new();
    decompose(&clamped, ranges, &mut map);
    let v = value.substitute(&map).cast(DType::INT64);
    store_kernel(DType::INT64, t, v)
}

/// The ranges of one side, their element counts, and the padded count of the first.
pub(crate) struct Sides<'a> {
    pub rows: &'a [UOp],
    pub ks: &'a [UOp],
    pub batch: &'a [UOp],
    pub m: usize,
    pub mp: usize,
    pub k: usize,
    /// K rounded up to whole blocks.
    pub kp: usize,
    pub nb: usize,
    /// A range id unused by the kernel.
    pub first_id: usize,
}

/// `operand` as an in-place operand, when it is an ungated `float32` load with a separable
/// index.
// A read in place: mnist kernels per step 945 -> 488 ms (see docs/performance.md)
pub(crate) fn in_place_operand(operand: &UOp, s: &Sides<'_>) -> Option<InPlaceOperand> {
    if operand.dtype() != DType::FLOAT32 {
        return None;
    }
    // Exactly one load, ungated, and every other node elementwise on it or a constant.
    let nodes = operand.toposort();
    let loads: Vec<&UOp> = nodes.iter().filter(|n| n.op() == Ops::Load).collect();
    let [load] = loads.as_slice() else {
        return None;
    };
    let index = load.s(0);
    if index.op() != Ops::Index || index.src().len() != 2 {
        return None;
    }
    // Outside the load, only constants and elementwise ops on the load's value: a node that
    // reached a range (`k < m + 1`, a mask built from the kernel's ranges) would make the
    // function depend on the element's position, which the prepared copy does not have.
    let inside_load: std::collections::HashSet<UOp> = load.toposort().into_iter().collect();
    let outside: std::collections::HashSet<&UOp> = nodes
        .iter()
        .filter(|n| !inside_load.contains(*n) || *n == *load)
        .collect();
    let elementwise = outside.iter().all(|n| {
        *n == *load
            || n.op() == Ops::Const
            || (n.op().is_elementwise()
                && !n.dtype().is_ptr()
                && n.src()
                    .iter()
                    .all(|s| s.op() == Ops::Const || outside.contains(s)))
    });
    if !elementwise {
        return None;
    }
    let buf = index.s(0);
    let slot = match (buf.op(), buf.arg()) {
        (Ops::DefineGlobal, Arg::Int(slot)) => *slot as usize,
        _ => return None,
    };
    let prepare = (*load != operand).then(|| {
        let placeholder = UOp::range(1, s.first_id, AxisKind::Loop);
        let element = load_of(&global(buf.dtype(), 1), placeholder.clone());
        let mut map = HashMap::new();
        map.insert((*load).clone(), element);
        Prepare {
            value: operand.substitute(&map),
            placeholder,
        }
    });
    let mut terms = Vec::new();
    summands(index.s(1), 1, &mut terms);
    let mut parts: HashMap<Part, UOp> = HashMap::new();
    for t in terms {
        // Constants join the rows' table.
        let part = part_of(&t, s.rows, s.ks, s.batch)?.unwrap_or(Part::Rows);
        let sum = match parts.remove(&part) {
            Some(acc) => acc.add(&t),
            None => t,
        };
        parts.insert(part, sum);
    }
    let zero = UOp::index(0);
    let get = |p: Part| parts.get(&p).cloned().unwrap_or_else(|| zero.clone());
    Some(InPlaceOperand {
        slot,
        prepare,
        rows: table_kernel(&get(Part::Rows), s.rows, s.mp, s.m - 1, s.first_id),
        ks: table_kernel(&get(Part::Ks), s.ks, s.kp, s.k - 1, s.first_id),
        batches: table_kernel(&get(Part::Batches), s.batch, s.nb, s.nb - 1, s.first_id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(idx: &UOp, rows: &[UOp], ks: &[UOp]) -> Option<Vec<Option<Part>>> {
        let mut terms = Vec::new();
        summands(idx, 1, &mut terms);
        terms.iter().map(|t| part_of(t, rows, ks, &[])).collect()
    }

    #[test]
    fn separable_and_mixed_indices() {
        let (oh, ow) = (
            UOp::range(24, 0, AxisKind::Loop),
            UOp::range(24, 1, AxisKind::Loop),
        );
        let (kh, kw) = (
            UOp::range(5, 2, AxisKind::Reduce),
            UOp::range(5, 3, AxisKind::Reduce),
        );
        let (rows, ks) = ([oh.clone(), ow.clone()], [kh.clone(), kw.clone()]);
        // x[oh + kh, ow + kw] in a 28-wide image, 3 elements in: (oh + kh) * 28 + ow + kw + 3.
        let conv = oh.add(&kh).mul(28i64).add(&ow).add(&kw).add(3i64);
        let p = parts(&conv, &rows, &ks).expect("separable");
        assert_eq!(p.iter().filter(|p| **p == Some(Part::Rows)).count(), 2);
        assert_eq!(p.iter().filter(|p| **p == Some(Part::Ks)).count(), 2);
        assert!(p.contains(&None), "the constant term");
        // A division of a mixed sum (a strided window folded into rows) is not separable.
        assert!(parts(&oh.add(&kh).idiv(2i64), &rows, &ks).is_none());
        // Nor is an index that uses a range outside the GEMM's.
        let other = UOp::range(3, 9, AxisKind::Loop);
        assert!(parts(&oh.add(&other), &rows, &ks).is_none());
    }
}
