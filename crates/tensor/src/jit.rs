//! [`Jit`]: capture the kernels a function of tensors runs, then replay them on new inputs
//! without building graphs, scheduling or looking anything up (tinygrad's `TinyJit`), and never
//! replay silently wrong.
//!
//! ## How it works
//! - The first call runs the function normally (a warm-up: kernels compile, lazy state such as
//!   an optimizer's zero moments is realized), recording what ran.
//! - The second call runs it normally again and captures every launch (kernel or copy) with
//!   the buffers bound to it ([`tinygrad_runtime::capture`]). If it launched the same kernels, in
//!   the same order, on buffers of the same roles as the call before, the capture is kept;
//!   otherwise the third call captures again, and if that one differs from the second too the
//!   function cannot be replayed ([`JitError::GraphChanged`]).
//! - Later calls replay the captured launches.
//!
//! Every buffer a captured launch binds has a role, fixed at capture:
//! - an **input**: the buffer of one of the call's input tensors (realized first);
//! - **produced**: written by a captured launch. Each replay writes a *fresh* buffer, so a
//!   replay never overwrites anything: not the outputs an earlier call returned, not a buffer
//!   a user still holds (tinygrad reuses them, the source of its aliasing bugs);
//! - **state**: a buffer the function read through a tensor that existed before the call (a
//!   parameter, an optimizer's moments, a running statistic). A replay reads that tensor's
//!   *current* buffer, so an update made by the previous replay, or by the user between calls
//!   (`assign`, `load_state_dict`), is seen;
//! - **fixed**: any other buffer that existed before (nothing can change it: buffers are never
//!   written twice);
//! - a **random key**: [`Tensor::rand`]'s per-call key, uploaded from the host; a replay derives
//!   the next key as a normal call would, so replays draw new numbers, the same as without the
//!   JIT.
//!
//! A tensor that existed before the call and was given a new value by the function (an
//! `assign` realized in it, an optimizer step) is given the replay's new value; the returned
//! tensors are new handles to the replay's fresh buffers. Gradients the function set and left
//! unrealized are cleared after a replay (their lazy graph would read the capture's buffers);
//! gradients it realized are set to the replay's. Side effects on Rust values in the function
//! (counters, pushing to a `Vec`) do not happen on a replay, as in tinygrad.
//!
//! ## What is refused
//! Each an `Err` ([`JitError`]) that says what differed, never a silent reuse:
//! - inputs of another count, shape, dtype or device than at capture (or a re-capture, with
//!   [`OnMismatch::Recapture`]), or aliased differently (the same buffer passed twice, or an
//!   input that is also a tensor the function reads);
//! - a function that returns no tensor, uploads host data inside (`Tensor::from_slice`: pass it
//!   as an input), leaves an assigned tensor unrealized, or writes into a buffer that existed
//!   before;
//! - kernels that differ between consecutive captures;
//! - two tensors that held one buffer at capture and hold different ones now.
//!
//! `JIT_CHECK=1` (or [`Jit::check_replays`]) runs every replay a second time without the JIT,
//! from the same state, and compares every output and state tensor bit for bit.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Weak};

use tinygrad_dtype::DType;
use tinygrad_runtime::capture::{self, Launch, Recording};
use tinygrad_runtime::{Buffer, DeviceError};
use tinygrad_schedule::is_buffer_view;
use tinygrad_uop::{Ops, UOp};

use crate::tensor::{Inner, next_handle_id};
use crate::{BoundVar, Tensor};
use tinygrad_schedule::vars::VarVals;

/// What a [`Jit`] does when a call's inputs do not match its capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnMismatch {
    /// Return [`JitError::Inputs`] (the default).
    #[default]
    Error,
    /// Forget the capture and start again: this call runs normally, and the next ones capture.
    Recapture,
}

