//! The scheduler: turns a lazy tensor graph (UOps) into an ordered list of kernels.
//!
//! Module map:
//! - [`rangeify`]: lowering one realized node into a kernel AST — movement ops become index
//!   arithmetic on loop ranges, reductions become kernel `Reduce`s, inputs become `Load`s.
//! - [`split`]: large reductions split into two kernels, so a full `sum` runs on all cores.
//! - [`gather`]: one-hot sums (`Embedding`, `gather`, tensor indexing) collapsed into loads at a
//!   data-dependent index.
//! - [`vars`]: bound variables — graphs are scheduled with them unbound (one kernel for every
//!   value), their values returned with the schedule.
//! - `cache`: the schedule cache — a graph scheduled before (same structure, same input
//!   buffers) reuses its kernels and buffer plan ([`schedule_cache_hits`],
//!   [`schedule_cache_misses`]).
//! - this file: [`create_schedule`] — which nodes become buffers (the realize decisions) and the
//!   kernels that compute them, in dependency order.
//!
//! Before any decision the graph loses its gradient markers (`Detach`, `ContiguousBackward`:
//! equal computations with and without them are one node) and its large reductions are split
//! ([`split`]).
//!
//! Realize decisions, following tinygrad's fusion behaviour:
//! - the requested outputs (unless they already are a buffer or a reshape of one);
//! - `Contiguous` nodes;
//! - a reduction whose result is broadcast (`x - x.max(1, keepdim)`), that sits inside another
//!   reduction, or that would be inlined in two places (two kernels, or two different indexings):
//!   it gets its own kernel (found while lowering its consumers), so no work is done twice;
//! - a second reduction beside another in one kernel (`conv(x) + conv(y)`; a one-hot gather,
//!   which becomes a load, does not count), as in tinygrad: each then takes the GEMM path;
//! - an expensive computed node (one reading more than two buffers, tinygrad's measure, or
//!   whose float work per element is a transcendental's or more: recomputing an `exp` costs
//!   more than storing and loading it) that would be inlined in two places, or broadcast so
//!   that a kernel evaluates it more often than it has elements (a LayerNorm's output feeding a
//!   matmul): the cost of a kernel never grows with the depth of the graph before it, and
//!   softmax's `exp` runs once.
//!
//! Everything else is fused: elementwise chains, movement ops (as index math), a reduction and
//! the elementwise ops after it.
//!
//! An `Assign(target, value)` node (built by the tensor layer's `assign_in_place` on a view of
//! a realized buffer — reshape, shrink, permute, flip — and realized on its own) is an
//! in-place write: its kernel stores `value` into the target view's elements of that existing
//! buffer, and the node becomes the target view.

mod cache;
pub mod gather;
pub mod rangeify;
pub mod split;
pub mod vars;

pub use cache::{graph_key, schedule_cache_hits, schedule_cache_misses};

use std::collections::{HashMap, HashSet};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use rangeify::{Lowering, output_ranges, store_kernel};

/// One kernel to run: its AST and the buffers bound to its global slots.
#[derive(Clone, Debug)]
pub struct ScheduleItem {
    /// The kernel: `Sink(Store(Index(DefineGlobal(0), idx), value))`, reading `DefineGlobal(k)`.
    pub ast: UOp,
    /// `Buffer` UOps for each global slot (slot 0 is the output).
    pub bufs: Vec<UOp>,
}

/// The result of scheduling: kernels in execution order, and what each realized tensor node
/// becomes (a view of its buffer).
#[derive(Debug, Default)]
pub struct Schedule {
    /// Kernels in dependency order.
    pub items: Vec<ScheduleItem>,
    /// For each realized node of the graph (outputs included): the buffer view that replaces
    /// it. Nodes introduced by splitting reductions may be listed as well.
    pub becomes: HashMap<UOp, UOp>,
    /// The values of the variables the graph bound (tinygrad's `var_vals`): the kernels read
    /// them as arguments ([`vars`]).
    pub var_vals: vars::VarVals,
}

/// Whether `u` is a buffer, or a chain of reshapes of one (already realized, nothing to run).
pub fn is_buffer_view(u: &UOp) -> bool {
    match u.op() {
        Ops::Buffer => true,
        Ops::Reshape => is_buffer_view(u.s(0)),
        _ => false,
    }
}

