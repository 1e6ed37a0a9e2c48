//! Realizing: scheduling the kernels that compute tensors and running them, with each copy's
//! source realized on its own device first.

use std::collections::HashMap;
use std::sync::Arc;

use tinygrad_dtype::DType;
use tinygrad_runtime::{Buffer, DeviceError, default_device, get_device, run_schedule_with_vars};
use tinygrad_schedule::{ScheduleItem, create_schedule, is_buffer_view};
use tinygrad_uop::{Arg, Ops, UOp};

use super::{Tensor, View};

impl Tensor {
    /// Schedules (without running) the kernels that would compute `tensors` on their device
    /// (the first tensor's). A copy from another device is a transfer item (`Copy` AST); its
    /// source, on the other device, is realized there first (that part does run).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    /// let b = (&a + 1.0) * 2.0;
    /// assert_eq!(Tensor::schedule(&[&b]).len(), 1); // one fused kernel
    /// assert_eq!(Tensor::schedule(&[&a]).len(), 0); // already a buffer
    /// let c = (&a * 3.0).to("REF") + 1.0;
    /// assert_eq!(Tensor::schedule(&[&c]).len(), 2); // the copy, then one kernel on REF
    /// ```
    ///
    /// # Panics
    /// If realizing a copy's source fails.
    pub fn schedule(tensors: &[&Tensor]) -> Vec<ScheduleItem> {
        Tensor::schedule_with_vars(tensors).0
    }

    /// [`Tensor::schedule`] and the values of the variables the graphs bind (tinygrad's
    /// `schedule_with_vars`): the kernels read them as arguments, so one kernel serves every
    /// value.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor, Variable};
    /// let cache = Tensor::arange(0, 16, 1).float();
    /// let n = Variable::new("n", 1, 16);
    /// let first = cache.shrink_sym(&[(0.into(), n.bind(5).into())]);
    /// let (items, vars) = Tensor::schedule_with_vars(&[&first.sum(Axis::All)]);
    /// assert_eq!((items.len(), vars["n"]), (1, 5));
    /// ```
    ///
    /// # Panics
    /// If realizing a copy's source fails.
    pub fn schedule_with_vars(tensors: &[&Tensor]) -> (Vec<ScheduleItem>, HashMap<Arc<str>, i64>) {
        if let Some(t) = tensors.iter().find(|t| crate::multi::is_multi(t.device())) {
            panic!(
                "schedule: a tensor of shape {:?} is on several devices {}; its kernels are \
                 scheduled per device when it is realized (realize it, or move it with `to`)",
                t.shape(),
                t.device()
            );
        }
        let outs: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
        let outs = realize_copy_sources(&outs, &mut HashMap::new())
            .unwrap_or_else(|e| panic!("schedule: {e}"));
        let dev = tensors
            .first()
            .map_or_else(default_device, |t| t.device().to_string());
        let sched = create_schedule(&outs, &mut |dt, n| Buffer::new(&dev, dt, n).uop());
        (sched.items, sched.var_vals)
    }

    /// Computes the tensor (compiling and running its kernels) and keeps the result.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 4, 1) * 3;
    /// t.realize(); // t is now backed by a buffer: nothing left to schedule
    /// assert_eq!(Tensor::schedule(&[&t]).len(), 0);
    /// assert_eq!(t.to_vec::<i32>(), vec![0, 3, 6, 9]);
    /// ```
    ///
    /// # Panics
    /// If the device is missing or a kernel fails to compile (see [`Tensor::try_realize`]).
    pub fn realize(&self) -> &Tensor {
        self.try_realize()
            .unwrap_or_else(|e| panic!("realize: {e}"))
    }

    /// Like [`Tensor::realize`], returning device and compile errors.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 3, 1) + 10;
    /// let r = t.try_realize().expect("the CPU device is available");
    /// assert_eq!(r.to_vec::<i32>(), vec![10, 11, 12]);
    /// ```
    pub fn try_realize(&self) -> Result<&Tensor, DeviceError> {
        Tensor::try_realize_all(&[self])?;
        Ok(self)
    }

    /// Realizes several tensors together (shared work is scheduled once).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::arange(0, 3, 1) * 2;
    /// let (b, c) = (&a + 1, &a * &a);
    /// Tensor::try_realize_all(&[&b, &c]).unwrap();
    /// assert_eq!((b.to_vec::<i32>(), c.to_vec::<i32>()), (vec![1, 3, 5], vec![0, 4, 16]));
    /// ```
    pub fn try_realize_all(tensors: &[&Tensor]) -> Result<(), DeviceError> {
        Tensor::realize_snapshots(tensors).map(|_| ())
    }

    /// Realizes the graphs `tensors` stand for now and returns, for each, the buffer view that
    /// holds its value.
    ///
    /// Each tensor's graph is read once (a snapshot). Another thread may assign to a tensor
    /// while its snapshot is being computed: then the tensor keeps the newer graph (replacing it
    /// by the older result would lose that assignment), and the caller still reads the value
    /// that was realized from the returned view, never the newer, unrealized graph.
    pub(crate) fn realize_snapshots(tensors: &[&Tensor]) -> Result<Vec<UOp>, DeviceError> {
        Tensor::realize_snapshots_with(tensors, &mut HashMap::new())
    }

