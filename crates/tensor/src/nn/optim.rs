//! Optimizers, as tinygrad's `tinygrad.nn.optim`, with its defaults. Two update rules cover six
//! optimizers:
//! - [`Lars`]: SGD with momentum (optionally Nesterov), weight decay and a layer-wise trust
//!   ratio. [`sgd`] is LARS without the trust ratio; [`muon`] adds Newton-Schulz
//!   orthogonalization of the update ([`Tensor::newton_schulz`]).
//! - [`Lamb`]: Adam's moments with bias correction, decoupled weight decay and a layer-wise trust
//!   ratio. [`adam`] and [`adamw`] are LAMB without the trust ratio.
//!
//! A step ([`Optimizer::step`]) reads each parameter's [`Tensor::grad`], computes the new values
//! lazily (with gradients disabled), [`Tensor::assign`]s them to the parameters and the optimizer
//! state, and realizes parameters, state and the model's buffers (BatchNorm running statistics)
//! together: one schedule, in which the backward pass and the update fuse.
//! [`Optimizer::step_with`] adds more tensors to that schedule (the loss, typically), so the
//! forward pass is not run twice.
//!
//! Building an optimizer realizes the parameters (their lazy initial values). Like tinygrad, a
//! step needs training mode ([`Tensor::train`]). The learning rate lives in a
//! small buffer, so changing it ([`Optimizer::set_lr`]) reuses the compiled kernels. A parameter
//! without a gradient (the loss does not depend on it) is skipped, as PyTorch does.

use std::collections::HashSet;
use std::sync::Arc;

use tinygrad_dtype::DType;
use tinygrad_runtime::DeviceError;

use super::is_buffer;
use crate::Tensor;
use crate::reduce::Axis;

/// An optimizer: holds the parameters it trains and its own state.
pub trait Optimizer {
    /// The trained parameters.
    fn params(&self) -> &[Tensor];

    /// Model buffers (not trained) realized with each step.
    fn buffers(&self) -> &[Tensor];

    /// The learning rate.
    fn lr(&self) -> f64;

    /// Changes the learning rate (no recompilation: it is read from a buffer).
    fn set_lr(&mut self, lr: f64);

    /// Assigns the updated values to the parameters and state (lazily) and returns every
    /// tensor that must be realized to carry out the step (tinygrad's `schedule_step`).
    ///
    /// # Panics
    /// If training mode is off.
    fn schedule_step(&mut self) -> Vec<Tensor>;

    /// Clears the parameters' gradients (do it before each `backward`: gradients accumulate).
    fn zero_grad(&self) {
        for p in self.params() {
            p.set_grad(None);
        }
    }

    /// One optimization step: update and realize (see the [module docs](crate::nn::optim)).
    ///
    /// # Panics
    /// If training mode is off, or a kernel fails (see [`Optimizer::try_step_with`]).
    fn step(&mut self) {
        self.step_with(&[]);
    }

    /// [`Optimizer::step`], realizing `extra` tensors (the loss) in the same schedule.
    ///
    /// # Panics
    /// As [`Optimizer::step`].
    fn step_with(&mut self, extra: &[&Tensor]) {
        self.try_step_with(extra)
            .unwrap_or_else(|e| panic!("optimizer step: {e}"));
    }

    /// [`Optimizer::step_with`], returning device and compile errors.
    fn try_step_with(&mut self, extra: &[&Tensor]) -> Result<(), DeviceError> {
        let todo = self.schedule_step();
        let mut all: Vec<&Tensor> = extra.to_vec();
        all.extend(todo.iter());
        Tensor::try_realize_all(&all)
    }
}

/// What every optimizer holds: parameters, buffers, the learning rate.
struct Base {
    params: Vec<Tensor>,
    buffers: Vec<Tensor>,
    lr: Tensor,
    lr_value: f64,
}

