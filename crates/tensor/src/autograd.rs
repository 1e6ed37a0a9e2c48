//! Autograd, the way tinygrad does it: gradients are computed on the UOp graph
//! ([`tinygrad_uop::compute_gradient`]) and come back as lazy tensors, so forward and backward
//! are scheduled and fused together when the gradients are realized.
//!
//! - [`Tensor::requires_grad`] marks a tensor (usually a parameter) as one whose gradient
//!   [`Tensor::backward`] computes; the gradient is accumulated into [`Tensor::grad`].
//! - [`Tensor::gradient`] returns the gradients with respect to explicit targets, without
//!   touching `.grad`.
//! - [`Tensor::detach`] stops gradients; [`Tensor::contiguous_backward`] makes the gradient
//!   flowing through it contiguous (its own kernel).
//! - [`Tensor::train`]/[`Tensor::training`] hold the training flag that layers such as dropout
//!   read; [`Tensor::no_grad`] runs code whose results carry no gradient.
//!
//! The training flag and the no-grad mode are per thread (like PyTorch's grad mode): tests and
//! worker threads do not see each other's settings. tinygrad keeps them in class variables.

use std::cell::Cell;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, Weak};

use tinygrad_uop::{Arg, Ops, UOp, compute_gradient};

use crate::Tensor;
use crate::tensor::Inner;

/// The autograd state of one tensor.
#[derive(Default)]
pub(crate) struct GradState {
    /// `Some(true)`: a leaf whose gradient `backward` computes; `Some(false)`: never; `None`: not
    /// set (derived tensors, plain data).
    requires_grad: Mutex<Option<bool>>,
    /// The accumulated gradient.
    grad: Mutex<Option<Tensor>>,
}

impl GradState {
    /// The gradient slot, locked (the JIT sets a replay's gradients through it).
    pub(crate) fn grad_slot(&self) -> std::sync::MutexGuard<'_, Option<Tensor>> {
        lock(&self.grad)
    }
}

/// Every tensor ever marked `requires_grad(true)` (tinygrad's `all_tensors`, restricted to the
/// ones `backward` can fill). Weak: a dropped tensor leaves the list on the next scan.
static LEAVES: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

