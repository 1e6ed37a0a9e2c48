//! Tensors on several devices at once — tinygrad's multi-device tensors (`tinygrad/multi.py`).
//!
//! [`Tensor::shard`] splits a tensor evenly along one axis over a list of devices (or, with no
//! axis, copies the whole of it to each: replicated). The result is one tensor whose device is
//! the tuple of devices, written `(CPU, CPU:1)`, and whose graph is a `Multi` UOp: one source
//! per device, each the shard that device holds. Every op of the API builds its graph on such a
//! tensor as on any other, with the whole (logical) shape.
//!
//! When a multi-device tensor is realized, a `Resolver` turns its graph into one graph per device,
//! the way tinygrad's `multi_pm` rewrites: elementwise ops run per shard (operands sharded on
//! another axis are gathered and split again, replicated ones are cut to each shard's range),
//! movement ops keep or move the sharded axis (or refuse, naming it), a reduction over the
//! sharded axis reduces each shard and then adds (or multiplies, or takes the maximum of) the
//! partial results across devices — an all-reduce (`collective`: copies between the devices,
//! naive or tinygrad's ring, or NCCL across CUDA GPUs), so the replicated result is the same
//! bits everywhere. Each
//! device's graph is then scheduled and run like any single-device graph, and the tensor
//! becomes `Multi` of the shards' buffers. Reading data ([`Tensor::to_vec`]) or copying to one
//! device ([`Tensor::to`]) gathers the shards.

use std::cell::RefCell;
use std::collections::HashMap;

use tinygrad_runtime::DeviceError;
use tinygrad_schedule::is_buffer_view;
use tinygrad_uop::sint::prod;
use tinygrad_uop::{Arg, Ops, SInt, UOp};

use crate::Tensor;
use crate::collective::{self, Route, copy_between};

/// The name of the multi-device "device" made of `devices`: `(CPU, CPU:1)`.
pub(crate) fn multi_name(devices: &[String]) -> String {
    format!("({})", devices.join(", "))
}

/// The devices a multi-device name lists, each canonical; `None` for a single device's name
/// (or a malformed list).
pub(crate) fn parse_multi(name: &str) -> Option<Vec<String>> {
    let inner = name.trim().strip_prefix('(')?.strip_suffix(')')?;
    // a one-device tuple is written `(CPU,)`, as in Python
    let inner = inner.trim_end().strip_suffix(',').unwrap_or(inner);
    inner
        .split(',')
        .map(|d| tinygrad_runtime::device::canonical_device(d.trim()))
        .collect()
}

/// Whether `name` is a multi-device name (a tuple of devices).
pub(crate) fn is_multi(name: &str) -> bool {
    name.starts_with('(')
}

/// A `Multi` node whose shards are all realized buffers: a realized multi-device tensor.
pub(crate) fn is_multi_view(u: &UOp) -> bool {
    u.op() == Ops::Multi && u.src().iter().all(is_buffer_view)
}

fn axis_arg(axis: Option<usize>) -> Arg {
    Arg::Int(axis.map_or(-1, |a| a as i64))
}

/// The sharded axis a `Multi` node's argument names (`None`: replicated).
fn axis_of_multi(u: &UOp) -> Option<usize> {
    u.arg().as_int().and_then(|a| usize::try_from(a).ok())
}

/// A multi-device value while resolving: per-device graphs and the axis they split.
#[derive(Clone)]
struct Sharded {
    shards: Vec<UOp>,
    axis: Option<usize>,
}

/// What a node of the logical graph resolves to.
#[derive(Clone)]
enum Val {
    /// A graph with no multi-device part (constants, aranges): the same on every device.
    Plain(UOp),
    Multi(Sharded),
}

/// Turns multi-device graphs into one graph per device (see the module docs).
pub(crate) struct Resolver<'a> {
    devices: &'a [String],
    memo: HashMap<UOp, Val>,
    /// Realized results, for the collectives that run while resolving (NCCL's all-reduce);
    /// `None` when only the graphs' structure is wanted (`shard_axis`): NCCL's all-reduces are
    /// then built as naive ones, with the same shapes.
    known: Option<RefCell<&'a mut HashMap<UOp, UOp>>>,
    /// The first collective that failed (what `resolve_output` returns).
    failure: RefCell<Option<DeviceError>>,
}