impl Base {
    fn new(op: &str, params: Vec<Tensor>, lr: f64) -> Base {
        check_nonneg(op, "lr", lr);
        let mut seen = HashSet::new();
        let (mut ps, mut bufs) = (Vec::new(), Vec::new());
        for t in params {
            if !seen.insert(Arc::as_ptr(&t.inner)) {
                continue;
            }
            if is_buffer(&t) || !t.dtype().is_float() {
                bufs.push(t);
            } else {
                t.set_requires_grad(true);
                ps.push(t);
            }
        }
        assert!(
            !ps.is_empty(),
            "{op}: the optimizer needs at least one float parameter to train, got none \
             ({} buffer(s))",
            bufs.len()
        );
        let dev = ps[0].device().to_string();
        for t in ps.iter().chain(&bufs) {
            assert_eq!(
                t.device(),
                dev,
                "{op}: all parameters must be on one device, got {} and {dev} (shape {:?})",
                t.device(),
                t.shape()
            );
        }
        // realize lazy initial values now (random initializers would otherwise be recomputed
        // inside every kernel that reads a weight)
        let all: Vec<&Tensor> = ps.iter().chain(&bufs).collect();
        Tensor::try_realize_all(&all).unwrap_or_else(|e| panic!("{op}: realizing parameters: {e}"));
        Base {
            lr: lr_tensor(lr, &dev),
            params: ps,
            buffers: bufs,
            lr_value: lr,
        }
    }

    fn set_lr(&mut self, op: &str, lr: f64) {
        check_nonneg(op, "lr", lr);
        self.lr.replace(&lr_tensor(lr, self.lr.device()));
        self.lr_value = lr;
    }

    /// The parameters with a gradient, and the gradients.
    fn with_grads(&self, op: &str) -> Vec<(usize, Tensor, Tensor)> {
        assert!(
            Tensor::training(),
            "{op}: Tensor::training() is false; the optimizer only steps in training mode \
             (hold `let _train = Tensor::train(true);` around the training step)"
        );
        self.params
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.grad().map(|g| (i, t.clone(), g)))
            .collect()
    }

    /// Assigns the new values and lists everything to realize.
    fn finish(&self, updates: Vec<(Tensor, Tensor)>, state: Vec<Tensor>) -> Vec<Tensor> {
        for (t, u) in &updates {
            t.assign(&u.cast(t.dtype()));
        }
        let mut out = state;
        out.extend(self.params.iter().cloned());
        out.extend(self.buffers.iter().cloned());
        out
    }
}

/// The learning rate as a 0-d float32 buffer (tinygrad: at least float32).
fn lr_tensor(lr: f64, device: &str) -> Tensor {
    Tensor::from_slice_on(&[lr as f32], &[], device)
}

fn check_nonneg(op: &str, what: &str, v: f64) {
    assert!(
        v >= 0.0 && v.is_finite(),
        "{op}: {what} must be a finite number >= 0, got {v}"
    );
}

fn check_unit(op: &str, what: &str, v: f64) {
    assert!(
        (0.0..1.0).contains(&v),
        "{op}: {what} must be in [0, 1), got {v}"
    );
}

/// The optimizer state dtype of a parameter: float32 (tinygrad's default), float64 for float64
/// parameters.
fn state_dtype(t: &Tensor) -> DType {
    if t.dtype() == DType::FLOAT64 {
        DType::FLOAT64
    } else {
        DType::FLOAT32
    }
}

fn zeros_state(t: &Tensor) -> Tensor {
    Tensor::zeros_on(&t.shape(), state_dtype(t), t.device()).contiguous()
}

/// `sqrt(sum(x^2))`, 0-d.
fn norm(x: &Tensor) -> Tensor {
    (x * x).sum(Axis::All).sqrt()
}

/// `where(a > 0, where(b > 0, num / den, 1), 1)`: a trust ratio that is 1 when a norm is 0.
fn trust(a: &Tensor, b: &Tensor, ratio: Tensor) -> Tensor {
    a.gt(0.0).where_(&b.gt(0.0).where_(&ratio, 1.0), 1.0)
}

// ---------------------------------------------------------------------------------------------

