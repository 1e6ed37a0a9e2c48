//! Roles of the buffers of a recorded call, the signature two calls are compared by, and the
//! plan a replay runs (see the [module docs](super)).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Weak};

use tinygrad_dtype::DType;
use tinygrad_runtime::Buffer;
use tinygrad_runtime::capture::{self, Launch, Recording};
use tinygrad_schedule::is_buffer_view;
use tinygrad_schedule::vars::VarVals;
use tinygrad_uop::{Ops, UOp};

use crate::Tensor;
use crate::tensor::Inner;

use super::JitError;
use super::StateSnapshot;
use super::log::Log;
use crate::tensor::view_buffer;

/// Where a replay takes a buffer from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Src {
    /// The buffer of input `i`.
    Input(usize),
    /// Fresh buffer `k` of the replay (written by a launch).
    Fresh(usize),
    /// The current buffer of the tensors of state `k`.
    State(usize),
    /// A buffer nothing can change.
    Fixed(u64),
    /// Random key `k`, derived anew.
    Rand(usize),
}

/// The role of a buffer as two calls are compared (state by the handles that read it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Input(usize),
    Fresh(usize),
    State(Vec<u64>),
    Fixed(u64),
    Rand,
    /// A buffer that got its data from the host inside the function.
    Upload(String),
}

/// What a call did, in the terms two calls are compared in.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Signature {
    pub(super) graphs: Vec<u64>,
    pub(super) launches: Vec<(&'static str, UOp, Vec<Role>)>,
    pub(super) outputs: Vec<Role>,
    pub(super) writes: Vec<(u64, Role)>,
}

/// A realized view to rebuild on another buffer: the reshapes over the buffer, innermost first.
#[derive(Clone, Debug)]
pub(super) struct ViewTemplate {
    pub(super) reshapes: Vec<UOp>,
}

impl ViewTemplate {
    fn of(u: &UOp) -> ViewTemplate {
        // kept unbound: each replay binds its own values
        let (unbound, _) = tinygrad_schedule::vars::unbind(std::slice::from_ref(u));
        let u = &unbound[0];
        let mut reshapes = vec![];
        let mut b = u;
        while b.op() == Ops::Reshape {
            reshapes.push(b.clone());
            b = b.s(0);
        }
        reshapes.reverse();
        ViewTemplate { reshapes }
    }

    /// The view on `buf`, its symbolic sizes bound to `vals` (a replay's variables).
    fn on(&self, buf: &Arc<Buffer>, vals: &VarVals) -> UOp {
        let mut u = buf.uop();
        for r in &self.reshapes {
            u = UOp::new(Ops::Reshape, r.dtype(), vec![u], r.arg().clone());
        }
        tinygrad_schedule::vars::bind(&u, vals)
    }
}

/// A state buffer: read through these tensors at capture (all held it then).
pub(super) struct State {
    pub(super) captured: Arc<Buffer>,
    pub(super) handles: Vec<Weak<Inner>>,
}

/// A tensor handle a replay gives a value to, or returns.
#[derive(Clone)]
pub(super) enum Target {
    /// The replay's input `i`.
    Input(usize),
    /// A tensor that existed before the capture.
    Handle(Weak<Inner>),
}

impl Target {
    fn get(&self, inputs: &[Tensor]) -> Option<Tensor> {
        match self {
            Target::Input(i) => Some(inputs[*i].clone()),
            Target::Handle(w) => w.upgrade().map(|inner| Tensor { inner }),
        }
    }
}

/// An output: a view of a buffer; `handle` when the function returned a tensor that existed
/// before the call, or an input (that tensor is returned, with its new value).
pub(super) struct Output {
    pub(super) view: ViewTemplate,
    pub(super) src: Src,
    pub(super) device: Arc<str>,
    pub(super) handle: Option<Target>,
}

/// What an input must look like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct InputSig {
    pub(super) shape: Vec<usize>,
    pub(super) dtype: DType,
    pub(super) device: String,
}

impl fmt::Display for InputSig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} on {}", self.shape, self.dtype, self.device)
    }
}

/// A gradient the function realized: its view, where its buffer comes from, its device.
pub(super) type RealizedGrad = (ViewTemplate, Src, Arc<str>);