fn unsupported(op: &str, what: impl std::fmt::Display) -> ! {
    panic!("{op} of a multi-device tensor: {what}")
}

fn shrink_axis(u: &UOp, axis: usize, range: (usize, usize)) -> UOp {
    let shape = u.shape_vec();
    let pairs: Vec<(usize, usize)> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i == axis { range } else { (0, d) })
        .collect();
    UOp::new(Ops::Shrink, u.dtype(), vec![u.clone()], Arg::pairs(&pairs))
}

impl<'a> Resolver<'a> {
    /// A resolver that only builds graphs (nothing runs).
    pub(crate) fn new(devices: &'a [String]) -> Resolver<'a> {
        Resolver {
            devices,
            memo: HashMap::new(),
            known: None,
            failure: RefCell::new(None),
        }
    }

    /// A resolver that runs the collectives that need their inputs realized (NCCL), with and
    /// into the realized results `known`.
    pub(crate) fn realizing(
        devices: &'a [String],
        known: &'a mut HashMap<UOp, UOp>,
    ) -> Resolver<'a> {
        Resolver {
            known: Some(RefCell::new(known)),
            ..Resolver::new(devices)
        }
    }

    fn n(&self) -> usize {
        self.devices.len()
    }

    /// `u` (a graph of the multi-device tensor's devices) as one graph per device, and the
    /// axis they split.
    ///
    /// # Errors
    /// When a collective run while resolving (NCCL) fails.
    pub(crate) fn resolve_output(
        &mut self,
        u: &UOp,
    ) -> Result<(Vec<UOp>, Option<usize>), DeviceError> {
        // (not into a Multi's shards: they are other devices' graphs, maybe of another count)
        for node in u.toposort_filtered(|n| n.op() != Ops::Multi) {
            if !self.memo.contains_key(&node) {
                let v = self.resolve_node(&node);
                if let Some(e) = self.failure.borrow_mut().take() {
                    return Err(e);
                }
                self.memo.insert(node, v);
            }
        }
        Ok(match self.memo[u].clone() {
            Val::Plain(p) => (vec![p; self.n()], None),
            Val::Multi(s) => (s.shards, s.axis),
        })
    }

    /// Each shard's range along a sharded axis of size `size`.
    fn bounds(&self, size: usize) -> Vec<(usize, usize)> {
        let sz = size / self.n();
        (0..self.n()).map(|i| (i * sz, (i + 1) * sz)).collect()
    }

    /// A plain graph cut into this tensor's shards along `axis` (or given to every device).
    fn shard_plain(&self, p: &UOp, axis: Option<usize>) -> Vec<UOp> {
        match axis {
            Some(a) if !p.shape_vec().is_empty() => {
                let size = p.shape_vec()[a];
                self.bounds(size)
                    .into_iter()
                    .map(|r| shrink_axis(p, a, r))
                    .collect()
            }
            _ => vec![p.clone(); self.n()],
        }
    }

    /// The whole value on device `j`: the shards copied there and put side by side.
    fn gather_to(&self, s: &Sharded, j: usize) -> UOp {
        gather(&s.shards, s.axis, self.devices, &self.devices[j])
    }

    /// `v` split along `axis` (gathering it first when it is split along another one).
    fn to_axis(&self, v: &Val, axis: Option<usize>) -> Vec<UOp> {
        match v {
            Val::Plain(p) => self.shard_plain(p, axis),
            Val::Multi(s) if s.axis == axis => s.shards.clone(),
            Val::Multi(s) => (0..self.n())
                .map(|j| {
                    let whole = self.gather_to(s, j);
                    match axis {
                        Some(a) => {
                            let size = whole.shape_vec()[a];
                            shrink_axis(&whole, a, self.bounds(size)[j])
                        }
                        None => whole,
                    }
                })
                .collect(),
        }
    }