/// LARS (You et al., "Large Batch Training of Convolutional Networks", arXiv:1708.03888):
/// momentum SGD with weight decay and a per-parameter trust ratio
/// `r = tcoef * |w| / (|g| + wd * |w|)` (1 when a norm is 0). Per step, with `g` the gradient:
/// `g += wd * w`; classic momentum: `b = momentum * b + lr * r * g`, `w -= b`; otherwise
/// `b = momentum * b + g`, `w -= lr * r * b` (Nesterov: `g + momentum * b` in place of `b`).
/// With Newton-Schulz parameters (Muon), the update is orthogonalized before the learning rate.
///
/// Built by [`lars`], [`sgd`] and [`muon`]; the setters change the defaults.
pub struct Lars {
    base: Base,
    name: &'static str,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
    classic: bool,
    tcoef: f64,
    ns_params: Option<Vec<f64>>,
    ns_steps: usize,
    /// Weight decay added to the gradient (LARS, SGD) or applied to the weights after the
    /// momentum (Muon, decoupled: `w *= 1 - lr * wd`).
    pre_wd: bool,
    /// Momentum buffers, one per parameter (created on the first step).
    b: Vec<Tensor>,
}

/// LARS with tinygrad's defaults: momentum 0.9, weight decay 1e-4, classic momentum, trust
/// coefficient 0.001.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::Tensor;
/// let w = Tensor::from_slice(&[3.0f32, 4.0], &[2]); // |w| = 5
/// let mut opt = optim::lars(vec![w.clone()], 1.0);
/// w.set_grad(Some(Tensor::from_slice(&[0.6f32, 0.8], &[2]))); // |g| = 1
/// let _train = Tensor::train(true);
/// opt.step(); // w -= lr * r * (g + 1e-4 * w), r = 0.001 * 5 / (1 + 1e-4 * 5)
/// assert!(w.to_vec::<f32>().iter().zip([2.997, 3.996]).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
pub fn lars(params: Vec<Tensor>, lr: f64) -> Lars {
    Lars {
        base: Base::new("lars", params, lr),
        name: "lars",
        momentum: 0.9,
        weight_decay: 1e-4,
        nesterov: false,
        classic: true,
        tcoef: 0.001,
        ns_params: None,
        ns_steps: 0,
        pre_wd: true,
        b: Vec::new(),
    }
}

/// Stochastic gradient descent (PyTorch's `SGD` rule): no momentum, no weight decay by default
/// (see [`Lars::momentum`], [`Lars::nesterov`], [`Lars::weight_decay`]). tinygrad's default lr
/// is 0.001.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::Tensor;
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
/// let mut opt = optim::sgd(vec![w.clone()], 0.1);
/// w.set_grad(Some(Tensor::from_slice(&[0.5f32, -1.0], &[2])));
/// let _train = Tensor::train(true);
/// opt.step(); // w - lr * g
/// assert!(w.to_vec::<f32>().iter().zip([0.95, 2.1]).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
pub fn sgd(params: Vec<Tensor>, lr: f64) -> Lars {
    Lars {
        name: "sgd",
        base: Base::new("sgd", params, lr),
        momentum: 0.0,
        weight_decay: 0.0,
        nesterov: false,
        classic: false,
        tcoef: 0.0,
        ns_params: None,
        ns_steps: 0,
        pre_wd: true,
        b: Vec::new(),
    }
}

/// Muon (Keller Jordan, 2024): Nesterov momentum 0.95, then the update of each parameter
/// (reshaped to `(shape[0], -1)`) orthogonalized by 5 Newton-Schulz iterations with the
/// quintic coefficients `(3.4445, -4.7750, 2.0315)` (see [`Lars::ns_steps`],
/// [`Lars::ns_coefficients`]); no weight decay by default (tinygrad's and PyTorch's `Muon`
/// declare 0.1; [`Lars::weight_decay`] sets it, decoupled as PyTorch's). tinygrad's default lr
/// is 0.001.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::{DType, Tensor};
/// let w = Tensor::from_slice(&[0.0f32; 4], &[2, 2]);
/// let mut opt = optim::muon(vec![w.clone()], 0.1);
/// w.set_grad(Some(Tensor::eye(2, None, DType::FLOAT32) * 3.0));
/// let _train = Tensor::train(true);
/// opt.step(); // the update, orthogonalized: 1.1081111 * I (5 quintic steps from I / sqrt(2))
/// let want = [-0.11081111f32, 0.0, 0.0, -0.11081111];
/// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// ```
pub fn muon(params: Vec<Tensor>, lr: f64) -> Lars {
    Lars {
        name: "muon",
        base: Base::new("muon", params, lr),
        momentum: 0.95,
        weight_decay: 0.0,
        nesterov: true,
        classic: false,
        tcoef: 0.0,
        ns_params: Some(vec![3.4445, -4.7750, 2.0315]),
        ns_steps: 5,
        pre_wd: false,
        b: Vec::new(),
    }
}