/// Schedules the kernels that compute `outputs`. `new_buffer(dtype, size)` must return a fresh
/// `Buffer` UOp for each intermediate or output buffer. A graph scheduled before comes from the
/// schedule cache (`SCHEDULE_CACHE=0`: never), with fresh buffers all the same.
///
/// A graph with bound variables is scheduled unbound ([`vars::unbind`]): its kernels and its
/// cache entry serve every value; `var_vals` holds this graph's values, and the outputs'
/// views in `becomes` are bound again (their buffers are sized for the largest values).
pub fn create_schedule(
    outputs: &[UOp],
    new_buffer: &mut dyn FnMut(DType, usize) -> UOp,
) -> Schedule {
    let (unbound, var_vals) = vars::unbind(outputs);
    let mut sched = if cache::enabled() {
        cache::cached_schedule(&unbound, new_buffer, schedule_uncached)
    } else {
        schedule_uncached(&unbound, new_buffer)
    };
    if !var_vals.is_empty() {
        for (o, u) in outputs.iter().zip(&unbound) {
            if let Some(v) = sched.becomes.get(u).cloned() {
                sched.becomes.insert(o.clone(), vars::bind(&v, &var_vals));
            }
        }
    }
    sched.var_vals = var_vals;
    sched
}

fn schedule_uncached(outputs: &[UOp], new_buffer: &mut dyn FnMut(DType, usize) -> UOp) -> Schedule {
    let requested = outputs;
    let (stripped, strip_map) = strip_grad_markers(outputs);
    let split = split::split_reduces(&stripped);
    let outputs = &split[..];
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    let topo = sink.toposort();

    let mut realize: HashSet<UOp> = HashSet::new();
    let mut sched = Schedule::default();
    for o in outputs {
        if is_buffer_view(o) {
            sched.becomes.insert(o.clone(), o.clone());
        } else {
            realize.insert(o.clone());
        }
    }
    for n in &topo {
        if matches!(n.op(), Ops::Contiguous | Ops::Copy) {
            realize.insert(n.clone());
        }
        // a native kernel reads its inputs from buffers
        if n.op() == Ops::Native {
            realize.insert(n.clone());
            for s in n.src().iter().filter(|s| !is_buffer_view(s)) {
                realize.insert(s.clone());
            }
        }
    }

    // 6-layer decoder: scheduling 294 -> 17 ms (see docs/performance.md)
    // Build kernels for every realized node, in topological order; when lowering finds a node
    // that must be realized (a reduction broadcast, nested or used in two places, an expensive
    // node used twice), add it and rebuild every kernel from the first one that inlined it, so
    // no kernel inlines work that another kernel also computes. Kernels before that one did not
    // see the node and stay as they are (rebuilding everything on each find made scheduling
    // quadratic: ~300 ms for a 6-layer transformer's 120 kernels).
    let mut items: Vec<ScheduleItem> = Vec::new();
    let mut becomes = sched.becomes.clone();
    let mut done: HashMap<UOp, UOp> = HashMap::new(); // realized node -> its Buffer UOp
    let mut built: Vec<(UOp, usize)> = Vec::new(); // realized node, its kernel's index
    let mut seen: HashMap<UOp, (usize, Vec<UOp>)> = HashMap::new();
    'restart: loop {
        // what a node reads depends on the realize set, which just grew
        let mut cost = HashMap::new();
        for n in &topo {
            if !realize.contains(n) || done.contains_key(n) {
                continue;
            }
            // (sizes of unbound variables at their largest values: what the buffer must hold)
            let sym = n.sym_shape_vec();
            let shape: Vec<usize> = sym.iter().map(tinygrad_uop::SInt::bound_value).collect();
            let numel: usize = shape.iter().product();
            if matches!(n.op(), Ops::Copy | Ops::Native) {
                let (kernel, buf) = (items.len(), new_buffer(n.dtype(), numel));
                if numel > 0 {
                    items.push(if n.op() == Ops::Copy {
                        copy_item(n, buf.clone())
                    } else {
                        native_item(n, buf.clone(), &done)
                    });
                }
                becomes.insert(n.clone(), buffer_view(&buf, n.dtype(), &sym));
                done.insert(n.clone(), buf);
                built.push((n.clone(), kernel));
                continue;
            }
            let is_realized = |u: &UOp| u != n && realize.contains(u);
            let ranges = output_ranges(&sym);
            let n_ranges = ranges.iter().filter(|r| r.op() == Ops::Range).count();
            let kernel = items.len();
            let mut low =
                Lowering::new(&is_realized, numel, n_ranges, &mut seen, &mut cost, kernel);
            low.output = Some(n.clone());
            // an in-place write computes its value into its target's buffer
            let assign = n.op() == Ops::Assign;
            let value = low.lower(if assign { n.s(1) } else { n }, &ranges, None, false);
            if let Some(r) = low.found.take() {
                // each restart realizes one more node, so this ends
                assert!(
                    realize.insert(r.clone()),
                    "schedule: {} (shape {:?}) asked to be realized twice",
                    r.op(),
                    r.shape()
                );
                let from = seen.get(&r).map_or(kernel, |(k, _)| *k).min(kernel);
                items.truncate(from);
                while let Some((node, k)) = built.last() {
                    if *k < from {
                        break;
                    }
                    done.remove(node);
                    becomes.remove(node);
                    built.pop();
                }
                seen.retain(|_, (k, _)| *k < from);
                continue 'restart;
            }
            let inputs = std::mem::take(&mut low.inputs);
            let buf = if assign {
                assign_target_buffer(n)
            } else {
                new_buffer(n.dtype(), numel)
            };
            if numel > 0 {
                let value = gather::collapse_gathers(&value);
                let ast = if assign {
                    assign_kernel(n, &ranges, value)
                } else {
                    store_kernel(n.dtype(), &sym, &ranges, value)
                };
                let mut bufs = vec![buf.clone()];
                bufs.extend(inputs.iter().map(|i| {
                    if i.op() == Ops::Buffer {
                        i.clone()
                    } else {
                        done[i].clone()
                    }
                }));
                items.push(ScheduleItem { ast, bufs });
            }
            let view = if assign {
                n.s(0).clone()
            } else {
                buffer_view(&buf, n.dtype(), &sym)
            };
            becomes.insert(n.clone(), view);
            done.insert(n.clone(), buf);
            built.push((n.clone(), kernel));
        }
        break;
    }
    sched.items = items;
    sched.becomes = becomes;
    // Outputs whose graph was rewritten (split reductions) become what their rewrite became.
    for (o, s) in stripped.iter().zip(outputs) {
        if o != s
            && let Some(v) = sched.becomes.get(s).cloned()
        {
            sched.becomes.insert(o.clone(), v);
        }
    }
    // Nodes of the graph as given (with their `Detach` markers) become what their stripped
    // node became: the outputs, and the realized nodes the tensor layer may look up.
    for (orig, s) in &strip_map {
        if let Some(v) = sched.becomes.get(s).cloned() {
            sched.becomes.insert(orig.clone(), v);
        }
    }
    debug_assert!(requested.iter().all(|o| sched.becomes.contains_key(o)));
    sched
}