    /// The partial results `parts` (one per device) combined with `op` across the devices, the
    /// same bits on every device, by the route [`collective::route`] picks.
    fn all_reduce(&self, op: Ops, parts: &[UOp]) -> Vec<UOp> {
        let parts: Vec<UOp> = parts.iter().map(contiguous).collect();
        let numel: usize = parts[0].shape_vec().iter().product();
        let route = match collective::route(self.devices, numel, parts[0].dtype()) {
            // (a resolver that only builds graphs stands in the naive form for NCCL's)
            Route::Nccl if self.known.is_none() => Route::Naive,
            r => r,
        };
        // (printed when the all-reduce is built to run, as tinygrad prints it)
        if tinygrad_runtime::debug_level() >= 2 && self.known.is_some() {
            let name = match route {
                Route::Naive => "NAIVE",
                Route::Ring => "RING",
                Route::All2All => "ALL2ALL",
                Route::Nccl => "NCCL",
            };
            println!(
                "{name} ALLREDUCE {}x{numel} | {}",
                self.n(),
                parts[0].dtype()
            );
        }
        match route {
            Route::Ring => collective::ring(op, &parts, self.devices),
            Route::All2All => collective::all2all(op, &parts, self.devices),
            Route::Nccl => {
                let known = self.known.as_ref().expect("NCCL only when realizing");
                match collective::through_nccl(op, &parts, self.devices, &mut known.borrow_mut()) {
                    Ok(reduced) => reduced,
                    Err(e) => {
                        // (reported by resolve_output before anything uses this graph)
                        self.failure.borrow_mut().get_or_insert(e);
                        collective::naive(op, &parts, self.devices)
                    }
                }
            }
            Route::Naive => collective::naive(op, &parts, self.devices),
        }
    }