impl Lars {
    /// Sets the momentum (0 disables it).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32], &[1]);
    /// let mut opt = optim::sgd(vec![w.clone()], 0.1).momentum(0.9);
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1]))); // the same gradient twice:
    /// let _train = Tensor::train(true);
    /// opt.step(); // b = g = 1, w = 1 - 0.1
    /// opt.step(); // b = 0.9 * b + g = 1.9, w = 0.9 - 0.19
    /// assert!((w.item::<f32>() - 0.71).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If it is not in `[0, 1)`.
    pub fn momentum(mut self, momentum: f64) -> Self {
        check_unit(self.name, "momentum", momentum);
        self.momentum = momentum;
        self
    }

    /// Sets the weight decay: L2, added to the gradient (LARS, SGD); for [`muon`], decoupled
    /// as PyTorch's Muon: the weights are scaled by `1 - lr * wd` before the update is
    /// subtracted (tinygrad's Muon computes the decayed weights and drops them, a bug).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let w = Tensor::from_slice(&[2.0f32], &[1]);
    /// let mut opt = optim::sgd(vec![w.clone()], 0.5).weight_decay(0.1);
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // w - lr * (g + wd * w) = 2 - 0.5 * 1.2
    /// assert!((w.item::<f32>() - 1.4).abs() < 1e-6);
    ///
    /// let w = Tensor::eye(2, None, DType::FLOAT32) * 2.0;
    /// let mut opt = optim::muon(vec![w.clone()], 0.1).weight_decay(0.5).ns_steps(0);
    /// w.set_grad(Some(Tensor::eye(2, None, DType::FLOAT32) * 3.0));
    /// opt.step(); // w * (1 - lr * wd) - lr * I / sqrt(2) = 2 * 0.95 - 0.1 * 0.70710678
    /// let want = [1.8292893f32, 0.0, 0.0, 1.8292893];
    /// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    ///
    /// # Panics
    /// If it is negative.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        check_nonneg(self.name, "weight_decay", weight_decay);
        self.weight_decay = weight_decay;
        self
    }

    /// Sets Nesterov momentum.
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32], &[1]);
    /// let mut opt = optim::sgd(vec![w.clone()], 0.1).momentum(0.9).nesterov(true);
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // b = g = 1, w -= lr * (g + 0.9 * b) = 0.1 * 1.9
    /// assert!((w.item::<f32>() - 0.81).abs() < 1e-6);
    /// ```
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }

    /// Classic momentum (the learning rate applied before the momentum) or not (after, as
    /// PyTorch's SGD).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32], &[1]);
    /// let mut opt = optim::sgd(vec![w.clone()], 1.0).momentum(0.5).classic(true);
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // b = lr * g = 1, w = 0
    /// opt.set_lr(0.1);
    /// opt.step(); // b = 0.5 * b + lr * g = 0.6 (not classic: lr * (0.5 + 1) = 0.15)
    /// assert!((w.item::<f32>() + 0.6).abs() < 1e-6);
    /// ```
    pub fn classic(mut self, classic: bool) -> Self {
        self.classic = classic;
        self
    }

    /// Sets the trust coefficient (0 turns LARS into SGD).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[3.0f32, 4.0], &[2]);
    /// let opt = optim::lars(vec![w.clone()], 1.0).momentum(0.0).weight_decay(0.0);
    /// let mut opt = opt.trust_coefficient(0.01);
    /// w.set_grad(Some(Tensor::from_slice(&[0.6f32, 0.8], &[2])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // r = 0.01 * |w| / |g| = 0.05, w -= lr * r * g
    /// assert!(w.to_vec::<f32>().iter().zip([2.97, 3.96]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    pub fn trust_coefficient(mut self, tcoef: f64) -> Self {
        check_nonneg(self.name, "trust coefficient", tcoef);
        self.tcoef = tcoef;
        self
    }

    /// Sets the number of Newton-Schulz iterations (Muon's `ns_steps`, 5 by default; 0 only
    /// normalizes the update by its Frobenius norm). Only used with Newton-Schulz coefficients
    /// ([`muon`], [`Lars::ns_coefficients`]).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let w = Tensor::from_slice(&[0.0f32; 4], &[2, 2]);
    /// let mut opt = optim::muon(vec![w.clone()], 0.1).ns_steps(0);
    /// w.set_grad(Some(Tensor::eye(2, None, DType::FLOAT32) * 3.0));
    /// let _train = Tensor::train(true);
    /// opt.step(); // the update normalized only: I / sqrt(2)
    /// let want = [-0.070710678f32, 0.0, 0.0, -0.070710678];
    /// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    pub fn ns_steps(mut self, steps: usize) -> Self {
        self.ns_steps = steps;
        self
    }

    /// Sets the coefficients of the odd polynomial of the Newton-Schulz iteration (Muon's
    /// `ns_coefficients`, `(3.4445, -4.7750, 2.0315)` by default): each iteration maps `G` to
    /// `sum_i c[i] * (G G^T)^i G` (see [`Tensor::newton_schulz`]). On [`sgd`] or [`lars`] it
    /// turns the orthogonalization on (with [`Lars::ns_steps`] iterations, 0 unless set).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let w = Tensor::from_slice(&[0.0f32; 4], &[2, 2]);
    /// let mut opt = optim::muon(vec![w.clone()], 0.1).ns_steps(1).ns_coefficients(&[1.5, -0.5]);
    /// w.set_grad(Some(Tensor::eye(2, None, DType::FLOAT32) * 3.0));
    /// let _train = Tensor::train(true);
    /// opt.step(); // s = 1 / sqrt(2), one step: 1.5 s - 0.5 s^3 = 0.88388348
    /// let want = [-0.088388348f32, 0.0, 0.0, -0.088388348];
    /// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    ///
    /// # Panics
    /// If `coefficients` is empty.
    pub fn ns_coefficients(mut self, coefficients: &[f64]) -> Self {
        assert!(
            !coefficients.is_empty(),
            "{}: ns_coefficients needs at least one coefficient",
            self.name
        );
        self.ns_params = Some(coefficients.to_vec());
        self
    }

    /// The momentum buffers (empty before the first step).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let mut opt = optim::sgd(vec![w.clone()], 0.1).momentum(0.9);
    /// assert!(opt.momentum_buffers().is_empty());
    /// w.set_grad(Some(Tensor::from_slice(&[0.5f32, -1.0], &[2])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // b = 0.9 * 0 + g
    /// assert_eq!(opt.momentum_buffers()[0].to_vec::<f32>(), vec![0.5, -1.0]);
    /// ```
    pub fn momentum_buffers(&self) -> &[Tensor] {
        &self.b
    }
}