/// The graph below `outputs` without `Detach` and `ContiguousBackward`, which only steer
/// gradients (tinygrad removes them first thing in its scheduler): `(x - m.detach()) @ w` and
/// `(x - m) @ w` are one node, computed once; kept, they were two equal kernels. Returns the
/// stripped outputs and, for every node that changed, its stripped node.
///
/// An output that strips down to a buffer (`x.detach()` of a realized `x`) stays a copy into
/// a buffer of its own (`Contiguous`), as without stripping: the tensor keeps its own storage.
fn strip_grad_markers(outputs: &[UOp]) -> (Vec<UOp>, HashMap<UOp, UOp>) {
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    let mut new: HashMap<UOp, UOp> = HashMap::new();
    let mut changed: HashMap<UOp, UOp> = HashMap::new();
    for n in sink.toposort() {
        if n.op() == Ops::Sink {
            continue;
        }
        let s = if matches!(n.op(), Ops::Detach | Ops::ContiguousBackward) {
            new[n.s(0)].clone()
        } else {
            n.with_src(n.src().iter().map(|s| new[s].clone()).collect::<Vec<_>>())
        };
        if s != n {
            changed.insert(n.clone(), s.clone());
        }
        new.insert(n, s);
    }
    let stripped = outputs
        .iter()
        .map(|o| {
            let s = new[o].clone();
            if !is_buffer_view(o) && is_buffer_view(&s) {
                let c = UOp::new(Ops::Contiguous, s.dtype(), vec![s], Arg::None);
                changed.insert(o.clone(), c.clone());
                c
            } else {
                s
            }
        })
        .collect();
    (stripped, changed)
}