    fn resolve_node(&self, u: &UOp) -> Val {
        if u.op() == Ops::Multi {
            return Val::Multi(Sharded {
                shards: u.src().to_vec(),
                axis: axis_of_multi(u),
            });
        }
        // A copy to this tuple of devices (the gradient of a `to` from it): one per device.
        if u.op() == Ops::Copy
            && let Some((from, to)) = u.arg().as_copy()
            && is_multi(to)
            && let Val::Plain(p) = &self.memo[u.s(0)]
        {
            let shards = self
                .devices
                .iter()
                .map(|d| copy_between(p, from, d))
                .collect();
            return Val::Multi(Sharded { shards, axis: None });
        }
        let srcs: Vec<&Val> = u.src().iter().map(|s| &self.memo[s]).collect();
        if srcs.iter().all(|v| matches!(v, Val::Plain(_))) {
            return Val::Plain(u.clone());
        }
        let name = u.op().name();
        let first_multi = srcs
            .iter()
            .find_map(|v| match v {
                Val::Multi(s) => Some(s.clone()),
                Val::Plain(_) => None,
            })
            .expect("a source is multi-device");
        let per_shard = |shards: Vec<Vec<UOp>>, arg: Arg| -> Vec<UOp> {
            (0..self.n())
                .map(|i| {
                    let src: Vec<UOp> = shards.iter().map(|s| s[i].clone()).collect();
                    UOp::new(u.op(), u.dtype(), src, arg.clone())
                })
                .collect()
        };
        let multi = |shards: Vec<UOp>, axis: Option<usize>| Val::Multi(Sharded { shards, axis });
        match u.op() {
            op if op.is_elementwise() || op == Ops::Assign => {
                // The axis of the first sharded operand (an assignment: its target's).
                let axis = match op {
                    Ops::Assign => first_multi.axis,
                    _ => srcs.iter().find_map(|v| match v {
                        Val::Multi(s) => s.axis,
                        Val::Plain(_) => None,
                    }),
                };
                let shards = srcs.iter().map(|v| self.to_axis(v, axis)).collect();
                multi(per_shard(shards, u.arg().clone()), axis)
            }
            Ops::Contiguous | Ops::ContiguousBackward | Ops::Detach | Ops::Noop => multi(
                per_shard(vec![first_multi.shards.clone()], u.arg().clone()),
                first_multi.axis,
            ),
            // to one device: the shards gathered there (a graph of that device)
            Ops::Copy => {
                let (_, to) = u.arg().as_copy().expect("a Copy names its devices");
                Val::Plain(gather(
                    &first_multi.shards,
                    first_multi.axis,
                    self.devices,
                    to,
                ))
            }
            Ops::Reshape => self.reshape(u, &first_multi),
            Ops::Permute => {
                let perm = u.arg().as_shape().expect("a Permute names its order");
                let axis = first_multi
                    .axis
                    .map(|a| perm.iter().position(|&p| p == a).expect("a permutation"));
                multi(
                    per_shard(vec![first_multi.shards.clone()], u.arg().clone()),
                    axis,
                )
            }
            Ops::Expand => {
                let shape = plain_shape(u, "expand");
                let shards = first_multi
                    .shards
                    .iter()
                    .map(|sh| {
                        let mut local = shape.clone();
                        if let Some(a) = first_multi.axis {
                            local[a] = sh.shape_vec()[a];
                        }
                        UOp::new(Ops::Expand, u.dtype(), vec![sh.clone()], Arg::shape(&local))
                    })
                    .collect();
                multi(shards, first_multi.axis)
            }
            Ops::Pad => {
                let pads = plain_pairs(u, "pad");
                if let Some(a) = first_multi.axis
                    && pads[a] != (0, 0)
                {
                    unsupported(
                        "pad",
                        format_args!(
                            "padding {pads:?} pads axis {a}, the axis it is sharded on \
                             (shape {:?}); pad another axis, or gather it first with `to`",
                            u.s(0).shape_vec()
                        ),
                    )
                }
                multi(
                    per_shard(vec![first_multi.shards.clone()], u.arg().clone()),
                    first_multi.axis,
                )
            }
            Ops::Shrink => self.shrink(u, &first_multi),
            Ops::Flip => {
                let axes = plain_axes(u);
                if let Some(a) = first_multi.axis
                    && axes.contains(&a)
                {
                    unsupported(
                        "flip",
                        format_args!(
                            "axis {a} is the axis it is sharded on (shape {:?})",
                            u.s(0).shape_vec()
                        ),
                    )
                }
                multi(
                    per_shard(vec![first_multi.shards.clone()], u.arg().clone()),
                    first_multi.axis,
                )
            }
            Ops::ReduceAxis => {
                let Arg::Reduce(op, axes) = u.arg() else {
                    panic!("a ReduceAxis carries its op and axes")
                };
                let local = per_shard(vec![first_multi.shards.clone()], u.arg().clone());
                match first_multi.axis {
                    Some(a) if axes.contains(&a) => multi(self.all_reduce(*op, &local), None),
                    axis => multi(local, axis),
                }
            }
            _ => unsupported(
                &name.to_lowercase(),
                format_args!("the op {name} has no multi-device form"),
            ),
        }
    }

    /// tinygrad's `reshape_multi`: the sharded axis becomes the last new axis whose preceding
    /// sizes multiply to the same as before it, and must still split evenly.
    fn reshape(&self, u: &UOp, s: &Sharded) -> Val {
        let Some(axis) = s.axis else {
            let shards = s
                .shards
                .iter()
                .map(|sh| UOp::new(Ops::Reshape, u.dtype(), vec![sh.clone()], u.arg().clone()))
                .collect();
            return Val::Multi(Sharded { shards, axis: None });
        };
        // (sizes may be symbolic on the other axes: compared as simplified expressions)
        let new_shape = u.arg().sym_shape().expect("a Reshape names its shape");
        let old_shape = u.s(0).sym_shape_vec();
        let before = prod(&old_shape[..axis]);
        let mut acc = SInt::Const(1);
        let mut new_axis = None;
        for (i, d) in new_shape.iter().enumerate() {
            if acc == before {
                new_axis = Some(i);
            }
            acc = &acc * d;
        }
        let moved = || -> ! {
            unsupported(
                "reshape",
                format_args!(
                    "{:?} -> {:?} moves elements between the shards of axis {axis} ({} devices)",
                    u.s(0).shape_vec(),
                    u.shape_vec(),
                    self.n()
                ),
            )
        };
        let Some(new_axis) = new_axis else { moved() };
        let Some(size) = new_shape[new_axis]
            .as_const()
            .filter(|d| d.is_multiple_of(self.n()))
        else {
            moved()
        };
        let mut local = new_shape.clone();
        local[new_axis] = SInt::Const(size / self.n());
        let shards = s
            .shards
            .iter()
            .map(|sh| {
                UOp::new(
                    Ops::Reshape,
                    u.dtype(),
                    vec![sh.clone()],
                    Arg::sizes(&local),
                )
            })
            .collect();
        Val::Multi(Sharded {
            shards,
            axis: Some(new_axis),
        })
    }