    /// [`Tensor::realize_snapshots`] reusing what `known` holds (graph -> realized view) and
    /// adding to it every node its schedules realize that only one device can compute: nested
    /// realizations (copy sources, a multi-device all-reduce's partial sums) then compute a
    /// shared part once.
    pub(crate) fn realize_snapshots_with(
        tensors: &[&Tensor],
        known: &mut HashMap<UOp, UOp>,
    ) -> Result<Vec<UOp>, DeviceError> {
        // bases written through one of these views are realized with them
        let bases: Vec<Tensor> = tensors
            .iter()
            .filter_map(|t| t.inner.view.as_ref().and_then(View::base))
            .filter(|b| {
                b.inner
                    .written_through
                    .swap(false, std::sync::atomic::Ordering::AcqRel)
            })
            .collect();
        if !bases.is_empty() {
            let mut all: Vec<&Tensor> = tensors.to_vec();
            all.extend(bases.iter());
            let snaps = Tensor::realize_snapshots_with(&all, known)?;
            return Ok(snaps[..tensors.len()].to_vec());
        }
        let snaps: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
        let (multi, todo): (Vec<Pending>, Vec<Pending>) = tensors
            .iter()
            .copied()
            .zip(&snaps)
            .filter(|(_, u)| !is_buffer_view(u) && !crate::multi::is_multi_view(u))
            .partition(|(t, _)| crate::multi::is_multi(t.device()));
        // What each (device, graph) became: a graph of constants is the same graph on every device,
        // each computing its own buffer for it.
        let mut becomes: HashMap<(&str, UOp), UOp> = HashMap::new();
        // Tensors on several devices: each resolved to one graph per device and realized there.
        if !multi.is_empty() {
            let views = crate::multi::realize_multi(&multi, known)?;
            for ((t, u), v) in multi.iter().zip(views) {
                becomes.insert((t.device(), (*u).clone()), v);
            }
        }
        if todo.is_empty() {
            return Ok(realized_views(&snaps, tensors, &becomes));
        }
        // Tensors on several devices: each device's graphs are scheduled and run on their own.
        let mut by_device: indexmap::IndexMap<&str, Vec<(&Tensor, &UOp)>> = Default::default();
        for &(t, u) in &todo {
            by_device.entry(t.device()).or_default().push((t, u));
        }
        // `known`: what earlier groups and copy sources realized (graph -> its buffer view): a
        // later group reuses it instead of computing it again (`realize_all(&[&a, &a.to("CPU")])`).
        for (devname, group) in by_device {
            let dev = get_device(devname)?;
            let outs: Vec<UOp> = group.iter().map(|(_, u)| (*u).clone()).collect();
            // A copy's source lives on another device: realize it there first.
            let resolved = realize_copy_sources(&outs, known)?;
            crate::jit::note_graph(&resolved);
            let t0 = std::time::Instant::now();
            let sched = create_schedule(&resolved, &mut |dt, n| Buffer::new(devname, dt, n).uop());
            if tinygrad_runtime::device::debug_level() >= 2 {
                eprintln!(
                    "*** scheduled {} kernels in {:.2} ms",
                    sched.items.len(),
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            run_schedule_with_vars(dev.as_ref(), &sched.items, &sched.var_vals)?;
            for (node, view) in &sched.becomes {
                if device_bound(node) {
                    known.insert(node.clone(), view.clone());
                }
            }
            for ((t, o), r) in group.iter().zip(&resolved) {
                let new = sched
                    .becomes
                    .get(r)
                    .expect("every output is realized")
                    .clone();
                t.swap_uop_if_unchanged(o, new.clone());
                if device_bound(o) {
                    known.insert((*o).clone(), new.clone());
                }
                becomes.insert((t.device(), (*o).clone()), new);
            }
        }
        Ok(realized_views(&snaps, tensors, &becomes))
    }

    /// Gives this handle the graph `new` if it still stands for `old` (compare and swap: a
    /// graph assigned meanwhile, by another thread, is kept).
    pub(crate) fn swap_uop_if_unchanged(&self, old: &UOp, new: UOp) {
        let mut cur = self.inner.uop.write().unwrap_or_else(|e| e.into_inner());
        if *cur == *old {
            *cur = new;
            drop(cur);
            crate::jit::note_write(&self.inner);
        }
    }
}

/// Each snapshot's realized view (what it became on its tensor's device), or the snapshot
/// itself when it needed no realizing.
fn realized_views(
    snaps: &[UOp],
    tensors: &[&Tensor],
    becomes: &HashMap<(&str, UOp), UOp>,
) -> Vec<UOp> {
    snaps
        .iter()
        .zip(tensors)
        .map(|(u, t)| {
            becomes
                .get(&(t.device(), u.clone()))
                .cloned()
                .unwrap_or_else(|| u.clone())
        })
        .collect()
}

/// A tensor to realize and the graph it stood for when read.
type Pending<'a> = (&'a Tensor, &'a UOp);

/// Whether a graph can only be computed on one device (it reads a buffer or copies): only such
/// graphs' results are reused across devices' groups. A graph of constants is the same graph on
/// every device (a replicated multi-device tensor's shards are such graphs), and the buffer one
/// device computed for it must not stand in for it on another.
fn device_bound(u: &UOp) -> bool {
    u.has_copy() || u.has_buffer()
}

/// The bytes of the buffer a realized view (a buffer, or reshapes of one) shows.
pub(crate) fn view_bytes(view: &UOp) -> Result<Vec<u8>, DeviceError> {
    view_buffer(view)
        .expect("a realized snapshot is a buffer view")
        .try_to_bytes()
}

/// The buffer under a buffer view (a `Buffer` UOp under reshapes), if `u` is one.
pub(crate) fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    let mut b = u;
    while b.op() == Ops::Reshape {
        b = b.s(0);
    }
    (b.op() == Ops::Buffer).then(|| Buffer::of(b)).flatten()
}

/// `outs` with every `Copy` whose source is not yet a buffer made to copy a buffer instead:
/// each such source is realized on its own device (innermost copies first, so a source that
/// itself copies from a third device finds that copy's source realized). The scheduler, which
/// knows no devices, then turns each `Copy` into a transfer item. `known` holds graphs realized
/// before (graph -> buffer view), reused instead of computed again; the sources realized here
/// are added to it.
// data-parallel mnist step 13.6 -> 2.3 s (see docs/performance.md)
pub(crate) fn realize_copy_sources(
    outs: &[UOp],
    known: &mut HashMap<UOp, UOp>,
) -> Result<Vec<UOp>, DeviceError> {
    let mut outs: Vec<UOp> = outs.iter().map(|o| substitute_known(o, known)).collect();
    loop {
        if !outs.iter().any(UOp::has_copy) {
            return Ok(outs);
        }
        let sink = UOp::new(Ops::Sink, DType::VOID, outs.clone(), Arg::None);
        let pending: Vec<UOp> = sink
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Ops::Copy && !is_buffer_view(u.s(0)))
            .collect();
        if pending.is_empty() {
            return Ok(outs);
        }
        // The innermost copies (no pending copy below their source), their sources realized
        // together per source device: work the sources share (a model's forward pass under
        // several partial sums of a multi-device all-reduce) is scheduled once.
        let pending_set: std::collections::HashSet<&UOp> = pending.iter().collect();
        let mut by_from: indexmap::IndexMap<&str, Vec<&UOp>> = Default::default();
        for copy in &pending {
            let inner = copy.s(0).toposort().iter().any(|n| pending_set.contains(n));
            if !inner {
                let (from, _) = copy
                    .arg()
                    .as_copy()
                    .expect("a Copy names its source device");
                by_from.entry(from).or_default().push(copy);
            }
        }
        for (from, copies) in by_from {
            let sources: Vec<Tensor> = copies
                .iter()
                .map(|c| Tensor::from_uop(c.s(0).clone(), from))
                .collect();
            let refs: Vec<&Tensor> = sources.iter().collect();
            let views = Tensor::realize_snapshots_with(&refs, known)?;
            for (copy, view) in copies.into_iter().zip(views) {
                if device_bound(copy.s(0)) {
                    known.insert(copy.s(0).clone(), view.clone());
                }
                let resolved = match crate::multi::parse_multi(from) {
                    // from several devices: the shards copied to the target, side by side
                    Some(devices) => {
                        let (_, to) = copy
                            .arg()
                            .as_copy()
                            .expect("a Copy names its target device");
                        let gathered = crate::multi::gather_to_device(&view, &devices, to);
                        realize_copy_sources(&[gathered], known)?.remove(0)
                    }
                    None => UOp::new(Ops::Copy, copy.dtype(), vec![view], copy.arg().clone()),
                };
                known.insert(copy.clone(), resolved);
            }
        }
        outs = outs.iter().map(|o| substitute_known(o, known)).collect();
    }
}

/// `u` with the nodes `known` holds (graph -> its realized view) replaced: a node rebuilt over
/// replaced sources is looked up again (what a schedule realized may be such a node).
fn substitute_known(u: &UOp, known: &HashMap<UOp, UOp>) -> UOp {
    if known.is_empty() {
        return u.clone();
    }
    let mut done: HashMap<UOp, UOp> = HashMap::new();
    for n in u.toposort_filtered(|n| !known.contains_key(n)) {
        let new = if let Some(r) = known.get(&n) {
            r.clone()
        } else {
            let src: Vec<UOp> = n.src().iter().map(|s| done[s].clone()).collect();
            if src.iter().zip(n.src()).all(|(a, b)| a == b) {
                n.clone()
            } else {
                let rebuilt = n.with_src(src);
                known.get(&rebuilt).cloned().unwrap_or(rebuilt)
            }
        };
        done.insert(n, new);
    }
    done[u].clone()
}
