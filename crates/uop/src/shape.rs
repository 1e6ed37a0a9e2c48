//! Shapes of tensor-level UOps, computed from the graph and cached on each node (tinygrad's
//! `UOp.shape`). Kernel-level nodes have no shape.

use std::sync::Arc;

use crate::{Arg, Ops, UOp};

impl UOp {
    /// The tensor-level shape of this node, or `None` for nodes that have none (kernel-level ops,
    /// sinks). Computed once per node.
    pub fn shape(&self) -> Option<Arc<[usize]>> {
        if let Some(s) = self.cache().shape.get() {
            return s.clone();
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
        op if op.is_elementwise() => src_shape(u, 0),
        Ops::Flip
        | Ops::Contiguous
        | Ops::ContiguousBackward
        | Ops::Detach
        | Ops::Copy
        | Ops::Assign
        | Ops::Noop => src_shape(u, 0),
        _ => None,
    }
}