    /// tinygrad's `shrink_multi`: the sharded axis is kept whole, or shrunk to exactly one
    /// shard (which every device then gets a copy of: replicated).
    fn shrink(&self, u: &UOp, s: &Sharded) -> Val {
        let Some(axis) = s.axis else {
            let shards = s
                .shards
                .iter()
                .map(|sh| UOp::new(Ops::Shrink, u.dtype(), vec![sh.clone()], u.arg().clone()))
                .collect();
            return Val::Multi(Sharded { shards, axis: None });
        };
        // (the other axes' bounds may be symbolic; the sharded axis's must be numbers)
        let pairs = u.arg().sym_pairs().expect("a Shrink names its bounds");
        let range = match &pairs[axis] {
            (SInt::Const(b), SInt::Const(e)) => (*b, *e),
            (b, e) => unsupported(
                "shrink",
                format_args!("symbolic range ({b}, {e}) of axis {axis}, the axis it is sharded on"),
            ),
        };
        let size = u.s(0).shape_vec()[axis];
        let bounds = self.bounds(size);
        let local_pairs = |sh: &UOp| -> Arg {
            let local = sh.shape_vec()[axis];
            let local: Vec<(SInt, SInt)> = pairs
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    if i == axis {
                        (SInt::Const(0), SInt::Const(local))
                    } else {
                        p.clone()
                    }
                })
                .collect();
            Arg::sym_pairs_of(&local)
        };
        if range == (0, size) {
            let shards = s
                .shards
                .iter()
                .map(|sh| UOp::new(Ops::Shrink, u.dtype(), vec![sh.clone()], local_pairs(sh)))
                .collect();
            return Val::Multi(Sharded {
                shards,
                axis: Some(axis),
            });
        }
        let Some(k) = bounds.iter().position(|&b| b == range) else {
            unsupported(
                "shrink",
                format_args!(
                    "range {range:?} of axis {axis}, the axis it is sharded on, is neither the \
                     whole axis nor one shard's range (shards: {bounds:?})"
                ),
            )
        };
        let one = &s.shards[k];
        let cut = UOp::new(Ops::Shrink, u.dtype(), vec![one.clone()], local_pairs(one));
        let shards = (0..self.n())
            .map(|j| copy_between(&contiguous(&cut), &self.devices[k], &self.devices[j]))
            .collect();
        Val::Multi(Sharded { shards, axis: None })
    }
}

fn contiguous(u: &UOp) -> UOp {
    if is_buffer_view(u) || u.op() == Ops::Contiguous {
        return u.clone();
    }
    UOp::new(Ops::Contiguous, u.dtype(), vec![u.clone()], Arg::None)
}

fn plain_shape(u: &UOp, op: &str) -> Vec<usize> {
    match u.arg() {
        Arg::Shape(s) => s.to_vec(),
        _ => unsupported(op, "symbolic shapes are not supported on several devices"),
    }
}

fn plain_pairs(u: &UOp, op: &str) -> Vec<(usize, usize)> {
    match u.arg() {
        Arg::Pairs(p) => p.to_vec(),
        _ => unsupported(op, "symbolic shapes are not supported on several devices"),
    }
}

fn plain_axes(u: &UOp) -> Vec<usize> {
    u.arg()
        .as_shape()
        .map(<[usize]>::to_vec)
        .unwrap_or_default()
}

