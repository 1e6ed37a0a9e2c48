//! Shapes of tensor-level UOps, computed from the graph and cached on each node (tinygrad's
//! `UOp.shape`). Kernel-level nodes have no shape.

use std::sync::Arc;

use crate::{Arg, Ops, SInt, UOp};

impl UOp {
    /// The tensor-level shape of this node, or `None` for nodes that have none (kernel-level ops,
    /// sinks). Computed once per node.
    pub fn shape(&self) -> Option<Arc<[usize]>> {
        if let Some(s) = self.cache().shape.get() {
            return s.clone();
        }
        // A node built on nodes whose shapes are known (a graph built op by op): no walk.
        if self.src().iter().all(|s| s.cache().shape.get().is_some()) {
            let s = compute_shape(self);
            return self.cache().shape.get_or_init(|| s).clone();
        }
        // Compute sources' shapes first, iteratively, so deep graphs do not recurse deeply.
        for n in self.toposort_filtered(|n| n.cache().shape.get().is_none()) {
            if n.cache().shape.get().is_none() {
                let s = compute_shape(&n);
                let _ = n.cache().shape.set(s);
            }
        }
        self.cache().shape.get().cloned().flatten()
    }

    /// The shape as a vector.
    ///
    /// # Panics
    /// If the node has no shape.
    pub fn shape_vec(&self) -> Vec<usize> {
        self.shape()
            .unwrap_or_else(|| panic!("{} has no shape", self.op()))
            .to_vec()
    }
}

impl UOp {
    /// The shape with symbolic sizes where they are (tinygrad's `shape` of `sint`s): sizes that
    /// depend on a variable, from the `SymShape`/`SymPairs` arguments of the movement ops
    /// before it. [`UOp::shape`] is the same shape with each variable at its bound value (the
    /// largest value where it is unbound). Computed once per node.
    pub fn sym_shape(&self) -> Option<Arc<[SInt]>> {
        if !self.has_sym() {
            return self
                .shape()
                .map(|s| s.iter().map(|&d| SInt::Const(d)).collect());
        }
        if let Some(s) = self.cache().sym_shape.get() {
            return s.clone();
        }
        for n in self.toposort_filtered(|n| n.has_sym() && n.cache().sym_shape.get().is_none()) {
            if n.has_sym() && n.cache().sym_shape.get().is_none() {
                let s = compute_sym_shape(&n);
                let _ = n.cache().sym_shape.set(s);
            }
        }
        self.cache().sym_shape.get().cloned().flatten()
    }

    /// [`UOp::sym_shape`] as a vector.
    ///
    /// # Panics
    /// If the node has no shape.
    pub fn sym_shape_vec(&self) -> Vec<SInt> {
        self.sym_shape()
            .unwrap_or_else(|| panic!("{} has no shape", self.op()))
            .to_vec()
    }
}

fn compute_sym_shape(u: &UOp) -> Option<Arc<[SInt]>> {
    let src = |i: usize| u.src().get(i).and_then(UOp::sym_shape);
    match u.op() {
        Ops::Reshape | Ops::Expand => u.arg().sym_shape().map(Arc::from),
        Ops::Permute => {
            let s = src(0)?;
            Some(u.arg().as_shape()?.iter().map(|&p| s[p].clone()).collect())
        }
        Ops::Pad => {
            let s = src(0)?;
            Some(
                s.iter()
                    .zip(u.arg().sym_pairs()?)
                    .map(|(d, (b, a))| &(d + &b) + &a)
                    .collect(),
            )
        }
        Ops::Shrink => Some(u.arg().sym_pairs()?.iter().map(|(b, e)| e - b).collect()),
        Ops::ReduceAxis => {
            let mut s = src(0)?.to_vec();
            if let Arg::Reduce(_, axes) = u.arg() {
                for &a in axes.iter() {
                    if a < s.len() {
                        s[a] = SInt::Const(1);
                    }
                }
            }
            Some(s.into())
        }
        // sources of one shape: the one with symbolic sizes speaks for all
        Ops::Where => src(1).or_else(|| src(0)),
        // the shards' sizes; the split axis (concrete: shards split it evenly) sums them
        Ops::Multi => {
            let mut s = src(0)?.to_vec();
            if let Some(axis) = u.arg().as_int().and_then(|a| usize::try_from(a).ok()) {
                *s.get_mut(axis)? = SInt::Const(*u.shape()?.get(axis)?);
            }
            Some(s.into())
        }
        op if op.is_elementwise() => u
            .src()
            .iter()
            .find(|s| s.has_sym())
            .and_then(UOp::sym_shape)
            .or_else(|| src(0)),
        Ops::Flip
        | Ops::Contiguous
        | Ops::ContiguousBackward
        | Ops::Detach
        | Ops::Copy
        | Ops::Assign
        | Ops::Noop => src(0),
        Ops::Native => u
            .shape()
            .map(|s| s.iter().map(|&d| SInt::Const(d)).collect()),
        _ => u
            .shape()
            .map(|s| s.iter().map(|&d| SInt::Const(d)).collect()),
    }
}