/// Why a [`Jit`] call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JitError {
    /// The inputs differ from the capture's (count, shape, dtype, device).
    Inputs(String),
    /// Inputs alias each other, or a tensor the function reads, differently from the capture.
    Aliasing(String),
    /// The function's kernels changed between two consecutive captures.
    GraphChanged(String),
    /// The function returned no tensor.
    NoOutputs,
    /// The function does something a replay cannot repeat (the message says what).
    Unreplayable(String),
    /// A tensor the capture reads changed in a way a replay cannot follow.
    State(String),
    /// `JIT_CHECK`: a replay and a normal run of the function disagree.
    Check(String),
    /// A device failed.
    Device(DeviceError),
}

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitError::Inputs(m) => write!(f, "Jit: inputs differ from the capture: {m}"),
            JitError::Aliasing(m) => write!(f, "Jit: aliasing differs from the capture: {m}"),
            JitError::GraphChanged(m) => write!(
                f,
                "Jit: the function's kernels differ between two consecutive calls, so it cannot \
                 be captured: {m}"
            ),
            JitError::NoOutputs => write!(f, "Jit: the function returned no tensor"),
            JitError::Unreplayable(m) => write!(f, "Jit: the function cannot be replayed: {m}"),
            JitError::State(m) => write!(f, "Jit: {m}"),
            JitError::Check(m) => {
                write!(f, "Jit: JIT_CHECK: replay differs from a normal run: {m}")
            }
            JitError::Device(e) => write!(f, "Jit: {e}"),
        }
    }
}

impl std::error::Error for JitError {}

impl From<DeviceError> for JitError {
    fn from(e: DeviceError) -> Self {
        JitError::Device(e)
    }
}

// ---- what the tensor layer tells an open capture ----------------------------------------

/// What happened to tensor handles while a call was recorded.
#[derive(Default)]
struct Log {
    /// Handles stamped below this existed before the call.
    handles_from: u64,
    /// The input handles (their buffers are inputs, not state), by handle: the input's index.
    inputs: HashMap<usize, usize>,
    /// (handle, buffer id): a handle that existed before the call was read holding a view of
    /// the buffer.
    reads: HashMap<(usize, u64), Weak<Inner>>,
    /// Handles that existed before the call and were given a new graph.
    writes: HashMap<usize, Weak<Inner>>,
    /// Tensors whose gradient was set.
    grads: HashMap<usize, Weak<Inner>>,
    /// Buffers holding a `rand` call key: buffer id -> (device, words drawn).
    rand_keys: HashMap<u64, (String, u64)>,
}

impl Log {
    /// How a replay finds this handle: an input, or a tensor that existed before the call.
    fn target(&self, inner: &Arc<Inner>) -> Option<Target> {
        match self.inputs.get(&key(inner)) {
            Some(&i) => Some(Target::Input(i)),
            None if inner.created < self.handles_from => {
                Some(Target::Handle(Arc::downgrade(inner)))
            }
            None => None,
        }
    }
}

thread_local! {
    static LOGS: RefCell<Vec<Log>> = const { RefCell::new(Vec::new()) };
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

fn key(inner: &Arc<Inner>) -> usize {
    Arc::as_ptr(inner) as usize
}

/// The buffer a realized view (reshapes of a buffer) reads.
fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    let mut b = u;
    while b.op() == Ops::Reshape {
        b = b.s(0);
    }
    (b.op() == Ops::Buffer).then(|| Buffer::of(b)).flatten()
}

/// `Tensor::uop` read a handle.
pub(crate) fn note_read(inner: &Arc<Inner>, u: &UOp) {
    if !ACTIVE.with(Cell::get) || !is_buffer_view(u) {
        return;
    }
    let Some(buf) = view_buffer(u) else { return };
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            if inner.created < log.handles_from && !log.inputs.contains_key(&key(inner)) {
                log.reads
                    .entry((key(inner), buf.id()))
                    .or_insert_with(|| Arc::downgrade(inner));
            }
        }
    });
}

/// A handle was given a new graph.
pub(crate) fn note_write(inner: &Arc<Inner>) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            if inner.created < log.handles_from {
                log.writes
                    .entry(key(inner))
                    .or_insert_with(|| Arc::downgrade(inner));
            }
        }
    });
}

/// A tensor's gradient was set (or accumulated into).
pub(crate) fn note_grad(inner: &Arc<Inner>) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.grads
                .entry(key(inner))
                .or_insert_with(|| Arc::downgrade(inner));
        }
    });
}