/// Realizes multi-device tensors: each graph resolved to per-device graphs, these realized on
/// their devices, and each tensor's graph replaced by `Multi` of the shards' buffers (unless it
/// was assigned a new graph meanwhile). Returns the realized views, in order.
pub(crate) fn realize_multi(
    todo: &[(&Tensor, &UOp)],
    known: &mut HashMap<UOp, UOp>,
) -> Result<Vec<UOp>, DeviceError> {
    let mut temps: Vec<Tensor> = Vec::new();
    let mut layout: Vec<(usize, Option<usize>, usize)> = Vec::new(); // (first temp, axis, count)
    for &(t, u) in todo {
        let devices = parse_multi(t.device()).expect("a multi-device tensor's device names them");
        let (shards, axis) = Resolver::realizing(&devices, known).resolve_output(u)?;
        layout.push((temps.len(), axis, shards.len()));
        for (sh, d) in shards.into_iter().zip(&devices) {
            temps.push(Tensor::from_uop(sh, d));
        }
    }
    // Partial results that several devices copy (all-reduce terms) are realized once each, on
    // their own device, before any device's graph runs.
    let graphs: Vec<UOp> = temps.iter().map(|t| t.uop()).collect();
    let graphs = crate::tensor::realize_copy_sources(&graphs, known)?;
    let temps: Vec<Tensor> = temps
        .iter()
        .zip(graphs)
        .map(|(t, g)| Tensor::from_uop(g, t.device()))
        .collect();
    let refs: Vec<&Tensor> = temps.iter().collect();
    let views = Tensor::realize_snapshots_with(&refs, known)?;
    let mut out = Vec::with_capacity(todo.len());
    for (&(t, u), &(start, axis, count)) in todo.iter().zip(&layout) {
        let shards = views[start..start + count].to_vec();
        let new = UOp::new(Ops::Multi, u.dtype(), shards, axis_arg(axis));
        t.swap_uop_if_unchanged(u, new.clone());
        out.push(new);
    }
    Ok(out)
}

/// The bytes of a realized multi-device value (`Multi` of buffer views): the shards' bytes put
/// side by side along the sharded axis, or the first shard's for a replicated one.
pub(crate) fn gather_bytes(view: &UOp, itemsize: usize) -> Result<Vec<u8>, DeviceError> {
    let shards: Vec<Vec<u8>> = view
        .src()
        .iter()
        .map(crate::tensor::view_bytes)
        .collect::<Result<_, _>>()?;
    let Some(axis) = axis_of_multi(view) else {
        return Ok(shards.into_iter().next().unwrap_or_default());
    };
    // Each shard is `outer` blocks of `chunk` bytes (its extent along the axis times the
    // sizes after it); the whole value takes block o of every shard in turn.
    let shape = view.shape_vec();
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product::<usize>() * itemsize;
    let mut out = Vec::with_capacity(shards.iter().map(Vec::len).sum());
    for o in 0..outer {
        for (sh, part) in view.src().iter().zip(&shards) {
            let chunk = sh.shape_vec()[axis] * inner;
            out.extend_from_slice(&part[o * chunk..(o + 1) * chunk]);
        }
    }
    Ok(out)
}

/// A multi-device tensor with `t`'s devices, sharded axis, shape and dtype whose shards are new,
/// unwritten buffers, one of each shard's shape on each device (tinygrad's `empty_like` of a
/// multi-device tensor: `unshard` of a multi-device `BUFFER`).
pub(crate) fn empty_like_multi(t: &Tensor) -> Tensor {
    let devices = t.devices();
    let axis = t.shard_axis();
    let mut shape = t.shape();
    if let Some(a) = axis {
        shape[a] /= devices.len();
    }
    let shards: Vec<UOp> = devices
        .iter()
        .map(|d| {
            tinygrad_runtime::with_default_device(d, || Tensor::empty(&shape, t.dtype())).uop()
        })
        .collect();
    let multi = UOp::new(Ops::Multi, t.dtype(), shards, axis_arg(axis));
    Tensor::from_uop(multi, &multi_name(&devices))
}