thread_local! {
    /// Training mode outside every [`TrainGuard`] (off by default).
    static TRAINING: Cell<bool> = const { Cell::new(false) };
    /// The live [`TrainGuard`]s, oldest first, each with its id and the mode it set: the mode
    /// is the newest one's. A guard removes its own entry when dropped, so guards dropped in
    /// any order leave the mode of those still alive (a saved previous mode restored by each
    /// would be wrong when the outer guard goes first).
    static TRAIN_GUARDS: std::cell::RefCell<Vec<(u64, bool)>> = const { std::cell::RefCell::new(Vec::new()) };
    static NEXT_TRAIN_GUARD: Cell<u64> = const { Cell::new(0) };
    /// Live [`NoGradGuard`]s: gradients are enabled when there are none. A count, not a saved
    /// mode per guard, so that guards dropped in any order leave the right mode.
    static NO_GRAD_DEPTH: Cell<usize> = const { Cell::new(0) };
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The live tensors marked `requires_grad(true)`.
fn live_leaves() -> Vec<Tensor> {
    let mut reg = lock(&LEAVES);
    reg.retain(|w| w.strong_count() > 0);
    reg.iter()
        .filter_map(Weak::upgrade)
        .map(|inner| Tensor { inner })
        .filter(|t| *lock(&t.inner.autograd.requires_grad) == Some(true))
        .collect()
}

/// Whether a gradient can flow from `t` to a live `requires_grad` leaf (tinygrad's propagated
/// `requires_grad` of a derived tensor): gradients are enabled and the leaf is in the graph.
pub(crate) fn needs_grad(t: &Tensor) -> bool {
    if !grad_enabled() {
        return false;
    }
    let leaves: HashSet<UOp> = live_leaves().iter().map(Tensor::uop).collect();
    !leaves.is_empty() && t.uop().toposort().iter().any(|n| leaves.contains(n))
}

/// Applied to the result of every tensor op: inside a no-grad scope the result is detached.
pub(crate) fn track(uop: UOp) -> UOp {
    if grad_enabled() || uop.op() == Ops::Detach {
        uop
    } else {
        detach_uop(&uop)
    }
}

/// Whether no [`NoGradGuard`] lives on this thread.
fn grad_enabled() -> bool {
    NO_GRAD_DEPTH.with(Cell::get) == 0
}

fn detach_uop(u: &UOp) -> UOp {
    UOp::new(Ops::Detach, u.dtype(), vec![u.clone()], Arg::None)
}

fn describe(t: &Tensor) -> String {
    format!("{} of shape {:?} ({})", t.uop().op(), t.shape(), t.dtype())
}

/// Keeps a training mode while it lives (see [`Tensor::train`]); when dropped, the mode is
/// that of the newest guard still alive, else the mode outside every guard — in whatever
/// order guards are dropped.
#[must_use = "the training flag is restored when the guard is dropped"]
pub struct TrainGuard {
    id: u64,
    _not_send: PhantomData<*const ()>,
}

impl Drop for TrainGuard {
    fn drop(&mut self) {
        TRAIN_GUARDS.with(|g| g.borrow_mut().retain(|&(id, _)| id != self.id));
    }
}

/// Keeps gradients off while it lives; they come back when every guard of the thread is
/// dropped, in whatever order (see [`Tensor::no_grad_guard`]).
#[must_use = "gradients are re-enabled when the guard is dropped"]
pub struct NoGradGuard {
    _not_send: PhantomData<*const ()>,
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        NO_GRAD_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

impl Tensor {
    // ---- requires_grad and .grad ----

    /// Marks (or unmarks) this tensor as one whose gradient [`Tensor::backward`] computes, and
    /// returns it: `Tensor::from_slice(&w, &[3, 4]).requires_grad(true)`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]).requires_grad(true);
    /// assert!(t.is_requires_grad());
    /// t.sum(Axis::All).backward();
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![1.0; 4]);
    /// ```
    pub fn requires_grad(self, requires_grad: bool) -> Tensor {
        self.set_requires_grad(requires_grad);
        self
    }

    /// Marks this tensor as requiring a gradient, in place (tinygrad's `requires_grad_()`).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0]);
    /// t.requires_grad_();
    /// (&t * &t).sum(Axis::All).backward();
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![2.0, 4.0]);
    /// ```
    pub fn requires_grad_(&self) -> &Tensor {
        self.set_requires_grad(true);
        self
    }

    /// Sets whether [`Tensor::backward`] computes this tensor's gradient.
    ///
    /// A tensor built from constants only (`zeros`, `full`, `arange`, ...) is first realized
    /// into its own buffer: constants are shared between equal graphs, and a gradient must not
    /// flow into every other use of the same constant (tinygrad makes such a constant unique).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[2], DType::FLOAT32);
    /// t.set_requires_grad(true);
    /// assert!(t.is_requires_grad());
    /// t.set_requires_grad(false);
    /// assert!(!t.is_requires_grad());
    /// assert_eq!(t.to_vec::<f32>(), vec![0.0, 0.0]);
    /// ```
    pub fn set_requires_grad(&self, requires_grad: bool) {
        if requires_grad {
            let u = self.uop();
            if !u.toposort().iter().any(|n| n.op() == Ops::Buffer) {
                let fresh = Tensor::from_uop(
                    UOp::new(Ops::Contiguous, u.dtype(), vec![u], Arg::None),
                    self.device(),
                );
                fresh.realize();
                self.set_uop(fresh.uop());
            }
            let mut reg = lock(&LEAVES);
            if !reg.iter().any(|w| w.as_ptr() == Arc::as_ptr(&self.inner)) {
                reg.push(Arc::downgrade(&self.inner));
            }
        }
        *lock(&self.inner.autograd.requires_grad) = Some(requires_grad);
    }

    /// Whether a gradient flows into this tensor: it was marked with
    /// [`Tensor::requires_grad`], or (if it was never marked) its graph uses a live tensor marked
    /// `true` other than through [`Tensor::detach`].
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_vec(vec![1.0f32, 2.0]).requires_grad(true);
    /// let y = &w * 2;
    /// assert!(w.is_requires_grad() && y.is_requires_grad());
    /// assert!(!y.detach().is_requires_grad());
    /// assert!(!Tensor::from_vec(vec![1.0f32]).is_requires_grad());
    /// ```
    pub fn is_requires_grad(&self) -> bool {
        if let Some(flag) = *lock(&self.inner.autograd.requires_grad) {
            return flag;
        }
        let leaves: HashSet<UOp> = live_leaves().iter().map(Tensor::uop).collect();
        if leaves.is_empty() {
            return false;
        }
        self.uop()
            .toposort_filtered(|n| n.op() != Ops::Detach)
            .iter()
            .any(|n| leaves.contains(n))
    }

    /// The gradient accumulated by [`Tensor::backward`] (lazy: reading it runs the kernels).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]).requires_grad(true);
    /// assert!(t.grad().is_none());
    /// (&t * 3).sum(Axis::All).backward();
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![3.0, 3.0, 3.0]);
    /// ```
    pub fn grad(&self) -> Option<Tensor> {
        lock(&self.inner.autograd.grad).clone()
    }

    /// Replaces the accumulated gradient (`None` clears it, as an optimizer's `zero_grad`).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0]).requires_grad(true);
    /// t.sum(Axis::All).backward();
    /// t.set_grad(None);
    /// assert!(t.grad().is_none());
    /// t.set_grad(Some(Tensor::from_vec(vec![0.5f32, 0.5])));
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![0.5, 0.5]);
    /// ```
    pub fn set_grad(&self, grad: Option<Tensor>) {
        *lock(&self.inner.autograd.grad) = grad;
        crate::jit::note_grad(&self.inner);
    }

    // ---- backward and gradient ----

    /// Backpropagates from this scalar (seeded with 1) and accumulates the gradient into
    /// [`Tensor::grad`] of every live tensor marked [`Tensor::requires_grad`] that this one
    /// depends on. Like tinygrad, a second call adds to the gradients of the first; a marked
    /// tensor that the result depends on only through `detach` or comparisons gets zeros.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]).requires_grad(true);
    /// t.sum(Axis::All).backward();
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![1.0, 1.0, 1.0, 1.0]);
    /// (&t * &t).sum(Axis::All).backward(); // adds 2t
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![3.0, 5.0, 7.0, 9.0]);
    /// ```
    ///
    /// # Panics
    /// If this tensor is not a scalar (use [`Tensor::backward_with`]), is not a float, or
    /// depends on no tensor that requires a gradient (or none receives a gradient).
    pub fn backward(&self) -> &Tensor {
        self.assert_scalar("backward", "backward_with");
        self.backward_impl(None)
    }

    /// [`Tensor::backward`] seeded with `gradient` (of this tensor's shape): computes the
    /// vector-Jacobian product.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]).requires_grad(true);
    /// (&t * &t).backward_with(&Tensor::from_vec(vec![1.0f32, 1.0, 2.0]));
    /// assert_eq!(t.grad().unwrap().to_vec::<f32>(), vec![2.0, 4.0, 12.0]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::backward`], or if `gradient`'s shape differs from this tensor's.
    pub fn backward_with(&self, gradient: &Tensor) -> &Tensor {
        self.backward_impl(Some(gradient))
    }

    fn backward_impl(&self, seed: Option<&Tensor>) -> &Tensor {
        let topo: HashSet<UOp> = self.uop().toposort().into_iter().collect();
        let mut seen = HashSet::new();
        let leaves: Vec<Tensor> = live_leaves()
            .into_iter()
            .filter(|t| topo.contains(&t.uop()) && seen.insert(Arc::as_ptr(&t.inner)))
            .collect();
        assert!(
            !leaves.is_empty(),
            "backward: {} depends on no tensor that requires grad (mark parameters with \
             .requires_grad(true))",
            describe(self)
        );
        let targets: Vec<&Tensor> = leaves.iter().collect();
        let grads = self.gradient_impl(&targets, seed, "backward");
        assert!(
            grads.iter().any(Option::is_some),
            "backward: no gradient flows from {} to the {} tensor(s) that require grad (every \
             path goes through detach, a comparison or an integer op)",
            describe(self),
            leaves.len()
        );
        for (t, g) in leaves.iter().zip(grads) {
            let g = g.unwrap_or_else(|| Tensor::zeros_like(t));
            let mut slot = lock(&t.inner.autograd.grad);
            crate::jit::note_grad(&t.inner);
            match slot.as_ref() {
                None => *slot = Some(g),
                // tinygrad assigns into the existing gradient: handles to it see the sum
                Some(prev) => {
                    let sum = (prev + &g).uop();
                    prev.set_uop(sum);
                }
            }
        }
        self
    }

    /// The gradients of this scalar with respect to `targets` (lazy tensors; zeros for a target
    /// it does not depend on). Unlike [`Tensor::backward`], no `.grad` is touched and the
    /// targets need not be marked `requires_grad`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, DType, Tensor};
    /// let x = Tensor::eye(3, None, DType::FLOAT32);
    /// let y = Tensor::from_slice(&[2.0f32, 0.0, -2.0], &[1, 3]);
    /// let z = y.matmul(&x).sum(Axis::All);
    /// let g = z.gradient(&[&x, &y]);
    /// assert_eq!(g[0].to_vec::<f32>(), vec![2.0, 2.0, 2.0, 0.0, 0.0, 0.0, -2.0, -2.0, -2.0]);
    /// assert_eq!((g[1].shape(), g[1].to_vec::<f32>()), (vec![1, 3], vec![1.0, 1.0, 1.0]));
    /// ```
    ///
    /// # Panics
    /// If this tensor is not a scalar (use [`Tensor::gradient_with`]) or a tensor is not float.
    pub fn gradient(&self, targets: &[&Tensor]) -> Vec<Tensor> {
        self.assert_scalar("gradient", "gradient_with");
        self.gradient_all(targets, None)
    }

    /// [`Tensor::gradient`] seeded with `gradient` (of this tensor's shape), for non-scalar
    /// outputs: the vector-Jacobian product with each target.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]);
    /// let y = &x * &x * 3;
    /// let g = y.gradient_with(&[&x], &Tensor::from_vec(vec![1.0f32, 0.0, 1.0]));
    /// assert_eq!(g[0].to_vec::<f32>(), vec![6.0, 0.0, 18.0]);
    /// ```
    ///
    /// # Panics
    /// If `gradient`'s shape differs from this tensor's, or a tensor is not float.
    pub fn gradient_with(&self, targets: &[&Tensor], gradient: &Tensor) -> Vec<Tensor> {
        self.gradient_all(targets, Some(gradient))
    }

    fn gradient_all(&self, targets: &[&Tensor], seed: Option<&Tensor>) -> Vec<Tensor> {
        self.gradient_impl(targets, seed, "gradient")
            .into_iter()
            .zip(targets)
            .map(|(g, t)| g.unwrap_or_else(|| Tensor::zeros_like(t)))
            .collect()
    }

    fn assert_scalar(&self, op: &str, alternative: &str) {
        assert!(
            self.shape().is_empty(),
            "{op}: {} is not a scalar; pass the gradient of the output with {alternative}(..) \
             or reduce it first (e.g. .sum(None))",
            describe(self)
        );
    }

    /// The gradient of each target (`None`: no gradient flows to it).
    fn gradient_impl(
        &self,
        targets: &[&Tensor],
        seed: Option<&Tensor>,
        op: &str,
    ) -> Vec<Option<Tensor>> {
        let bad = std::iter::once(self)
            .chain(targets.iter().copied())
            .find(|t| !t.dtype().is_float());
        if let Some(t) = bad {
            panic!(
                "{op}: only float tensors have gradients, got {}",
                describe(t)
            );
        }
        let root = self.uop();
        let seed = match seed {
            Some(s) => {
                assert_eq!(
                    s.shape(),
                    self.shape(),
                    "{op}: gradient of shape {:?} for {}",
                    s.shape(),
                    describe(self)
                );
                s.cast(self.dtype()).uop()
            }
            None => UOp::cnst(self.dtype(), 1.0),
        };
        let target_uops: Vec<UOp> = targets.iter().map(|t| t.uop()).collect();
        let grads = compute_gradient(&root, &seed, &target_uops);
        target_uops
            .iter()
            .zip(targets)
            .map(|(u, t)| {
                grads.get(u).map(|g| {
                    debug_assert_eq!(g.shape_vec(), t.shape(), "gradient shape");
                    Tensor::from_uop(g.clone(), t.device())
                })
            })
            .collect()
    }

    // ---- graph markers ----

    /// The same values, cut from the gradient graph: no gradient flows through the result.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0]).requires_grad(true);
    /// assert_eq!(x.detach().to_vec::<f32>(), vec![1.0, 2.0]);
    /// (&x * &x.detach()).sum(Axis::All).backward(); // d/dx of x * c is c
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![1.0, 2.0]);
    /// ```
    pub fn detach(&self) -> Tensor {
        let t = Tensor::from_uop(detach_uop(&self.uop()), self.device());
        *lock(&t.inner.autograd.requires_grad) = Some(false);
        t
    }

    /// The same values; in the backward pass, the gradient flowing through here is made
    /// contiguous (realized in its own kernel).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0]);
    /// let y = x.contiguous_backward();
    /// let g = (&y * 3).sum(Axis::All).gradient(&[&x]);
    /// assert_eq!(g[0].to_vec::<f32>(), vec![3.0, 3.0]);
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0, 2.0]);
    /// ```
    pub fn contiguous_backward(&self) -> Tensor {
        self.with_uop(UOp::new(
            Ops::ContiguousBackward,
            self.dtype(),
            vec![self.uop()],
            Arg::None,
        ))
    }

    // ---- modes ----

    /// Whether training mode is on (read by layers such as dropout). Off by default.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert!(!Tensor::training());
    /// let _guard = Tensor::train(true);
    /// assert!(Tensor::training());
    /// ```
    pub fn training() -> bool {
        TRAIN_GUARDS
            .with(|g| g.borrow().last().map(|&(_, mode)| mode))
            .unwrap_or_else(|| TRAINING.with(Cell::get))
    }

    /// Turns training mode on or off (for this thread); inside a [`Tensor::train`] guard, until
    /// that guard is dropped (as tinygrad's `Tensor.training = ..` inside `with Tensor.train()`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::set_training(true);
    /// assert!(Tensor::training());
    /// Tensor::set_training(false);
    /// assert!(!Tensor::training());
    /// {
    ///     let _guard = Tensor::train(true);
    ///     Tensor::set_training(false);
    ///     assert!(!Tensor::training());
    /// }
    /// assert!(!Tensor::training());
    /// ```
    pub fn set_training(mode: bool) {
        let in_guard =
            TRAIN_GUARDS.with(|g| g.borrow_mut().last_mut().map(|(_, m)| *m = mode).is_some());
        if !in_guard {
            TRAINING.with(|t| t.set(mode));
        }
    }

    /// Sets training mode to `mode` until the returned guard is dropped (tinygrad's
    /// `with Tensor.train():`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// {
    ///     let _guard = Tensor::train(true);
    ///     assert!(Tensor::training());
    /// }
    /// assert!(!Tensor::training());
    /// ```
    pub fn train(mode: bool) -> TrainGuard {
        let id = NEXT_TRAIN_GUARD.with(|n| n.replace(n.get() + 1));
        TRAIN_GUARDS.with(|g| g.borrow_mut().push((id, mode)));
        TrainGuard {
            id,
            _not_send: PhantomData,
        }
    }

    /// Whether tensor ops record gradients (false inside [`Tensor::no_grad`]).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert!(Tensor::is_grad_enabled());
    /// assert!(!Tensor::no_grad(Tensor::is_grad_enabled));
    /// ```
    pub fn is_grad_enabled() -> bool {
        grad_enabled()
    }

    /// Runs `f` with gradients disabled: every tensor an op returns inside is detached, so no
    /// gradient flows through values computed there (an optimizer step, evaluation).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0]).requires_grad(true);
    /// let y = Tensor::no_grad(|| &x * 2);
    /// assert!(!y.is_requires_grad());
    /// assert_eq!(y.to_vec::<f32>(), vec![2.0, 4.0]);
    /// ```
    pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
        let _guard = Tensor::no_grad_guard();
        f()
    }

    /// Disables gradients until the returned guard is dropped (see [`Tensor::no_grad`]).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// {
    ///     let _guard = Tensor::no_grad_guard();
    ///     assert!(!Tensor::is_grad_enabled());
    /// }
    /// assert!(Tensor::is_grad_enabled());
    /// ```
    pub fn no_grad_guard() -> NoGradGuard {
        NO_GRAD_DEPTH.with(|d| d.set(d.get() + 1));
        NoGradGuard {
            _not_send: PhantomData,
        }
    }
}