fn src_shape(u: &UOp, i: usize) -> Option<Arc<[usize]>> {
    u.src()
        .get(i)
        .and_then(|s| s.cache().shape.get().cloned().flatten())
}

fn compute_shape(u: &UOp) -> Option<Arc<[usize]>> {
    let arg_list = || u.arg().as_shape().map(|s| s.to_vec());
    match u.op() {
        Ops::Buffer => match u.arg() {
            Arg::Buffer(size, _) => Some(Arc::from(vec![*size])),
            _ => None,
        },
        Ops::Const => Some(Arc::from(Vec::<usize>::new())),
        Ops::Reshape | Ops::Expand => arg_list().map(Arc::from),
        Ops::Permute => {
            let s = src_shape(u, 0)?;
            Some(arg_list()?.iter().map(|&p| s[p]).collect())
        }
        Ops::Pad => {
            let s = src_shape(u, 0)?;
            Some(
                s.iter()
                    .zip(u.arg().as_pairs()?)
                    .map(|(d, (b, a))| d + b + a)
                    .collect(),
            )
        }
        Ops::Shrink => Some(u.arg().as_pairs()?.iter().map(|(b, e)| e - b).collect()),
        Ops::ReduceAxis => {
            let mut s = src_shape(u, 0)?.to_vec();
            if let Arg::Reduce(_, axes) = u.arg() {
                for &a in axes.iter() {
                    if a < s.len() {
                        s[a] = 1;
                    }
                }
            }
            Some(s.into())
        }
        Ops::Where => src_shape(u, 1).or_else(|| src_shape(u, 0)),
        Ops::Multi => {
            let mut s = src_shape(u, 0)?.to_vec();
            if let Some(axis) = u.arg().as_int().and_then(|a| usize::try_from(a).ok()) {
                *s.get_mut(axis)? = (0..u.src().len())
                    .map(|i| src_shape(u, i).and_then(|s| s.get(axis).copied()))
                    .sum::<Option<usize>>()?;
            }
            Some(s.into())
        }
        op if op.is_elementwise() => src_shape(u, 0),
        Ops::Flip
        | Ops::Contiguous
        | Ops::ContiguousBackward
        | Ops::Detach
        | Ops::Copy
        | Ops::Assign
        | Ops::Noop => src_shape(u, 0),
        Ops::Native => match u.arg() {
            Arg::Opaque(o) => o.output_shape().map(Arc::from),
            _ => None,
        },
        _ => None,
    }
}

/// The largest byte size a shape may describe: what Rust can allocate and what a signed 64-bit
/// (or pointer-sized) byte offset can reach.
pub const MAX_BYTES: usize = isize::MAX as usize;

/// The element count of `shape` with elements of `itemsize` bytes, or `None` when the shape is
/// too large to ever be a buffer.
///
/// Zero-sized axes count as 1 for the check: a reduction over an empty axis gives the shape with
/// that axis set to 1, so `[0, 2^32, 2^32]` is rejected too (its sum over axis 0 has 2^64
/// elements). With this check every shape derived from an accepted one by reducing, and every
/// buffer of one, has a byte size that fits in `isize`, so index arithmetic in 64 bits never
/// wraps.
///
/// ```
/// use tinygrad_uop::shape::checked_numel;
/// assert_eq!(checked_numel(&[2, 3], 4), Some(6));
/// assert_eq!(checked_numel(&[0, 3], 4), Some(0));
/// assert_eq!(checked_numel(&[1 << 62], 4), None); // 2^64 bytes
/// assert_eq!(checked_numel(&[0, 1 << 32, 1 << 32], 4), None);
/// ```
pub fn checked_numel(shape: &[usize], itemsize: usize) -> Option<usize> {
    let mut bound = itemsize.max(1);
    let mut numel = 1usize;
    for &d in shape {
        bound = bound.checked_mul(d.max(1))?;
        numel = numel.saturating_mul(d);
    }
    (bound <= MAX_BYTES).then_some(numel)
}

/// [`checked_numel`], panicking with a message naming `op`, the shape and the dtype's size.
///
/// # Panics
/// If the shape is too large (see [`checked_numel`]).
pub fn numel_or_panic(op: &str, shape: &[usize], itemsize: usize) -> usize {
    checked_numel(shape, itemsize).unwrap_or_else(|| {
        panic!(
            "{op}: shape {shape:?} is too large: its elements of {itemsize} bytes need more \
             than {MAX_BYTES} bytes (isize::MAX)"
        )
    })
}