impl Optimizer for Lars {
    fn params(&self) -> &[Tensor] {
        &self.base.params
    }

    fn buffers(&self) -> &[Tensor] {
        &self.base.buffers
    }

    fn lr(&self) -> f64 {
        self.base.lr_value
    }

    fn set_lr(&mut self, lr: f64) {
        self.base.set_lr(self.name, lr);
    }

    /// # Panics
    /// If training mode is off, or `nesterov` is set without momentum.
    fn schedule_step(&mut self) -> Vec<Tensor> {
        assert!(
            !self.nesterov || self.momentum > 0.0,
            "{}: nesterov momentum needs momentum > 0",
            self.name
        );
        let todo = self.base.with_grads(self.name);
        if self.momentum != 0.0 && self.b.len() != self.base.params.len() {
            self.b = self.base.params.iter().map(zeros_state).collect();
        }
        let _no_grad = Tensor::no_grad_guard();
        let lr = &self.base.lr;
        let mut updates = Vec::new();
        for (i, t, g) in todo {
            let w = t.detach();
            let r = (self.tcoef != 0.0).then(|| {
                let (r1, r2) = (norm(&w), norm(&g));
                let ratio = &r1 * self.tcoef / (&r2 + &(&r1 * self.weight_decay));
                trust(&r1, &r2, ratio)
            });
            let scale = |x: Tensor| match &r {
                Some(r) => x * r * lr,
                None => x * lr,
            };
            let mut g = g;
            if self.pre_wd && self.weight_decay > 0.0 {
                // a new tensor (`g += ..` would assign into the caller's gradient)
                g = g.add(&w * self.weight_decay);
            }
            if self.classic {
                g = scale(g);
            }
            if self.momentum != 0.0 {
                let b = &self.b[i];
                b.assign(&(b * self.momentum + &g).cast(b.dtype()));
                g = if self.nesterov {
                    g + b * self.momentum
                } else {
                    b.clone()
                };
            }
            if let Some(ns) = &self.ns_params {
                let shape = g.shape();
                assert!(
                    !shape.is_empty(),
                    "{}: Newton-Schulz needs parameters with at least 1 dim, got a scalar",
                    self.name
                );
                let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
                g = g
                    .reshape(&[s[0], -1])
                    .newton_schulz(self.ns_steps, ns, 1e-7)
                    .reshape(&s);
            }
            // Muon's weight decay, after the momentum: w * (1 - wd * lr)
            let w = if !self.pre_wd && self.weight_decay > 0.0 {
                &w * &(lr * self.weight_decay).rsub(1.0)
            } else {
                w
            };
            if !self.classic {
                g = scale(g);
            }
            updates.push((t, w - g));
        }
        self.base.finish(updates, self.b.clone())
    }
}