/// `rand` uploaded its call key (drawing `num` words on `device`) into `key`.
pub(crate) fn note_rand_key(key_tensor: &Tensor, device: &str, num: u64) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    let Some(buf) = view_buffer(
        &key_tensor
            .inner
            .uop
            .read()
            .unwrap_or_else(|e| e.into_inner()),
    ) else {
        return;
    };
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.rand_keys.insert(buf.id(), (device.to_string(), num));
        }
    });
}

/// An open recording of one call: closed (and dropped) on every path out, a panic included.
struct Recorder {
    open: bool,
}

impl Recorder {
    fn start(inputs: &[Tensor]) -> Recorder {
        let log = Log {
            handles_from: next_handle_id(),
            inputs: inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| (key(&t.inner), i))
                .collect(),
            ..Default::default()
        };
        LOGS.with(|l| l.borrow_mut().push(log));
        ACTIVE.with(|a| a.set(true));
        capture::start_recording();
        Recorder { open: true }
    }

    fn stop(mut self) -> (Recording, Log) {
        self.open = false;
        self.close()
    }

    fn close(&mut self) -> (Recording, Log) {
        let rec = capture::stop_recording();
        let log = LOGS.with(|l| {
            let mut l = l.borrow_mut();
            let log = l.pop().expect("a log per open recorder");
            ACTIVE.with(|a| a.set(!l.is_empty()));
            log
        });
        (rec, log)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.open {
            let _ = self.close();
        }
    }
}

// ---- roles and plans --------------------------------------------------------------------

/// Where a replay takes a buffer from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Src {
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
enum Role {
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
struct Signature {
    launches: Vec<(&'static str, UOp, Vec<Role>)>,
    outputs: Vec<Role>,
    writes: Vec<(u64, Role)>,
}

/// A realized view to rebuild on another buffer: the reshapes over the buffer, innermost first.
#[derive(Clone, Debug)]
struct ViewTemplate {
    reshapes: Vec<UOp>,
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
struct State {
    captured: Arc<Buffer>,
    handles: Vec<Weak<Inner>>,
}

/// A tensor handle a replay gives a value to, or returns.
#[derive(Clone)]
enum Target {
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
struct Output {
    view: ViewTemplate,
    src: Src,
    device: Arc<str>,
    handle: Option<Target>,
}

/// What an input must look like.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InputSig {
    shape: Vec<usize>,
    dtype: DType,
    device: String,
}

impl fmt::Display for InputSig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} on {}", self.shape, self.dtype, self.device)
    }
}

/// A gradient the function realized: its view, where its buffer comes from, its device.
type RealizedGrad = (ViewTemplate, Src, Arc<str>);

/// A capture, ready to replay.
struct Plan {
    inputs: Vec<InputSig>,
    /// For each input, the first input with the same buffer.
    alias: Vec<usize>,
    launches: Vec<Launch>,
    slots: Vec<Vec<Src>>,
    fresh: Vec<(Arc<str>, DType, usize)>,
    fixed: HashMap<u64, Arc<Buffer>>,
    states: Vec<State>,
    rand_keys: Vec<(String, u64)>,
    outputs: Vec<Output>,
    /// Tensors that existed before the call and got a new value: the view and its source.
    writes: Vec<(Target, ViewTemplate, Src)>,
    /// Gradients the function set: the view of a realized one and its source, or `None` (left
    /// lazy: cleared after a replay).
    grads: Vec<(Weak<Inner>, Option<RealizedGrad>)>,
    /// Tensors (not inputs) that held input `i`'s buffer at capture: they must still hold it.
    input_aliases: Vec<(Weak<Inner>, usize)>,
}

/// One recorded call: what ran, what the tensor layer saw, the inputs' buffers and the
/// realized outputs.
struct Recorded {
    rec: Recording,
    log: Log,
    input_sigs: Vec<InputSig>,
    input_bufs: Vec<Arc<Buffer>>,
    outputs: Vec<(Tensor, UOp)>,
}

