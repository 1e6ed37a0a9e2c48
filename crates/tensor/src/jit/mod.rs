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
//! - **fixed**: any other buffer that existed before (nothing can change it: buffers are only
//!   written twice by [`Tensor::assign_in_place`], whose target is a state or an input);
//! - a **random key**: [`Tensor::rand`]'s per-call key, uploaded from the host; a replay derives
//!   the next key as a normal call would, so replays draw new numbers, the same as without the
//!   JIT.
//!
//! A launch of [`Tensor::assign_in_place`] writes into the buffer its target holds at the
//! replay (state or input): the one write into an existing buffer a replay makes.
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
//!   as an input, or declare it constant with [`Jit::constant_uploads`]), reads a tensor's values back to the host inside (`item`, `to_vec`, `tolist`,
//!   or an op that does, as `masked_select`: a replay would keep what it made of them), leaves
//!   an assigned tensor unrealized, or writes into a buffer that existed before;
//! - kernels that differ between consecutive captures;
//! - two tensors that held one buffer at capture and hold different ones now.
//!
//! `JIT_CHECK=1` (or [`Jit::check_replays`]) runs every replay a second time without the JIT,
//! from the same state, and compares every output and state tensor bit for bit.
//!
//! Files: this one (the [`Jit`] API and the call logic), `log.rs` (what the tensor layer tells
//! an open capture), `plan.rs` (the roles of a recorded call's buffers, the signature two calls
//! are compared by, the replay).

mod log;
mod plan;

use std::fmt;
use std::sync::Arc;

use tinygrad_runtime::{Buffer, DeviceError};
use tinygrad_uop::UOp;

use crate::{BoundVar, Tensor};
use tinygrad_schedule::vars::VarVals;

use crate::tensor::view_buffer;
use log::Recorder;
use plan::{InputSig, Plan, Recorded, Signature, analyze, first_difference, input_buffers};

pub(crate) use log::{
    capturing, note_grad, note_graph, note_host_read, note_in_place, note_rand_key, note_read,
    note_write,
};

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
    /// Whether host data the function uploads is the same on every call (see
    /// [`Jit::constant_uploads`]).
    constant_uploads: bool,
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
            constant_uploads: false,
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

    /// Whether calls capture and replay (`true`, the default unless `JIT=0`) or run the
    /// function normally each time (as `JIT=0`; what multi-device tensors need, which a Jit
    /// does not capture).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, Tensor};
    /// let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * 2.0]).enabled(false);
    /// let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).shard(&["CPU", "CPU:1"], Some(0));
    /// assert_eq!(jit.call(&[x]).unwrap()[0].to_vec::<f32>(), vec![2.0, 4.0]);
    /// assert_eq!(jit.replays(), 0);
    /// ```
    pub fn enabled(mut self, on: bool) -> Jit<F> {
        self.disabled = !on;
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

    /// Whether the host data the function uploads (`Tensor::from_slice` and the like inside
    /// it) depends only on the inputs' shapes and dtypes, never on their values: a replay then
    /// reads what the capture uploaded instead of refusing the function. What a graph
    /// interpreter uploads is of this kind (an ONNX model's constant tables, made from its
    /// attributes and the inputs' shapes). The two calls that make a capture must upload the
    /// same bytes (compared by hash): a function whose uploads changed between them is not
    /// captured. Reading tensors back to the host inside the function stays refused (what it
    /// made of the values would be replayed).
    ///
    /// ```
    /// use tinygrad_tensor::{Jit, Tensor};
    /// let mut scale = Jit::new(|x: &[Tensor]| {
    ///     let table: Vec<f32> = (0..x[0].shape()[0]).map(|i| i as f32).collect();
    ///     vec![&x[0] * Tensor::from_slice(&table, &[table.len()])]
    /// })
    /// .constant_uploads(true);
    /// for k in 1..5 {
    ///     let y = scale.call(&[Tensor::full(&[3], k as f32)]);
    ///     assert_eq!(y.unwrap()[0].to_vec::<f32>(), vec![0.0, k as f32, 2.0 * k as f32]);
    /// }
    /// assert_eq!(scale.replays(), 2);
    /// ```
    pub fn constant_uploads(mut self, constant: bool) -> Jit<F> {
        self.constant_uploads = constant;
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
        if let Some((t, _)) = recorded.outputs.iter().find(|(t, _)| t.devices().len() > 1) {
            return Err(JitError::Unreplayable(format!(
                "an output is on several devices {}: a Jit does not capture multi-device \
                 tensors (call the function without a Jit)",
                t.device()
            )));
        }
        let outs: Vec<Tensor> = recorded.outputs.iter().map(|(t, _)| t.clone()).collect();
        let (sig, plan) = analyze(&recorded, self.constant_uploads);
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
        // (stopped first: the caller's tensors are not the function's reads or writes; a
        // replay gives the new value to that call's input, through the function's handle)
        let (rec, log) = recorder.stop();
        // an input the function assigned to: the caller's tensor takes the new value
        for (mine, theirs) in own.iter().zip(inputs) {
            let (a, b) = (mine.uop(), theirs.uop());
            if !Arc::ptr_eq(&mine.inner, &theirs.inner) && a != b {
                theirs.set_uop(a);
            }
        }
        let views = views?;
        Ok(Recorded {
            rec,
            log,
            input_sigs,
            input_bufs,
            outputs: outs.into_iter().zip(views).collect(),
            _own_inputs: own,
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
pub(super) type StateSnapshot = Vec<(Option<Tensor>, Option<UOp>)>;

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