// ---------------------------------------------------------------------------------------------

/// LAMB (You et al., "Large Batch Optimization for Deep Learning", arXiv:1904.00962): Adam's
/// first and second moments with bias correction, `up = m_hat / (sqrt(v_hat) + eps) + wd * w`,
/// then `w -= lr * r * up` with the trust ratio `r = |w| / |up|` (1 when a norm is 0). Without
/// the trust ratio it is Adam (`wd = 0`) or AdamW (decoupled weight decay).
///
/// Built by [`lamb`], [`adam`] and [`adamw`]; the setters change the defaults.
pub struct Lamb {
    base: Base,
    name: &'static str,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
    adam: bool,
    /// `b1^t` and `b2^t`, 0-d float32.
    b1_t: Tensor,
    b2_t: Tensor,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

fn lamb_with(
    name: &'static str,
    params: Vec<Tensor>,
    lr: f64,
    eps: f64,
    wd: f64,
    adam: bool,
) -> Lamb {
    let base = Base::new(name, params, lr);
    let dev = base.params[0].device().to_string();
    let one = || Tensor::full_on(&[], 1i64, DType::FLOAT32, &dev).contiguous();
    let m = base.params.iter().map(zeros_state).collect();
    let v = base.params.iter().map(zeros_state).collect();
    Lamb {
        b1_t: one(),
        b2_t: one(),
        base,
        name,
        b1: 0.9,
        b2: 0.999,
        eps,
        weight_decay: wd,
        adam,
        m,
        v,
    }
}

/// LAMB with tinygrad's defaults: betas (0.9, 0.999), eps 1e-6, no weight decay.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::Tensor;
/// let w = Tensor::from_slice(&[3.0f32, 4.0], &[2]); // |w| = 5
/// let mut opt = optim::lamb(vec![w.clone()], 0.1);
/// w.set_grad(Some(Tensor::from_slice(&[1.0f32, -2.0], &[2])));
/// let _train = Tensor::train(true);
/// opt.step(); // first step: up = sign(g), r = |w| / |up| = 5 / sqrt(2), w -= lr * r * up
/// let want = [2.6464467f32, 4.3535533];
/// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// ```
pub fn lamb(params: Vec<Tensor>, lr: f64) -> Lamb {
    lamb_with("lamb", params, lr, 1e-6, 0.0, false)
}

/// Adam (Kingma & Ba, arXiv:1412.6980) with tinygrad's defaults: betas (0.9, 0.999), eps 1e-8.
/// tinygrad's default lr is 0.001.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::Tensor;
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
/// let mut opt = optim::adam(vec![w.clone()], 0.01);
/// w.set_grad(Some(Tensor::from_slice(&[0.5f32, -3.0], &[2])));
/// let _train = Tensor::train(true);
/// opt.step(); // bias-corrected first step: m_hat / sqrt(v_hat) = sign(g)
/// assert!(w.to_vec::<f32>().iter().zip([0.99, 2.01]).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
pub fn adam(params: Vec<Tensor>, lr: f64) -> Lamb {
    lamb_with("adam", params, lr, 1e-8, 0.0, true)
}

/// AdamW (Loshchilov & Hutter, arXiv:1711.05101): Adam with decoupled weight decay, tinygrad's
/// defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
///
/// ```
/// use tinygrad_tensor::nn::optim::{self, Optimizer};
/// use tinygrad_tensor::Tensor;
/// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
/// let mut opt = optim::adamw(vec![w.clone()], 0.1);
/// w.set_grad(Some(Tensor::from_slice(&[0.5f32, -3.0], &[2])));
/// let _train = Tensor::train(true);
/// opt.step(); // w -= lr * (sign(g) + 0.01 * w)
/// assert!(w.to_vec::<f32>().iter().zip([0.899, 2.098]).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
pub fn adamw(params: Vec<Tensor>, lr: f64) -> Lamb {
    lamb_with("adamw", params, lr, 1e-8, 0.01, true)
}

impl Lamb {
    /// Sets the moment decay rates.
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[0.0f32], &[1]);
    /// let mut opt = optim::adam(vec![w.clone()], 0.1).betas(0.5, 0.5);
    /// let _train = Tensor::train(true);
    /// for g in [1.0f32, 3.0] {
    ///     w.set_grad(Some(Tensor::from_slice(&[g], &[1])));
    ///     opt.step(); // m = [0.5, 1.75], v = [0.5, 4.75], bias corrections 1 - 0.5^t
    /// }
    /// assert!((w.item::<f32>() + 0.19271726).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If either is not in `[0, 1)`.
    pub fn betas(mut self, b1: f64, b2: f64) -> Self {
        check_unit(self.name, "b1", b1);
        check_unit(self.name, "b2", b2);
        self.b1 = b1;
        self.b2 = b2;
        self
    }