/// Shapes, dtypes, devices and buffers of the inputs (realized first).
fn input_buffers(inputs: &[Tensor]) -> Result<(Vec<InputSig>, Vec<Arc<Buffer>>), JitError> {
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

fn alias_pattern(bufs: &[Arc<Buffer>]) -> Vec<usize> {
    (0..bufs.len())
        .map(|i| (0..i).find(|&j| bufs[j].id() == bufs[i].id()).unwrap_or(i))
        .collect()
}

fn describe_buffer(b: &Buffer) -> String {
    format!("{}[{}] on {}", b.dtype, b.size, b.device)
}

/// Works out every buffer's role in a recorded call: the signature it is compared by, and the
/// plan to replay it (or why it cannot be).
fn analyze(r: &Recorded) -> (Signature, Result<Plan, JitError>) {
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
        let b = view_buffer(view).expect("outputs are realized");
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
        write_roles.push((t.inner.created, role));
        let target = r
            .log
            .target(&t.inner)
            .expect("only earlier tensors are logged");
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
        launches,
        outputs: out_roles,
        writes: write_roles,
    };
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
fn first_difference(a: &Signature, b: &Signature) -> String {
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
    format!(
        "other tensors get new values ({:?}, then {:?})",
        a.writes, b.writes
    )
}

// ---- the JIT ----------------------------------------------------------------------------

/// A function of tensors, captured once and replayed (tinygrad's `TinyJit`); see the
/// [module docs](crate::jit) for what it captures and what it refuses.
///
/// ```
/// use tinygrad_tensor::Tensor;
/// use tinygrad_tensor::jit::Jit;
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
/// let mut step = Jit::new(|x: &[Tensor]| vec![(&x[0] * &w + 1.0).relu()]);
/// for k in 0..5 {
///     let x = Tensor::from_slice(&[k as f32, -1.0], &[2]);
///     let y = step.call(&[x]).unwrap();
///     assert_eq!(y[0].to_vec::<f32>(), vec![k as f32 + 1.0, 0.0]);
/// }
/// assert_eq!(step.replays(), 3); // calls 1 and 2 ran normally, 3..5 replayed
/// ```
pub struct Jit<F> {
    f: F,
    /// The variables the capture was made with (name, bounds): a replay takes the same ones.
    vars: Vec<(Arc<str>, i64, i64)>,
    on_mismatch: OnMismatch,
    check: bool,
    /// `JIT=0`: every call runs the function normally.
    disabled: bool,
    /// Calls recorded since the last (re)start, and the last one's signature.
    recorded: usize,
    last: Option<Signature>,
    plan: Option<Plan>,
    replays: usize,
}

/// A function a [`Jit`] runs: of tensors ([`Jit::new`]), or of tensors and bound variables
/// ([`Jit::with_vars`]).
pub trait JitFn {
    /// Runs the function.
    fn run(&mut self, inputs: &[Tensor], vars: &[BoundVar]) -> Vec<Tensor>;
}

/// A function of tensors only (what [`Jit::new`] wraps).
pub struct Plain<G>(G);

impl<G: FnMut(&[Tensor]) -> Vec<Tensor>> JitFn for Plain<G> {
    fn run(&mut self, inputs: &[Tensor], _vars: &[BoundVar]) -> Vec<Tensor> {
        (self.0)(inputs)
    }
}

/// A function of tensors and bound variables (what [`Jit::with_vars`] wraps).
pub struct WithVars<H>(H);

impl<H: FnMut(&[Tensor], &[BoundVar]) -> Vec<Tensor>> JitFn for WithVars<H> {
    fn run(&mut self, inputs: &[Tensor], vars: &[BoundVar]) -> Vec<Tensor> {
        (self.0)(inputs, vars)
    }
}

impl<G: FnMut(&[Tensor]) -> Vec<Tensor>> Jit<Plain<G>> {
    /// Wraps `f`; nothing runs until [`Jit::call`]. `JIT_CHECK=1` in the environment turns on
    /// [`Jit::check_replays`]; `JIT=0` turns the JIT off (every call runs `f` normally, as
    /// tinygrad's `JIT=0`).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut double = Jit::new(|x: &[Tensor]| vec![&x[0] * 2.0]);
    /// let y = double.call(&[Tensor::from_slice(&[1.0f32], &[1])]).unwrap();
    /// assert_eq!(y[0].to_vec::<f32>(), vec![2.0]);
    /// ```
    pub fn new(f: G) -> Jit<Plain<G>> {
        Jit::wrap(Plain(f))
    }
}

impl<H: FnMut(&[Tensor], &[BoundVar]) -> Vec<Tensor>> Jit<WithVars<H>> {
    /// Wraps a function of tensors and bound variables (tinygrad's jitted functions that take
    /// `Variable(..).bind(v)` arguments): its kernels read the variables as arguments, so a
    /// replay with other values ([`Jit::call_vars`]) runs the same captured kernels — a decode
    /// step over a growing KV cache is captured once.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Jit, Tensor, Variable};
    /// let data = Tensor::arange(0, 16, 1).float().contiguous();
    /// let n = Variable::new("n", 1, 16);
    /// let mut prefix_sum = Jit::with_vars(|_x: &[Tensor], v| {
    ///     vec![data.shrink_sym(&[(0.into(), (&v[0]).into())]).sum(Axis::All)]
    /// });
    /// for k in 1..=6 {
    ///     let out = prefix_sum.call_vars(&[], &[n.bind(k)]).unwrap();
    ///     assert_eq!(out[0].item::<f32>(), (k * (k - 1) / 2) as f32);
    /// }
    /// assert_eq!(prefix_sum.replays(), 4);
    /// ```
    pub fn with_vars(f: H) -> Jit<WithVars<H>> {
        Jit::wrap(WithVars(f))
    }
}

impl<F: JitFn> Jit<F> {
    fn wrap(f: F) -> Jit<F> {
        let flag = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Jit {
            f,
            vars: Vec::new(),
            on_mismatch: OnMismatch::Error,
            check: flag("JIT_CHECK").is_some_and(|v| v != "0"),
            disabled: flag("JIT").is_some_and(|v| v == "0"),
            recorded: 0,
            last: None,
            plan: None,
            replays: 0,
        }
    }

    /// What a call whose inputs do not match the capture does (default: an `Err`).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] + 1.0]).on_mismatch(OnMismatch::Recapture);
    /// for n in [2, 2, 2, 3] {
    ///     // the shape changes at the last call: captured again instead of an error
    ///     assert!(jit.call(&[Tensor::zeros(&[n], tinygrad_tensor::DType::FLOAT32)]).is_ok());
    /// }
    /// ```
    pub fn on_mismatch(mut self, on: OnMismatch) -> Jit<F> {
        self.on_mismatch = on;
        self
    }

    /// Whether every replay is checked against a normal run of the function from the same
    /// state, bit for bit (slow: for debugging; `JIT_CHECK=1`).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![x[0].exp()]).check_replays(true);
    /// for _ in 0..4 {
    ///     jit.call(&[Tensor::from_slice(&[0.5f32], &[1])]).unwrap(); // each replay runs twice
    /// }
    /// assert_eq!(jit.replays(), 2);
    /// ```
    pub fn check_replays(mut self, check: bool) -> Jit<F> {
        self.check = check;
        self
    }

    /// How many calls were replays.
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * &x[0]]);
    /// for _ in 0..5 {
    ///     jit.call(&[Tensor::from_slice(&[3i32], &[1])]).unwrap();
    /// }
    /// assert_eq!(jit.replays(), 3);
    /// ```
    pub fn replays(&self) -> usize {
        self.replays
    }

    /// Whether a capture is held (the next matching call replays it).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![x[0].neg()]);
    /// let x = Tensor::from_slice(&[1.0f32], &[1]);
    /// jit.call(std::slice::from_ref(&x)).unwrap();
    /// assert!(!jit.is_captured());
    /// jit.call(std::slice::from_ref(&x)).unwrap();
    /// assert!(jit.is_captured());
    /// ```
    pub fn is_captured(&self) -> bool {
        self.plan.is_some()
    }

    /// How many launches (kernels and copies) the capture replays, if there is one.
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![(&x[0] + 1.0).sum(tinygrad_tensor::Axis::All)]);
    /// let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// assert_eq!(jit.captured_launches(), None);
    /// jit.call(std::slice::from_ref(&x)).unwrap();
    /// jit.call(std::slice::from_ref(&x)).unwrap();
    /// assert_eq!(jit.captured_launches(), Some(1)); // one fused kernel
    /// ```
    pub fn captured_launches(&self) -> Option<usize> {
        self.plan.as_ref().map(|p| p.launches.len())
    }

    /// Forgets the capture: the next call runs normally, as the first did.
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] - 1.0]);
    /// let x = Tensor::from_slice(&[1.0f32], &[1]);
    /// for _ in 0..2 {
    ///     jit.call(std::slice::from_ref(&x)).unwrap();
    /// }
    /// jit.reset();
    /// assert!(!jit.is_captured());
    /// ```
    pub fn reset(&mut self) {
        self.plan = None;
        self.last = None;
        self.recorded = 0;
    }

    /// Runs the function on `inputs` (realized first): normally on the first calls, then as a
    /// replay of its capture. Returns the function's outputs, realized.
    ///
    /// # Errors
    /// See [`JitError`]: inputs that do not match the capture (or a re-capture, per
    /// [`Jit::on_mismatch`]), a function that cannot be captured, a device failure.
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// let w = Tensor::from_slice(&[2.0f32], &[1]);
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * &w]);
    /// for k in 0..4 {
    ///     let y = jit.call(&[Tensor::from_slice(&[k as f32], &[1])]).unwrap();
    ///     assert_eq!(y[0].to_vec::<f32>(), vec![2.0 * k as f32]);
    /// }
    /// ```
    pub fn call(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, JitError> {
        self.call_vars(inputs, &[])
    }

    /// [`Jit::call`] with bound variables for the function (see [`Jit::with_vars`]). A replay
    /// takes the variables of the capture, by name (each within its bounds: [`Variable::bind`](crate::Variable::bind)
    /// checks), with any values.
    ///
    /// # Errors
    /// As [`Jit::call`], and [`JitError::Inputs`] for variables other than the capture's.
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, OnMismatch, Tensor};
    /// use tinygrad_tensor::Variable;
    /// let t = Tensor::arange(0, 8, 1).contiguous();
    /// let n = Variable::new("n", 1, 8);
    /// let mut jit = Jit::with_vars(|_x: &[Tensor], v| vec![t.shrink_sym(&[(0.into(), (&v[0]).into())]) * 1]);
    /// for k in [2, 5, 3, 8] {
    ///     let y = jit.call_vars(&[], &[n.bind(k)]).unwrap();
    ///     assert_eq!(y[0].to_vec::<i32>(), (0..k as i32).collect::<Vec<_>>());
    /// }
    /// ```
    pub fn call_vars(
        &mut self,
        inputs: &[Tensor],
        vars: &[BoundVar],
    ) -> Result<Vec<Tensor>, JitError> {
        if self.disabled {
            let outs = self.f.run(inputs, vars);
            let refs: Vec<&Tensor> = outs.iter().collect();
            Tensor::try_realize_all(&refs)?;
            return Ok(outs);
        }
        let (sigs, bufs) = input_buffers(inputs)?;
        let var_sig: Vec<(Arc<str>, i64, i64)> = vars
            .iter()
            .map(|b| {
                let v = b.variable();
                (Arc::from(v.name()), v.min() as i64, v.max() as i64)
            })
            .collect();
        if let Some(plan) = &self.plan {
            let checked = plan.check_inputs(&sigs, &bufs).and_then(|()| {
                if var_sig == self.vars {
                    Ok(())
                } else {
                    Err(JitError::Inputs(format!(
                        "variables {:?}, the capture took {:?}",
                        var_sig, self.vars
                    )))
                }
            });
            match checked {
                Ok(()) => return self.replay_checked(inputs, &bufs, vars),
                Err(e) if self.on_mismatch == OnMismatch::Error => return Err(e),
                Err(_) => self.reset(),
            }
        }
        let recorded = self.run_recorded(inputs, vars, sigs, bufs)?;
        let outs: Vec<Tensor> = recorded.outputs.iter().map(|(t, _)| t.clone()).collect();
        let (sig, plan) = analyze(&recorded);
        self.recorded += 1;
        let same = self.last.as_ref().is_some_and(|l| *l == sig);
        if same {
            let plan = plan?;
            if tinygrad_runtime::debug_level() >= 1 {
                eprintln!(
                    "JIT captured {} launches with {} inputs, {} fresh buffers, {} state \
                     tensors",
                    plan.launches.len(),
                    plan.inputs.len(),
                    plan.fresh.len(),
                    plan.states.len()
                );
            }
            self.plan = Some(plan);
            self.vars = var_sig;
            self.last = None;
        } else if self.recorded >= 3 {
            let why = first_difference(self.last.as_ref().expect("two calls recorded"), &sig);
            self.reset();
            return Err(JitError::GraphChanged(why));
        } else {
            if let Err(e @ (JitError::NoOutputs | JitError::Unreplayable(_))) = &plan
                && self.recorded >= 2
            {
                return Err(e.clone());
            }
            self.last = Some(sig);
        }
        Ok(outs)
    }

    /// Runs the function normally, recording what it launches and does to tensors, and
    /// realizes its outputs.
    fn run_recorded(
        &mut self,
        inputs: &[Tensor],
        vars: &[BoundVar],
        input_sigs: Vec<InputSig>,
        input_bufs: Vec<Arc<Buffer>>,
    ) -> Result<Recorded, JitError> {
        // The function gets handles of its own to the inputs' values, so that reading a
        // caller's tensor that is also an input (`jit.call(&[w])` in a function that reads `w`)
        // shows up as a read of that tensor: a replay with another input must then refuse.
        // Gradient leaves are passed as they are (their gradient state is theirs).
        let own: Vec<Tensor> = inputs
            .iter()
            .map(|t| {
                if t.is_requires_grad() {
                    t.clone()
                } else {
                    Tensor::from_uop(t.uop(), t.device())
                }
            })
            .collect();
        let recorder = Recorder::start(&own);
        let outs = self.f.run(&own, vars);
        let refs: Vec<&Tensor> = outs.iter().collect();
        let views = Tensor::realize_snapshots(&refs);
        // an input the function assigned to: the caller's tensor takes the new value
        for (mine, theirs) in own.iter().zip(inputs) {
            let (a, b) = (mine.uop(), theirs.uop());
            if !Arc::ptr_eq(&mine.inner, &theirs.inner) && a != b {
                theirs.set_uop(a);
            }
        }
        let views = views?;
        let (rec, log) = recorder.stop();
        Ok(Recorded {
            rec,
            log,
            input_sigs,
            input_bufs,
            outputs: outs.into_iter().zip(views).collect(),
        })
    }

    fn replay_checked(
        &mut self,
        inputs: &[Tensor],
        bufs: &[Arc<Buffer>],
        vars: &[BoundVar],
    ) -> Result<Vec<Tensor>, JitError> {
        self.replays += 1;
        let plan = self.plan.as_ref().expect("replayed with a plan");
        let var_vals: VarVals = vars
            .iter()
            .map(|b| (Arc::from(b.variable().name()), b.value() as i64))
            .collect();
        if !self.check {
            return plan.replay(inputs, bufs, &var_vals);
        }
        // JIT_CHECK: the state before, the replay, then a normal run from the same state
        let before = plan.snapshot_state(inputs);
        let rng = crate::random::snapshot();
        let outs = plan.replay(inputs, bufs, &var_vals)?;
        let after = plan.snapshot_state(inputs);
        let rng_after = crate::random::snapshot();
        plan.restore_state(&before);
        crate::random::restore(rng);
        let normal = self.f.run(inputs, vars);
        let refs: Vec<&Tensor> = normal.iter().collect();
        Tensor::try_realize_all(&refs)?;
        let plan = self.plan.as_ref().expect("replayed with a plan");
        let expect = plan.snapshot_state(inputs);
        compare("output", &outs, &normal)?;
        for (k, ((a, b), _)) in after.iter().zip(&expect).zip(&plan.writes).enumerate() {
            let (a, b) = (a.1.as_ref(), b.1.as_ref());
            match (a, b) {
                (Some(a), Some(b)) => compare_one(&format!("state tensor {k}"), a, b)?,
                (None, None) => {}
                _ => {
                    return Err(JitError::Check(format!(
                        "state tensor {k} is realized in one run only"
                    )));
                }
            }
        }
        // keep the replay's results (equal to the normal run's)
        plan.restore_state(&after);
        crate::random::restore(rng_after);
        Ok(outs)
    }
}