/// A new multi-device tensor like `t` made by `make(shape, device)` (tinygrad's `_multi_like`):
/// for a replicated `t`, one of its whole shape on the default device, replicated over `t`'s
/// devices; for a split one, one of each shard's shape on each device, split alike.
pub(crate) fn multi_like(t: &Tensor, make: impl Fn(&[usize], &str) -> Tensor) -> Tensor {
    let devices = t.devices();
    let mut shape = t.shape();
    let Some(axis) = t.shard_axis() else {
        let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
        return make(&shape, &tinygrad_runtime::default_device()).shard(&refs, None);
    };
    shape[axis] /= devices.len();
    let shards: Vec<UOp> = devices.iter().map(|d| make(&shape, d).uop()).collect();
    let dtype = shards[0].dtype();
    let multi = UOp::new(Ops::Multi, dtype, shards, axis_arg(Some(axis)));
    Tensor::from_uop(multi, &multi_name(&devices))
}

/// The whole of a realized multi-device value on device `target` (see [`gather`]).
pub(crate) fn gather_to_device(view: &UOp, devices: &[String], target: &str) -> UOp {
    gather(view.src(), axis_of_multi(view), devices, target)
}

/// The whole value whose shards (`shards[i]` on `devices[i]`) split `axis`, on device
/// `target`: the shards copied there and put side by side, or for a replicated value the
/// replica already there (else the first one's copy).
fn gather(shards: &[UOp], axis: Option<usize>, devices: &[String], target: &str) -> UOp {
    let Some(axis) = axis else {
        let k = devices.iter().position(|d| d == target).unwrap_or(0);
        return copy_between(&shards[k], &devices[k], target);
    };
    let parts: Vec<Tensor> = shards
        .iter()
        .zip(devices)
        .map(|(sh, d)| Tensor::from_uop(copy_between(sh, d, target), target))
        .collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::cat(&refs, axis as isize).uop()
}