    /// Sets eps (added to `sqrt(v_hat)`).
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32], &[1]);
    /// let mut opt = optim::adam(vec![w.clone()], 0.1).eps(1.0);
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // m_hat / (sqrt(v_hat) + eps) = 1 / (1 + 1)
    /// assert!((w.item::<f32>() - 0.95).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If it is negative.
    pub fn eps(mut self, eps: f64) -> Self {
        check_nonneg(self.name, "eps", eps);
        self.eps = eps;
        self
    }

    /// Sets the (decoupled) weight decay.
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[2.0f32], &[1]);
    /// let mut opt = optim::adam(vec![w.clone()], 0.1).weight_decay(0.1); // AdamW
    /// w.set_grad(Some(Tensor::from_slice(&[1.0f32], &[1])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // w -= lr * (sign(g) + wd * w) = 0.1 * 1.2
    /// assert!((w.item::<f32>() - 1.88).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If it is negative.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        check_nonneg(self.name, "weight_decay", weight_decay);
        self.weight_decay = weight_decay;
        self
    }

    /// The first and second moment estimates, one each per parameter.
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let mut opt = optim::adam(vec![w.clone()], 0.01);
    /// assert_eq!(opt.moments().0[0].to_vec::<f32>(), vec![0.0, 0.0]);
    /// w.set_grad(Some(Tensor::from_slice(&[2.0f32, -4.0], &[2])));
    /// let _train = Tensor::train(true);
    /// opt.step(); // m = 0.1 * g, v = 0.001 * g^2
    /// let (m, v) = (opt.moments().0[0].to_vec::<f32>(), opt.moments().1[0].to_vec::<f32>());
    /// let close = |a: &[f32], b: [f32; 2]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
    /// assert!(close(&m, [0.2, -0.4]) && close(&v, [0.004, 0.016]));
    /// ```
    pub fn moments(&self) -> (&[Tensor], &[Tensor]) {
        (&self.m, &self.v)
    }

    /// `b1^t` and `b2^t` (tinygrad's `b1_t`, `b2_t`), 0-d float32: the bias corrections are
    /// `1 - b^t`. Like the moments, they may be moved to another device ([`Tensor::to_`]):
    /// a step then computes the moments there and brings the update back to the parameter.
    ///
    /// ```
    /// use tinygrad_tensor::nn::optim::{self, Optimizer};
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let mut opt = optim::adam(vec![w.clone()], 0.01).betas(0.5, 0.75);
    /// w.set_grad(Some(Tensor::from_slice(&[0.5f32, -3.0], &[2])));
    /// let _train = Tensor::train(true);
    /// opt.step();
    /// opt.step();
    /// let (b1_t, b2_t) = opt.beta_powers();
    /// assert_eq!((b1_t.item::<f32>(), b2_t.item::<f32>()), (0.25, 0.5625));
    /// ```
    pub fn beta_powers(&self) -> (&Tensor, &Tensor) {
        (&self.b1_t, &self.b2_t)
    }
}