/// The value of each tensor the plan writes, as (handle, graph), to restore for `JIT_CHECK`.
type StateSnapshot = Vec<(Option<Tensor>, Option<UOp>)>;

fn compare(what: &str, a: &[Tensor], b: &[Tensor]) -> Result<(), JitError> {
    if a.len() != b.len() {
        return Err(JitError::Check(format!(
            "{} outputs from the replay, {} from the function",
            a.len(),
            b.len()
        )));
    }
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        compare_one(&format!("{what} {k}"), &x.uop(), &y.uop())?;
    }
    Ok(())
}

fn compare_one(what: &str, a: &UOp, b: &UOp) -> Result<(), JitError> {
    let read = |u: &UOp| -> Result<(Vec<u8>, Vec<usize>), JitError> {
        let shape = u.shape_vec();
        let buf =
            view_buffer(u).ok_or_else(|| JitError::Check(format!("{what} is not realized")))?;
        let mut bytes = buf.try_to_bytes()?;
        // (a symbolic shape views the first elements of a larger buffer)
        bytes.truncate(shape.iter().product::<usize>() * buf.dtype.itemsize());
        Ok((bytes, shape))
    };
    let (x, sx) = read(a)?;
    let (y, sy) = read(b)?;
    if sx != sy {
        return Err(JitError::Check(format!(
            "{what} has shape {sx:?} in the replay, {sy:?} in a normal run"
        )));
    }
    if x != y {
        let first = x.iter().zip(&y).position(|(p, q)| p != q).unwrap_or(0);
        return Err(JitError::Check(format!(
            "{what} differs from byte {first} on ({} of {} bytes differ)",
            x.iter().zip(&y).filter(|(p, q)| p != q).count(),
            x.len()
        )));
    }
    Ok(())
}