/// A capture, ready to replay.
pub(super) struct Plan {
    pub(super) inputs: Vec<InputSig>,
    /// For each input, the first input with the same buffer.
    pub(super) alias: Vec<usize>,
    pub(super) launches: Vec<Launch>,
    pub(super) slots: Vec<Vec<Src>>,
    pub(super) fresh: Vec<(Arc<str>, DType, usize)>,
    pub(super) fixed: HashMap<u64, Arc<Buffer>>,
    pub(super) states: Vec<State>,
    pub(super) rand_keys: Vec<(String, u64)>,
    pub(super) outputs: Vec<Output>,
    /// Tensors that existed before the call and got a new value: the view and its source.
    pub(super) writes: Vec<(Target, ViewTemplate, Src)>,
    /// Gradients the function set: the view of a realized one and its source, or `None` (left
    /// lazy: cleared after a replay).
    pub(super) grads: Vec<(Weak<Inner>, Option<RealizedGrad>)>,
    /// Tensors (not inputs) that held input `i`'s buffer at capture: they must still hold it.
    pub(super) input_aliases: Vec<(Weak<Inner>, usize)>,
}

/// One recorded call: what ran, what the tensor layer saw, the inputs' buffers and the
/// realized outputs.
pub(super) struct Recorded {
    pub(super) rec: Recording,
    pub(super) log: Log,
    pub(super) input_sigs: Vec<InputSig>,
    pub(super) input_bufs: Vec<Arc<Buffer>>,
    pub(super) outputs: Vec<(Tensor, UOp)>,
    /// The function's own handles to the inputs, kept alive so that its assignments to them
    /// (logged by handle) are seen.
    pub(super) _own_inputs: Vec<Tensor>,
}