impl Tensor {
    /// The tensor split evenly along `axis` over `devices` (tinygrad's `shard`): device `i`
    /// holds the `i`-th of `devices.len()` equal parts. With `axis` `None` every device holds
    /// all of it (replicated). The result's device is the tuple, `(CPU, CPU:1)`; every op
    /// works on it, per shard (see the module docs), and reading it gathers the shards.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 8, 1).reshape(&[2, 4]);
    /// let s = t.shard(&["CPU", "CPU:1"], Some(1));
    /// assert_eq!(s.device(), "(CPU, CPU:1)");
    /// assert_eq!((s.shape(), s.shard_axis()), (vec![2, 4], Some(1)));
    /// assert_eq!((&s * 10).sum(1isize).to_vec::<i32>(), vec![60, 220]);
    /// ```
    ///
    /// # Panics
    /// If the tensor is already on several devices, `devices` is empty or names an unknown
    /// device, the axis is out of range, or its size does not split evenly over the devices
    /// (tinygrad's rule; a size smaller than the device count never does).
    pub fn shard(&self, devices: &[&str], axis: Option<isize>) -> Tensor {
        assert!(
            !is_multi(self.device()),
            "shard: the tensor is already on several devices {}; can't shard a multi-device \
             tensor",
            self.device()
        );
        assert!(!devices.is_empty(), "shard: no devices given");
        let devices: Vec<String> = devices
            .iter()
            .map(|d| {
                tinygrad_runtime::get_device(d)
                    .unwrap_or_else(|e| panic!("shard: {e}"))
                    .name()
                    .to_string()
            })
            .collect();
        if devices.len() == 1 {
            return self.to(&devices[0]);
        }
        let shape = self.shape();
        let axis = axis.map(|a| crate::movement::resolve_axis(a, shape.len(), "shard", &shape));
        if let Some(a) = axis {
            assert!(
                shape[a].is_multiple_of(devices.len()),
                "shard: axis {a} of shape {shape:?} has size {}, which does not split evenly over \
                 {} devices {devices:?}",
                shape[a],
                devices.len()
            );
        }
        let n = devices.len();
        let shards: Vec<UOp> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let part = match axis {
                    Some(a) => {
                        let sz = shape[a] / n;
                        let bounds: Vec<(usize, usize)> = shape
                            .iter()
                            .enumerate()
                            .map(|(j, &s)| {
                                if j == a {
                                    (i * sz, (i + 1) * sz)
                                } else {
                                    (0, s)
                                }
                            })
                            .collect();
                        self.shrink(&bounds)
                    }
                    None => self.clone(),
                };
                part.to(d).uop()
            })
            .collect();
        let multi = UOp::new(Ops::Multi, self.dtype(), shards, axis_arg(axis));
        Tensor::from_uop(multi, &multi_name(&devices))
    }

    /// [`Tensor::shard`] in place (tinygrad's `shard_`): this tensor, and every handle sharing
    /// it (a model's field and its optimizer's list), becomes the sharded tensor; an
    /// accumulated gradient is sharded alike.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::ones(&[4, 2], tinygrad_tensor::DType::FLOAT32);
    /// let same = w.clone();
    /// w.shard_(&["CPU", "CPU:1"], Some(0));
    /// assert_eq!(same.devices(), vec!["CPU".to_string(), "CPU:1".to_string()]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::shard`].
    pub fn shard_(&self, devices: &[&str], axis: Option<isize>) -> &Tensor {
        let sharded = self.shard(devices, axis);
        // an accumulated gradient moves with the tensor (an optimizer adds the two)
        if let Some(g) = self.grad() {
            self.set_grad(Some(g.shard(devices, axis)));
        }
        self.move_to(&sharded);
        self
    }

    /// This tensor sharded like `other`: on its devices, along its axis (tinygrad's
    /// `shard_like`); on `other`'s device when that is a single one.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::arange(0, 4, 1).shard(&["CPU", "CPU:1"], Some(0));
    /// let y = Tensor::arange(10, 14, 1).shard_like(&x);
    /// assert_eq!((&x + &y).to_vec::<i32>(), vec![10, 12, 14, 16]);
    /// ```
    ///
    /// # Panics
    /// If this tensor is already on several devices and is not sharded like `other` (as
    /// tinygrad: a no-op is the only `shard_like` of a multi-device tensor), or as
    /// [`Tensor::shard`].
    pub fn shard_like(&self, other: &Tensor) -> Tensor {
        let devices = other.devices();
        if devices.len() == 1 || !is_multi(other.device()) {
            return self.to(other.device());
        }
        if self.device() == other.device() && self.shard_axis() == other.shard_axis() {
            return self.clone();
        }
        assert!(
            !is_multi(self.device()),
            "shard_like: the tensor is already on several devices {} (axis {:?}); it can't be \
             sharded again like one on {} (axis {:?})",
            self.device(),
            self.shard_axis(),
            other.device(),
            other.shard_axis()
        );
        let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
        self.shard(&refs, other.shard_axis().map(|a| a as isize))
    }

    /// The devices this tensor lives on: one name, or each device of a sharded tensor.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert_eq!(Tensor::scalar(1.0f32).to("REF").devices(), vec!["REF".to_string()]);
    /// ```
    pub fn devices(&self) -> Vec<String> {
        parse_multi(self.device()).unwrap_or_else(|| vec![self.device().to_string()])
    }

    /// The axis a multi-device tensor is split along (`None`: replicated, or on one device) —
    /// tinygrad's `uop.axis`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let s = Tensor::arange(0, 6, 1).reshape(&[2, 3]).shard(&["CPU", "CPU:1"], Some(0));
    /// assert_eq!(s.permute(&[1, 0]).shard_axis(), Some(1));
    /// assert_eq!(s.sum(0isize).shard_axis(), None); // all-reduced: replicated
    /// ```
    pub fn shard_axis(&self) -> Option<usize> {
        let devices = parse_multi(self.device())?;
        let u = self.uop();
        if u.op() == Ops::Multi {
            return axis_of_multi(&u);
        }
        Resolver::new(&devices)
            .resolve_output(&u)
            .expect("a resolver that runs nothing does not fail")
            .1
    }
}