impl Plan {
    /// Inputs must match the capture's signature and aliasing.
    fn check_inputs(&self, sigs: &[InputSig], bufs: &[Arc<Buffer>]) -> Result<(), JitError> {
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
    fn state_buffer(&self, k: usize) -> Result<Arc<Buffer>, JitError> {
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
    fn replay(
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
    fn snapshot_state(&self, tensors: &[Tensor]) -> StateSnapshot {
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

    fn restore_state(&self, snap: &StateSnapshot) {
        for (t, u) in snap {
            if let (Some(t), Some(u)) = (t, u) {
                *t.inner.uop.write().unwrap_or_else(|e| e.into_inner()) = u.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_finds_a_differing_byte_and_a_differing_shape() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
        let b = Tensor::from_slice(&[1.0f32, 2.5, 3.0], &[3]);
        a.realize();
        b.realize();
        assert_eq!(compare_one("x", &a.uop(), &a.uop()), Ok(()));
        let e = compare_one("output 0", &a.uop(), &b.uop()).unwrap_err();
        assert!(
            matches!(&e, JitError::Check(m) if m.contains("output 0") && m.contains("1 of 12 bytes")),
            "{e}"
        );
        let c = a.reshape(&[1, 3]);
        let e = compare_one("y", &a.uop(), &c.uop()).unwrap_err();
        assert!(
            matches!(&e, JitError::Check(m) if m.contains("[1, 3]")),
            "{e}"
        );
        let e = compare("output", std::slice::from_ref(&a), &[a.clone(), b.clone()]).unwrap_err();
        assert!(
            matches!(&e, JitError::Check(m) if m.contains("1 outputs")),
            "{e}"
        );
    }
}