/// Shapes, dtypes, devices and buffers of the inputs (realized first).
pub(super) fn input_buffers(
    inputs: &[Tensor],
) -> Result<(Vec<InputSig>, Vec<Arc<Buffer>>), JitError> {
    if let Some((i, t)) = inputs
        .iter()
        .enumerate()
        .find(|(_, t)| t.devices().len() > 1)
    {
        return Err(JitError::Unreplayable(format!(
            "input {i} is on several devices {}: a Jit does not capture multi-device tensors \
             (call the function without a Jit)",
            t.device()
        )));
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let views = Tensor::realize_snapshots(&refs)?;
    let mut sigs = Vec::with_capacity(inputs.len());
    let mut bufs = Vec::with_capacity(inputs.len());
    for (t, v) in inputs.iter().zip(&views) {
        sigs.push(InputSig {
            shape: t.shape(),
            dtype: t.dtype(),
            device: t.device().to_string(),
        });
        bufs.push(view_buffer(v).expect("a realized snapshot is a buffer view"));
    }
    Ok((sigs, bufs))
}

pub(super) fn alias_pattern(bufs: &[Arc<Buffer>]) -> Vec<usize> {
    (0..bufs.len())
        .map(|i| (0..i).find(|&j| bufs[j].id() == bufs[i].id()).unwrap_or(i))
        .collect()
}

/// A 64-bit FNV-1a hash of `bytes` (uploads are compared by it between two calls).
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

pub(super) fn describe_buffer(b: &Buffer) -> String {
    format!("{}[{}] on {}", b.dtype, b.size, b.device)
}

/// Works out every buffer's role in a recorded call: the signature it is compared by, and the
/// plan to replay it (or why it cannot be).
///
/// With `constant_uploads` ([`Jit::constant_uploads`](super::Jit::constant_uploads)), a buffer
/// the function uploaded from the host is fixed: a replay reads the capture's upload. Its role
/// carries a hash of its bytes, so two calls that uploaded different data differ (and are not
/// captured).
pub(super) fn analyze(r: &Recorded, constant_uploads: bool) -> (Signature, Result<Plan, JitError>) {
    let uploaded: HashSet<u64> = r.rec.uploads.iter().copied().collect();
    let first_new = r.rec.first_buffer_id;
    // pre-existing handles that held each buffer when read
    let mut readers: HashMap<u64, Vec<(u64, Weak<Inner>)>> = HashMap::new();
    for (&(_, buf), w) in &r.log.reads {
        if let Some(inner) = w.upgrade() {
            readers
                .entry(buf)
                .or_default()
                .push((inner.created, w.clone()));
        }
    }
    let mut problem: Option<JitError> = None;
    let mut src_of: HashMap<u64, Src> = HashMap::new();
    let mut role_of: HashMap<u64, Role> = HashMap::new();
    for (i, b) in r.input_bufs.iter().enumerate() {
        src_of.entry(b.id()).or_insert(Src::Input(i));
        role_of.entry(b.id()).or_insert(Role::Input(i));
    }
    let mut fresh: Vec<(Arc<str>, DType, usize)> = vec![];
    let mut fixed: HashMap<u64, Arc<Buffer>> = HashMap::new();
    let mut states: Vec<State> = vec![];
    // every key of the call, in the order drawn (buffer ids grow): a replay draws each again,
    // read or not, so the random counters advance as in a normal call
    let mut drawn: Vec<(u64, (String, u64))> = r
        .log
        .rand_keys
        .iter()
        .map(|(id, k)| (*id, k.clone()))
        .collect();
    drawn.sort_by_key(|(id, _)| *id);
    let rand_index: HashMap<u64, usize> = drawn
        .iter()
        .enumerate()
        .map(|(k, (id, _))| (*id, k))
        .collect();
    let rand_keys: Vec<(String, u64)> = drawn.into_iter().map(|(_, k)| k).collect();
    // a buffer that no launch wrote: an input, state, fixed, a random key or an upload
    let mut classify = |b: &Arc<Buffer>,
                        src_of: &mut HashMap<u64, Src>,
                        role_of: &mut HashMap<u64, Role>,
                        problem: &mut Option<JitError>| {
        if let Some(s) = src_of.get(&b.id()) {
            return (s.clone(), role_of[&b.id()].clone());
        }
        let (src, role) = if let Some(&k) = rand_index.get(&b.id()) {
            (Src::Rand(k), Role::Rand)
        } else if b.size == 0 {
            // an empty buffer holds nothing that could differ from call to call
            fixed.insert(b.id(), b.clone());
            (Src::Fixed(b.id()), Role::Fixed(0))
        } else if constant_uploads && uploaded.contains(&b.id()) {
            // (a buffer that cannot be read back is named by its id, new on every call: no
            // other call's role matches it, so the function is not captured)
            let what = match b.try_to_bytes() {
                Ok(bytes) => format!(
                    "{} with bytes hashed {:016x}",
                    describe_buffer(b),
                    hash(&bytes)
                ),
                Err(e) => format!(
                    "{} (buffer {}, unreadable: {e})",
                    describe_buffer(b),
                    b.id()
                ),
            };
            fixed.insert(b.id(), b.clone());
            (Src::Fixed(b.id()), Role::Upload(what))
        } else if b.id() >= first_new || uploaded.contains(&b.id()) {
            let what = describe_buffer(b);
            problem.get_or_insert_with(|| {
                JitError::Unreplayable(format!(
                    "it uploads host data into a buffer ({what}) that its kernels read \
                     (Tensor::from_slice or similar inside the function): a replay would reuse \
                     the first upload; pass the data as an input, or make it outside the \
                     function"
                ))
            });
            (Src::Fixed(b.id()), Role::Upload(what))
        } else if let Some(rs) = readers.get(&b.id()) {
            let mut stamps: Vec<u64> = rs.iter().map(|(s, _)| *s).collect();
            stamps.sort_unstable();
            states.push(State {
                captured: b.clone(),
                handles: rs.iter().map(|(_, w)| w.clone()).collect(),
            });
            (Src::State(states.len() - 1), Role::State(stamps))
        } else {
            fixed.insert(b.id(), b.clone());
            (Src::Fixed(b.id()), Role::Fixed(b.id()))
        };
        src_of.insert(b.id(), src.clone());
        role_of.insert(b.id(), role.clone());
        (src, role)
    };
    let mut launches = vec![];
    let mut slots = vec![];
    for l in &r.rec.launches {
        let mut srcs = Vec::with_capacity(l.bufs().len());
        let mut roles = Vec::with_capacity(l.bufs().len());
        for (slot, b) in l.bufs().iter().enumerate() {
            let written = slot == 0;
            if written && r.log.in_place.contains(&b.id()) {
                // an in-place write: into the buffer the written tensor holds at replay (a
                // state, or an input); one no tensor handle holds could not be found again
                let (s, role) = classify(b, &mut src_of, &mut role_of, &mut problem);
                if matches!(s, Src::Fixed(_)) {
                    problem.get_or_insert_with(|| {
                        JitError::Unreplayable(format!(
                            "{} writes in place into a buffer ({}) that no tensor from before \
                             the call holds",
                            l.name(),
                            describe_buffer(b)
                        ))
                    });
                }
                srcs.push(s);
                roles.push(role);
                continue;
            }
            if written && !src_of.contains_key(&b.id()) {
                if b.id() < first_new || uploaded.contains(&b.id()) {
                    problem.get_or_insert_with(|| {
                        JitError::Unreplayable(format!(
                            "{} writes into a buffer ({}) that existed before",
                            l.name(),
                            describe_buffer(b)
                        ))
                    });
                }
                fresh.push((b.device.clone(), b.dtype, b.size));
                src_of.insert(b.id(), Src::Fresh(fresh.len() - 1));
                role_of.insert(b.id(), Role::Fresh(fresh.len() - 1));
            } else if written && !matches!(src_of[&b.id()], Src::Fresh(_)) {
                problem.get_or_insert_with(|| {
                    JitError::Unreplayable(format!(
                        "{} writes into a buffer ({}) that it does not own",
                        l.name(),
                        describe_buffer(b)
                    ))
                });
            }
            let (s, role) = classify(b, &mut src_of, &mut role_of, &mut problem);
            srcs.push(s);
            roles.push(role);
        }
        launches.push((l.device(), l.ast().clone(), roles));
        slots.push(srcs);
    }
    let mut outputs = vec![];
    let mut out_roles = vec![];
    for (t, view) in &r.outputs {
        let Some(b) = view_buffer(view) else {
            problem.get_or_insert_with(|| {
                JitError::Unreplayable(format!(
                    "an output is on several devices {}: a Jit does not capture multi-device \
                     tensors (call the function without a Jit)",
                    t.device()
                ))
            });
            continue;
        };
        let (src, role) = classify(&b, &mut src_of, &mut role_of, &mut problem);
        let handle = r.log.target(&t.inner);
        outputs.push(Output {
            view: ViewTemplate::of(view),
            src,
            device: b.device.clone(),
            handle,
        });
        out_roles.push(role);
    }
    let mut writes = vec![];
    let mut write_roles = vec![];
    for w in r.log.writes.values() {
        let Some(inner) = w.upgrade() else { continue };
        let t = Tensor { inner };
        let u = t
            .inner
            .uop
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if !is_buffer_view(&u) {
            problem.get_or_insert_with(|| {
                JitError::Unreplayable(format!(
                    "it assigned to a tensor of shape {:?} ({}) and did not realize it: a replay \
                     only runs kernels; realize it inside the function (return it, or realize it \
                     with the step)",
                    t.shape(),
                    t.dtype()
                ))
            });
            continue;
        }
        let b = view_buffer(&u).expect("a buffer view");
        let (src, role) = classify(&b, &mut src_of, &mut role_of, &mut problem);
        let target = r
            .log
            .target(&t.inner)
            .expect("only earlier tensors are logged");
        // calls are compared by which tensor gets the value: an input by its position (its
        // handle is new each call), an earlier tensor by its stamp
        let who = match &target {
            Target::Input(i) => u64::MAX - *i as u64,
            Target::Handle(_) => t.inner.created,
        };
        write_roles.push((who, role));
        writes.push((target, ViewTemplate::of(&u), src));
    }
    write_roles.sort_by_key(|(s, _)| *s);
    let mut grads = vec![];
    for w in r.log.grads.values() {
        let Some(inner) = w.upgrade() else { continue };
        let t = Tensor { inner };
        let g = t.grad().map(|g| {
            g.inner
                .uop
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        });
        let realized = match g {
            Some(u) if is_buffer_view(&u) => {
                let b = view_buffer(&u).expect("a buffer view");
                let (src, _) = classify(&b, &mut src_of, &mut role_of, &mut problem);
                Some((ViewTemplate::of(&u), src, b.device.clone()))
            }
            _ => None,
        };
        grads.push((w.clone(), realized));
    }
    let mut input_aliases = vec![];
    for (i, b) in r.input_bufs.iter().enumerate() {
        for (_, w) in readers.get(&b.id()).into_iter().flatten() {
            input_aliases.push((w.clone(), i));
        }
    }
    let sig = Signature {
        graphs: r.log.graphs.clone(),
        launches,
        outputs: out_roles,
        writes: write_roles,
    };
    if let Some(what) = &r.log.host_read {
        problem.get_or_insert_with(|| {
            JitError::Unreplayable(format!(
                "it reads {what} back to the host (item, to_vec, tolist, or an op that does, as \
                 masked_select or nonzero): a replay only runs the kernels, so what the function \
                 made of those values would be baked in; compute it with tensor ops (or \
                 masked_select_sized, nonzero_sized), or read it outside the function"
            ))
        });
    }
    if r.outputs.is_empty() {
        problem.get_or_insert(JitError::NoOutputs);
    }
    let plan = match problem {
        Some(e) => Err(e),
        None => Ok(Plan {
            inputs: r.input_sigs.clone(),
            alias: alias_pattern(&r.input_bufs),
            launches: r.rec.launches.clone(),
            slots,
            fresh,
            fixed,
            states,
            rand_keys,
            outputs,
            writes,
            grads,
            input_aliases,
        }),
    };
    (sig, plan)
}

/// Where the first difference between two calls' signatures is, in words.
pub(super) fn first_difference(a: &Signature, b: &Signature) -> String {
    if a.launches.len() != b.launches.len() {
        return format!("{} launches, then {}", a.launches.len(), b.launches.len());
    }
    for (k, ((da, ua, ra), (db, ub, rb))) in a.launches.iter().zip(&b.launches).enumerate() {
        if da != db || ua != ub {
            return format!("launch {k} is a different kernel (on {da}, then on {db})");
        }
        if ra != rb {
            let slot = ra.iter().zip(rb).position(|(x, y)| x != y).unwrap_or(0);
            return format!(
                "launch {k} binds slot {slot} to a buffer of another role ({:?}, then {:?}): \
                 the function reads other tensors from call to call",
                ra[slot], rb[slot]
            );
        }
    }
    if a.outputs != b.outputs {
        return format!(
            "the outputs come from other buffers ({:?}, then {:?})",
            a.outputs, b.outputs
        );
    }
    if a.writes != b.writes {
        return format!(
            "other tensors get new values ({:?}, then {:?})",
            a.writes, b.writes
        );
    }
    "the function builds graphs of another structure (a size computed from a variable's value \
     instead of the variable, or a branch on a Rust value)"
        .into()
}

impl Plan {
    /// Inputs must match the capture's signature and aliasing.
    pub(super) fn check_inputs(
        &self,
        sigs: &[InputSig],
        bufs: &[Arc<Buffer>],
    ) -> Result<(), JitError> {
        if sigs.len() != self.inputs.len() {
            return Err(JitError::Inputs(format!(
                "{} inputs, the capture took {}",
                sigs.len(),
                self.inputs.len()
            )));
        }
        for (i, (got, want)) in sigs.iter().zip(&self.inputs).enumerate() {
            if got != want {
                return Err(JitError::Inputs(format!(
                    "input {i} is {got}, the capture's was {want}"
                )));
            }
        }
        let alias = alias_pattern(bufs);
        if alias != self.alias {
            let i = (0..alias.len())
                .find(|&i| alias[i] != self.alias[i])
                .unwrap_or(0);
            let say = |a: &[usize]| {
                if a[i] == i {
                    format!("input {i} had a buffer of its own")
                } else {
                    format!("input {i} was input {}'s buffer", a[i])
                }
            };
            return Err(JitError::Aliasing(format!(
                "at capture {}; now {}",
                say(&self.alias),
                say(&alias).replace("had", "has").replace("was", "is")
            )));
        }
        for (w, i) in &self.input_aliases {
            let Some(inner) = w.upgrade() else { continue };
            let t = Tensor { inner };
            let cur = t
                .inner
                .uop
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if view_buffer(&cur).is_none_or(|b| b.id() != bufs[*i].id()) {
                return Err(JitError::Aliasing(format!(
                    "input {i} was also a tensor the function reads ({:?} {}) at capture; now \
                     they differ, and the captured kernels read one buffer for both",
                    t.shape(),
                    t.dtype()
                )));
            }
        }
        Ok(())
    }

    /// The buffer a state's tensors hold now (realizing what the user assigned lazily).
    pub(super) fn state_buffer(&self, k: usize) -> Result<Arc<Buffer>, JitError> {
        let state = &self.states[k];
        let mut found: Option<Arc<Buffer>> = None;
        for w in &state.handles {
            let Some(inner) = w.upgrade() else { continue };
            let t = Tensor { inner };
            let view = Tensor::realize_snapshots(&[&t])?.remove(0);
            let b = view_buffer(&view).expect("a realized snapshot is a buffer view");
            match &found {
                Some(f) if f.id() != b.id() => {
                    return Err(JitError::State(format!(
                        "two tensors ({:?} {}) the function read held one buffer at capture \
                         and hold different ones now: the captured kernels read one buffer for \
                         both; reset the Jit",
                        t.shape(),
                        t.dtype()
                    )));
                }
                _ => found = Some(b),
            }
        }
        let b = found.unwrap_or_else(|| state.captured.clone());
        let c = &state.captured;
        if b.dtype != c.dtype || b.size != c.size || b.device != c.device {
            return Err(JitError::State(format!(
                "a tensor the function reads held {} at capture and holds {} now",
                describe_buffer(c),
                describe_buffer(&b)
            )));
        }
        Ok(b)
    }

    /// Runs the capture on `inputs`' buffers and gives every tensor its new value.
    pub(super) fn replay(
        &self,
        tensors: &[Tensor],
        inputs: &[Arc<Buffer>],
        var_vals: &VarVals,
    ) -> Result<Vec<Tensor>, JitError> {
        let states = (0..self.states.len())
            .map(|k| self.state_buffer(k))
            .collect::<Result<Vec<_>, _>>()?;
        let fresh: Vec<Arc<Buffer>> = self
            .fresh
            .iter()
            .map(|(dev, dt, n)| Buffer::new(dev, *dt, *n))
            .collect();
        let mut keys = Vec::with_capacity(self.rand_keys.len());
        for (dev, num) in &self.rand_keys {
            let (k0, k1) = crate::random::call_key(dev, *num);
            let b = Buffer::new(dev, DType::UINT32, 2);
            let bytes: Vec<u8> = [k0, k1].iter().flat_map(|k| k.to_le_bytes()).collect();
            b.try_copy_in(&bytes)?;
            keys.push(b);
        }
        let get = |s: &Src| -> Arc<Buffer> {
            match s {
                Src::Input(i) => inputs[*i].clone(),
                Src::Fresh(k) => fresh[*k].clone(),
                Src::State(k) => states[*k].clone(),
                Src::Fixed(id) => self.fixed[id].clone(),
                Src::Rand(k) => keys[*k].clone(),
            }
        };
        let bufs: Vec<Vec<Arc<Buffer>>> = self
            .slots
            .iter()
            .map(|srcs| srcs.iter().map(&get).collect())
            .collect();
        capture::replay(&self.launches, &bufs, var_vals)?;
        for (target, view, src) in &self.writes {
            if let Some(t) = target.get(tensors) {
                t.set_uop(view.on(&get(src), var_vals));
            }
        }
        for (w, g) in &self.grads {
            if let Some(inner) = w.upgrade() {
                let t = Tensor { inner };
                let grad = g
                    .as_ref()
                    .map(|(view, src, dev)| Tensor::from_uop(view.on(&get(src), var_vals), dev));
                *t.inner.autograd.grad_slot() = grad;
            }
        }
        Ok(self
            .outputs
            .iter()
            .map(|o| match o.handle.as_ref().and_then(|h| h.get(tensors)) {
                Some(t) => t,
                None => Tensor::from_uop(o.view.on(&get(&o.src), var_vals), &o.device),
            })
            .collect())
    }

    /// The graph of every tensor the plan writes (for `JIT_CHECK`).
    pub(super) fn snapshot_state(&self, tensors: &[Tensor]) -> StateSnapshot {
        self.writes
            .iter()
            .map(|(target, _, _)| {
                let t = target.get(tensors);
                let u = t.as_ref().map(|t| {
                    t.inner
                        .uop
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone()
                });
                (t, u)
            })
            .collect()
    }

    pub(super) fn restore_state(&self, snap: &StateSnapshot) {
        for (t, u) in snap {
            if let (Some(t), Some(u)) = (t, u) {
                *t.inner.uop.write().unwrap_or_else(|e| e.into_inner()) = u.clone();
            }
        }
    }
}
