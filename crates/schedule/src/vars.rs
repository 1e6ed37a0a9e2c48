//! Bound variables in tensor graphs (tinygrad's `strip_bind` / `var_vals`).
//!
//! A graph built with a bound variable (`Bind(var, value)` inside the symbolic sizes of its
//! movement ops) is scheduled *unbound*: every `Bind` replaced by its variable, the values
//! collected by name. The kernels then read the variable as an argument, so one kernel (and
//! one schedule-cache entry) serves every value; the numbers of an unbound size are its largest
//! values, which is what its buffers are allocated for. The realized views are bound again
//! before the tensor layer sees them.

use std::collections::HashMap;
use std::sync::Arc;

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, SInt, UOp};

/// Variable values by name.
pub type VarVals = HashMap<Arc<str>, i64>;

/// `arg` with each symbolic size passed through `f` (its numbers recomputed).
fn map_arg(arg: &Arg, f: &mut dyn FnMut(&SInt) -> SInt) -> Arg {
    match arg {
        Arg::SymShape(_, s) => Arg::sizes(&s.iter().map(&mut *f).collect::<Vec<_>>()),
        Arg::SymPairs(_, p) => {
            Arg::sym_pairs_of(&p.iter().map(|(a, b)| (f(a), f(b))).collect::<Vec<_>>())
        }
        a => a.clone(),
    }
}

/// Rebuilds the part of `outs`' graph that has symbolic sizes with `f` applied to them.
fn map_graph(outs: &[UOp], f: &mut dyn FnMut(&SInt) -> SInt) -> Vec<UOp> {
    let sink = UOp::new(Ops::Sink, DType::VOID, outs.to_vec(), Arg::None);
    let mut done: HashMap<UOp, UOp> = HashMap::new();
    for n in sink.toposort_filtered(UOp::has_sym) {
        if !n.has_sym() {
            continue;
        }
        let src: Vec<UOp> = n
            .src()
            .iter()
            .map(|s| done.get(s).cloned().unwrap_or_else(|| s.clone()))
            .collect();
        let new = UOp::new(n.op(), n.dtype(), src, map_arg(n.arg(), f));
        done.insert(n, new);
    }
    outs.iter()
        .map(|o| done.get(o).cloned().unwrap_or_else(|| o.clone()))
        .collect()
}

/// `outs` with every bound variable unbound, and the variables' values.
///
/// # Panics
/// If a variable is bound to two values in the graph.
pub fn unbind(outs: &[UOp]) -> (Vec<UOp>, VarVals) {
    let mut vals = VarVals::new();
    if !outs.iter().any(UOp::has_sym) {
        return (outs.to_vec(), vals);
    }
    let unbound = map_graph(outs, &mut |s| s.unbind(&mut vals));
    (unbound, vals)
}

/// `u` with the variables named in `vals` bound to their values (a realized view, or a graph).
pub fn bind(u: &UOp, vals: &VarVals) -> UOp {
    if vals.is_empty() || !u.has_sym() {
        return u.clone();
    }
    map_graph(std::slice::from_ref(u), &mut |s| s.rebind(vals)).remove(0)
}