/// The buffer an `Assign` writes: the one below its target's movement ops.
///
/// # Panics
/// If the target is not movement ops over a buffer (the tensor layer builds `Assign` only on
/// such views).
fn assign_target_buffer(n: &UOp) -> UOp {
    let mut t = n.s(0).clone();
    while matches!(
        t.op(),
        Ops::Reshape | Ops::Shrink | Ops::Permute | Ops::Flip
    ) {
        t = t.s(0).clone();
    }
    assert!(
        t.op() == Ops::Buffer,
        "schedule: an in-place write's target must be a view of a buffer (reshape, shrink, \
         permute, flip), not of a {} node",
        t.op()
    );
    t
}

/// The kernel of an in-place write `Assign(target, value)`: over the target view's elements
/// (`ranges`), `value` stored at the index the view maps each element to in its buffer (slot
/// 0). The index is the one a load of the view would read, so every view the lowering reads
/// through can be written through; a gate on it (a symbolic index the range analysis cannot
/// bound) gates the store.
fn assign_kernel(n: &UOp, ranges: &[UOp], value: UOp) -> UOp {
    let never = |_: &UOp| false;
    let (mut seen, mut cost) = (HashMap::new(), HashMap::new());
    let numel = n.shape_vec().iter().product();
    let n_ranges = ranges.iter().filter(|r| r.op() == Ops::Range).count();
    let mut low = Lowering::new(&never, numel, n_ranges, &mut seen, &mut cost, 0);
    let load = low.lower(n.s(0), ranges, None, false);
    assert!(
        load.op() == Ops::Load && load.s(0).op() == Ops::Index,
        "schedule: an in-place write's target lowered to {} instead of a load",
        load.op()
    );
    let g = rangeify::global_for(n.dtype(), 0);
    let mut src = vec![g.clone()];
    src.extend(load.s(0).src()[1..].iter().cloned());
    let index = UOp::new(Ops::Index, g.dtype(), src, Arg::None);
    let store = UOp::new(Ops::Store, DType::VOID, vec![index, value], Arg::None);
    UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None)
}

/// `buf` seen with `shape` (a reshape unless the shape is flat and not symbolic; with symbolic
/// sizes the buffer holds their largest values, the view its first elements).
fn buffer_view(buf: &UOp, dtype: DType, shape: &[tinygrad_uop::SInt]) -> UOp {
    if shape.len() == 1 && !shape[0].is_symbolic() {
        buf.clone()
    } else {
        UOp::new(Ops::Reshape, dtype, vec![buf.clone()], Arg::sizes(shape))
    }
}

/// The item of a `Native` node writing `dst`: a `Noop` carrying the node's payload as its AST
/// (the device compiles it natively), bound to (`dst`, each input's buffer: realized before it
/// in `done`, or a buffer it views).
fn native_item(n: &UOp, dst: UOp, done: &HashMap<UOp, UOp>) -> ScheduleItem {
    let mut bufs = vec![dst];
    for s in n.src() {
        let mut b = done.get(s).cloned().unwrap_or_else(|| s.clone());
        while b.op() == Ops::Reshape {
            b = b.s(0).clone();
        }
        assert!(
            b.op() == Ops::Buffer,
            "schedule: an input of a native kernel is not in a buffer (a {} node, shape {:?})",
            s.op(),
            s.shape()
        );
        bufs.push(b);
    }
    ScheduleItem {
        ast: UOp::new(Ops::Noop, n.dtype(), vec![], n.arg().clone()),
        bufs,
    }
}

/// The transfer item of a `Copy` node into `dst`: `Copy` with the node's devices and no
/// sources as its AST, bound to (`dst`, the source's buffer).
///
/// # Panics
/// If the source is not a buffer (or a reshape of one): the tensor layer realizes a copy's
/// source on its own device first, since the scheduler does not know devices.
fn copy_item(n: &UOp, dst: UOp) -> ScheduleItem {
    let mut src = n.s(0).clone();
    while src.op() == Ops::Reshape {
        src = src.s(0).clone();
    }
    assert!(
        src.op() == Ops::Buffer,
        "schedule: the source of COPY {} must be realized first (a {} node, shape {:?}); \
         Tensor::realize realizes it on its device",
        n.arg(),
        n.s(0).op(),
        n.s(0).shape()
    );
    ScheduleItem {
        ast: UOp::new(Ops::Copy, n.dtype(), vec![], n.arg().clone()),
        bufs: vec![dst, src],
    }
}