impl Optimizer for Lamb {
    fn params(&self) -> &[Tensor] {
        &self.base.params
    }

    fn buffers(&self) -> &[Tensor] {
        &self.base.buffers
    }

    fn lr(&self) -> f64 {
        self.base.lr_value
    }

    fn set_lr(&mut self, lr: f64) {
        self.base.set_lr(self.name, lr);
    }

    fn schedule_step(&mut self) -> Vec<Tensor> {
        let todo = self.base.with_grads(self.name);
        let _no_grad = Tensor::no_grad_guard();
        self.b1_t.assign(&(&self.b1_t * self.b1));
        self.b2_t.assign(&(&self.b2_t * self.b2));
        let c1 = self.b1_t.rsub(1.0);
        let c2 = self.b2_t.rsub(1.0);
        let lr = &self.base.lr;
        let mut updates = Vec::new();
        for (i, t, g) in todo {
            let w = t.detach();
            let (m, v) = (&self.m[i], &self.v[i]);
            // state moved to another device (offloaded): the moments are computed there
            let g = if g.device() != m.device() {
                g.contiguous().to(m.device())
            } else {
                g
            };
            m.assign(&(m * self.b1 + &g * (1.0 - self.b1)).cast(m.dtype()));
            v.assign(&(v * self.b2 + &(&g * &g) * (1.0 - self.b2)).cast(v.dtype()));
            let m_hat = m / &c1;
            let v_hat = v / &c2;
            let mut up = m_hat / (v_hat.sqrt() + self.eps);
            if up.device() != t.device() {
                up = up.shard_like(&t);
            }
            if self.weight_decay != 0.0 {
                up = up.add(&w * self.weight_decay);
            }
            let step = if self.adam {
                up * lr
            } else {
                let (r1, r2) = (norm(&w), norm(&up));
                let r = trust(&r1, &r2, &r1 / &r2);
                up * r * lr
            };
            updates.push((t, w - step));
        }
        let mut state = vec![self.b1_t.clone(), self.b2_t.clone()];
        state.extend(self.m.iter().cloned());
        state.extend(self.v.iter().cloned());
        self.base.finish(updates, state)
    }
}

// ---------------------------------------------------------------------------------------------

impl Tensor {
    /// Newton-Schulz iteration for an odd polynomial (tinygrad's `newton_schulz`, the heart of
    /// Muon): normalizes the last two dims by their Frobenius norm (+ `eps`), then `steps` times
    /// `G <- sum_i params[i] * (G G^T)^i G`. With Muon's coefficients it pushes the singular
    /// values toward 1 (an approximate orthogonalization). Matrices taller than wide are
    /// transposed first.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[3.0f32, 0.0, 0.0, 4.0], &[2, 2]); // normalized: diag(0.6, 0.8)
    /// let y = x.newton_schulz(1, &[1.5, -0.5], 0.0).to_vec::<f32>(); // 1.5 s - 0.5 s^3
    /// let want = [0.792f32, 0.0, 0.0, 0.944];
    /// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    ///
    /// # Panics
    /// If the tensor has fewer than 2 dims, or `params` is empty.
    pub fn newton_schulz(&self, steps: usize, params: &[f64], eps: f64) -> Tensor {
        let s = self.shape();
        assert!(
            s.len() > 1,
            "newton_schulz: needs at least 2 dims, got shape {s:?}"
        );
        assert!(
            !params.is_empty(),
            "newton_schulz: needs at least one polynomial coefficient"
        );
        if s[s.len() - 2] > s[s.len() - 1] {
            return self
                .transpose(-2, -1)
                .newton_schulz(steps, params, eps)
                .transpose(-2, -1);
        }
        let mut g = self / ((self * self).sum_keepdim([-2isize, -1]).sqrt() + eps);
        for _ in 0..steps {
            let a = g.matmul(&g.transpose(-2, -1));
            let mut term = g.clone();
            let mut acc = &term * params[0];
            for &p in &params[1..] {
                term = a.matmul(&term);
                acc = acc.add(&term * p);
            }
            g = acc;
        }
        g
    }
}
