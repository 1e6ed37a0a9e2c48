//! Reductions (sum, max, mean, argmax, softmax, ...) and matrix products.

use tinygrad_dtype::{DType, least_upper_float, sum_acc_dtype};
use tinygrad_uop::{Arg, Ops, UOp, custom_gradient};

use crate::Tensor;
use crate::movement::resolve_axis;

/// Which axes a reduction runs over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Every axis.
    All,
    /// These axes (negative values count from the end).
    Some(Vec<isize>),
}

impl From<isize> for Axis {
    fn from(a: isize) -> Self {
        Axis::Some(vec![a])
    }
}

impl From<i32> for Axis {
    fn from(a: i32) -> Self {
        Axis::Some(vec![a as isize])
    }
}

impl From<usize> for Axis {
    fn from(a: usize) -> Self {
        Axis::Some(vec![a as isize])
    }
}

impl From<&[isize]> for Axis {
    fn from(a: &[isize]) -> Self {
        Axis::Some(a.to_vec())
    }
}

impl<const N: usize> From<[isize; N]> for Axis {
    fn from(a: [isize; N]) -> Self {
        Axis::Some(a.to_vec())
    }
}

impl From<Vec<isize>> for Axis {
    fn from(a: Vec<isize>) -> Self {
        Axis::Some(a)
    }
}

impl From<Option<isize>> for Axis {
    fn from(a: Option<isize>) -> Self {
        a.map_or(Axis::All, |a| Axis::Some(vec![a]))
    }
}

impl Tensor {
    pub(crate) fn resolve_axes(&self, axis: Axis, op: &str) -> Vec<usize> {
        let shape = self.shape();
        let mut ax: Vec<usize> = match axis {
            Axis::All => (0..shape.len()).collect(),
            Axis::Some(v) => v
                .iter()
                .map(|&a| resolve_axis(a, shape.len(), op, &shape))
                .collect(),
        };
        ax.sort_unstable();
        ax.dedup();
        // a 0-d tensor's one axis (0 or -1) reduces nothing (tinygrad's `_reduce`: `axis = ()`)
        if shape.is_empty() {
            ax.clear();
        }
        ax
    }

    /// The primitive reduction: `op` over `axes`, keeping them as size 1.
    fn reduce_op(&self, op: Ops, axes: &[usize], keepdim: bool) -> Tensor {
        let shape = self.shape();
        let axes: Vec<usize> = axes.to_vec();
        let r = if axes.is_empty() {
            // a new tensor, as torch's: assigning to the result must not write into `self`
            self.fresh()
        } else {
            self.with_uop(UOp::new(
                Ops::ReduceAxis,
                self.dtype(),
                vec![self.uop()],
                Arg::Reduce(op, axes.clone().into()),
            ))
        };
        if keepdim {
            return r;
        }
        let out: Vec<usize> = shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        r.reshape_exact(&out).fresh()
    }

    fn sum_impl(&self, axis: Axis, keepdim: bool, op: Ops, name: &str) -> Tensor {
        let axes = self.resolve_axes(axis, name);
        let acc = sum_acc_dtype(self.dtype());
        let x = self.cast(acc);
        let r = if op == Ops::Mul {
            x.prod_reduce(&axes, keepdim)
        } else {
            x.reduce_op(op, &axes, keepdim)
        };
        // half-precision floats accumulate in float32 and come back (tinygrad does the same)
        if matches!(self.dtype(), DType::FLOAT16 | DType::BFLOAT16) || self.dtype().is_fp8() {
            r.cast(self.dtype())
        } else {
            r
        }
    }

    /// A product reduction whose gradient is torch's, not `out / x`: that is NaN where `x` is 0.
    /// Per reduced slice: without a zero, `out / x`; with one zero, the product of the others
    /// at the zero and 0 elsewhere; with two or more zeros, 0 everywhere.
    fn prod_reduce(&self, axes: &[usize], keepdim: bool) -> Tensor {
        if axes.is_empty() || !self.dtype().is_float() || !Tensor::is_grad_enabled() {
            return self.reduce_op(Ops::Mul, axes, keepdim);
        }
        let x = self.detach();
        let value = x.reduce_op(Ops::Mul, axes, keepdim);
        let zero = x.eq(0);
        let dt = x.dtype();
        let others = zero
            .where_(&x.const_like(1i64, dt), &x)
            .reduce_op(Ops::Mul, axes, true);
        let zeros = zero.cast(DType::INT32).reduce_op(Ops::Add, axes, true);
        let no_zero = &x.reduce_op(Ops::Mul, axes, true) / &x;
        let one_zero = zeros
            .eq(1)
            .logical_and(&zero)
            .where_(&others, &x.const_like(0i64, dt));
        let factor = zeros.eq(0).where_(&no_zero, &one_zero).uop();
        let in_shape = self.shape();
        let keep: Vec<usize> = in_shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect();
        let dev = self.device().to_string();
        let node = custom_gradient(&value.uop(), &[self.uop()], "prod", move |g, _| {
            let g = Tensor::from_uop(g.clone(), &dev)
                .reshape_exact(&keep)
                .expand_exact(&in_shape);
            let gx = g * Tensor::from_uop(factor.clone(), &dev);
            vec![None, Some(gx.uop())]
        });
        value.with_uop(node)
    }

    /// Sum over `axis` (ints and bools accumulate in at least 32 bits).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]);
    /// assert_eq!(t.sum(Axis::All).item::<i32>(), 15);
    /// assert_eq!(t.sum(0).to_vec::<i32>(), vec![3, 5, 7]);
    /// assert_eq!(t.sum(1).to_vec::<i32>(), vec![3, 12]);
    /// ```
    pub fn sum(&self, axis: impl Into<Axis>) -> Tensor {
        self.sum_impl(axis.into(), false, Ops::Add, "sum")
    }

    /// [`Tensor::sum`] keeping the reduced axes as size 1.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]);
    /// let r = t.sum_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![2, 1], vec![3, 12]));
    /// assert_eq!(t.sum_keepdim(Axis::All).shape(), vec![1, 1]);
    /// ```
    pub fn sum_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.sum_impl(axis.into(), true, Ops::Add, "sum")
    }

    /// [`Tensor::sum`] with tinygrad's and torch's `keepdim` and `dtype` arguments: `dtype`
    /// is the accumulation and output dtype (the input is cast to it first, so an int8 sum in
    /// int8 wraps); `None` is [`Tensor::sum`]'s choice (ints widen, half floats accumulate in
    /// float32 and come back).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, DType, Tensor};
    /// let t = Tensor::from_slice(&[100i8, 100, 100], &[3]);
    /// let s = t.sum_with(Axis::All, false, Some(DType::INT8));
    /// assert_eq!((s.dtype(), s.item::<i8>()), (DType::INT8, 44));
    /// assert_eq!(t.sum_with(0isize, true, None).to_vec::<i32>(), vec![300]);
    /// ```
    pub fn sum_with(&self, axis: impl Into<Axis>, keepdim: bool, dtype: Option<DType>) -> Tensor {
        match dtype {
            None => self.sum_impl(axis.into(), keepdim, Ops::Add, "sum"),
            Some(dt) => {
                let axes = self.resolve_axes(axis.into(), "sum");
                self.cast(dt).reduce_op(Ops::Add, &axes, keepdim)
            }
        }
    }

    /// [`Tensor::prod`] with `keepdim` and `dtype` (the accumulation and output dtype, as
    /// tinygrad's and torch's `prod(dtype=)`; `None` is [`Tensor::prod`]'s choice).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[200u8, 100, 3, 4], &[2, 2]);
    /// let p = t.prod_with(0isize, false, Some(DType::INT32));
    /// assert_eq!((p.dtype(), p.to_vec::<i32>()), (DType::INT32, vec![600, 400]));
    /// ```
    pub fn prod_with(&self, axis: impl Into<Axis>, keepdim: bool, dtype: Option<DType>) -> Tensor {
        match dtype {
            None => self.sum_impl(axis.into(), keepdim, Ops::Mul, "prod"),
            Some(dt) => {
                let axes = self.resolve_axes(axis.into(), "prod");
                self.cast(dt).prod_reduce(&axes, keepdim)
            }
        }
    }

    /// [`Tensor::mean`] with `keepdim` and torch's `dtype`: the input is cast to `dtype` (a
    /// float dtype) first and the mean comes back in it; `None` is [`Tensor::mean`]'s choice.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 2, 4, 6], &[2, 2]);
    /// let m = t.mean_with(1isize, false, Some(DType::FLOAT64));
    /// assert_eq!((m.dtype(), m.to_vec::<f64>()), (DType::FLOAT64, vec![1.5, 5.0]));
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not a float dtype (torch: "dtype must be either a floating point or
    /// complex dtype").
    pub fn mean_with(&self, axis: impl Into<Axis>, keepdim: bool, dtype: Option<DType>) -> Tensor {
        match dtype {
            None => self.mean_impl(axis.into(), keepdim),
            Some(dt) => {
                assert!(
                    dt.is_float(),
                    "mean: dtype must be a float dtype, got {dt} (input shape {:?}, {})",
                    self.shape(),
                    self.dtype()
                );
                self.cast(dt).mean_impl(axis.into(), keepdim)
            }
        }
    }

    /// Product over `axis`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, -2, -3, 1, 2, 3], &[2, 3]);
    /// assert_eq!(t.prod(Axis::All).item::<i32>(), -36);
    /// assert_eq!(t.prod(0).to_vec::<i32>(), vec![-1, -4, -9]);
    /// assert_eq!(t.prod(1).to_vec::<i32>(), vec![-6, 6]);
    /// ```
    pub fn prod(&self, axis: impl Into<Axis>) -> Tensor {
        self.sum_impl(axis.into(), false, Ops::Mul, "prod")
    }

    /// [`Tensor::prod`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[-1i32, -2, -3, 1, 2, 3], &[2, 3]);
    /// let r = t.prod_keepdim(0);
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![1, 3], vec![-1, -4, -9]));
    /// ```
    pub fn prod_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.sum_impl(axis.into(), true, Ops::Mul, "prod")
    }

    fn max_impl(&self, axis: Axis, keepdim: bool) -> Tensor {
        let axes = self.resolve_axes(axis, "max");
        self.reduce_op(Ops::Max, &axes, keepdim)
    }

    /// Maximum over `axis`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// assert_eq!(t.max(Axis::All).item::<i32>(), 5);
    /// assert_eq!(t.max(0).to_vec::<i32>(), vec![5, 4, 3]);
    /// assert_eq!(t.max(1).to_vec::<i32>(), vec![2, 5]);
    /// ```
    pub fn max(&self, axis: impl Into<Axis>) -> Tensor {
        self.max_impl(axis.into(), false)
    }

    /// [`Tensor::max`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// let r = t.max_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![2, 1], vec![2, 5]));
    /// ```
    pub fn max_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.max_impl(axis.into(), true)
    }

    /// The order-reversing map used to turn `min` into `max` (tinygrad's `_inverse`): `-x` for
    /// floats, `~x` for integers (`-x` would overflow at the minimum), `!x` for bools.
    fn inverse(&self) -> Tensor {
        if self.dtype().is_float() {
            self.neg()
        } else {
            self.bitwise_not()
        }
    }

    fn min_impl(&self, axis: Axis, keepdim: bool) -> Tensor {
        self.inverse().max_impl(axis, keepdim).inverse()
    }

    /// Minimum over `axis`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// assert_eq!(t.min(Axis::All).item::<i32>(), 0);
    /// assert_eq!(t.min(0).to_vec::<i32>(), vec![1, 0, 2]);
    /// assert_eq!(t.min(1).to_vec::<i32>(), vec![0, 3]);
    /// ```
    pub fn min(&self, axis: impl Into<Axis>) -> Tensor {
        self.min_impl(axis.into(), false)
    }

    /// [`Tensor::min`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// let r = t.min_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![2, 1], vec![0, 3]));
    /// ```
    pub fn min_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.min_impl(axis.into(), true)
    }

    fn mean_impl(&self, axis: Axis, keepdim: bool) -> Tensor {
        let axes = self.resolve_axes(axis, "mean");
        let shape = self.shape();
        let n: usize = axes.iter().map(|&a| shape[a]).product();
        let dt = least_upper_float(self.dtype());
        // summed and divided in the accumulation dtype, then cast (tinygrad): a float16 count
        // of more than 65504 elements would be inf
        let acc = sum_acc_dtype(dt);
        let s = self.cast(dt).cast(acc).reduce_op(Ops::Add, &axes, keepdim);
        let m = if n == 0 {
            s * f64::NAN
        } else if let Some(count) = self.sym_count(&axes, keepdim, acc) {
            s.div(&count)
        } else {
            s.div(n as f64)
        };
        m.cast(dt)
    }

    /// Where an axis of `axes` has a symbolic size, the number of elements a reduction over
    /// `axes` takes, as a tensor of `dtype` shaped like its result: a sum of ones over the same
    /// axes, so that one kernel serves every value of the variables (a constant count would be
    /// the bound value's, and a `Jit` could not replay it with another value).
    fn sym_count(&self, axes: &[usize], keepdim: bool, dtype: DType) -> Option<Tensor> {
        let sym = self.sym_shape();
        axes.iter()
            .any(|&a| sym[a].is_symbolic())
            .then(|| self.const_like(1, dtype).reduce_op(Ops::Add, axes, keepdim))
    }

    /// Mean over `axis` (in a float dtype; NaN for empty reductions).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]);
    /// assert_eq!(t.mean(Axis::All).item::<f32>(), 4.0);
    /// assert_eq!(t.mean(0).to_vec::<f32>(), vec![2.5, 4.0, 5.5]);
    /// assert_eq!(t.mean(1).to_vec::<f32>(), vec![2.0, 6.0]);
    /// ```
    pub fn mean(&self, axis: impl Into<Axis>) -> Tensor {
        self.mean_impl(axis.into(), false)
    }

    /// [`Tensor::mean`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4, 6, 8], &[2, 3]);
    /// let r = t.mean_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<f32>()), (vec![2, 1], vec![2.0, 6.0]));
    /// ```
    pub fn mean_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.mean_impl(axis.into(), true)
    }

    fn var_impl(&self, axis: Axis, keepdim: bool, correction: usize) -> Tensor {
        let axes = self.resolve_axes(axis, "var");
        let shape = self.shape();
        let n: usize = axes.iter().map(|&a| shape[a]).product();
        let ax = Axis::Some(axes.iter().map(|&a| a as isize).collect());
        let x = self.cast(least_upper_float(self.dtype()));
        let dev = &x - &x.mean_impl(ax, true);
        // the sum of squares and its division in the accumulation dtype, as the mean's
        let acc = sum_acc_dtype(x.dtype());
        let ss = (&dev * &dev).cast(acc).reduce_op(Ops::Add, &axes, keepdim);
        // max(0, n - correction), as tinygrad and torch: a correction of at least n divides by
        // zero (inf, or NaN for a zero sum of squares)
        let denom = n.saturating_sub(correction);
        let v = if let Some(count) = self.sym_count(&axes, keepdim, acc).filter(|_| denom > 0) {
            // a symbolic count: max(0, count - correction) in the kernel, for every value
            ss.div(&(count - correction as f64).relu())
        } else if denom == 0 {
            // ss / 0 without a division (not every target divides by zero as IEEE says):
            // inf, or NaN where ss is 0
            ss * f64::INFINITY
        } else {
            ss.div(denom as f64)
        };
        v.cast(x.dtype())
    }

    /// Variance over `axis` with Bessel's `correction` (tinygrad's default is 1).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]);
    /// assert!((t.var(Axis::All, 1).item::<f32>() - 6.8).abs() < 1e-5);
    /// assert_eq!(t.var(0, 1).to_vec::<f32>(), vec![4.5, 8.0, 12.5]);
    /// assert_eq!(t.var(1, 1).to_vec::<f32>(), vec![1.0, 4.0]);
    /// ```
    pub fn var(&self, axis: impl Into<Axis>, correction: usize) -> Tensor {
        self.var_impl(axis.into(), false, correction)
    }

    /// [`Tensor::var`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]);
    /// let r = t.var_keepdim(1, 0);
    /// assert_eq!(r.shape(), vec![2, 1]);
    /// for (a, b) in r.to_vec::<f32>().iter().zip([2.0f32 / 3.0, 8.0 / 3.0]) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn var_keepdim(&self, axis: impl Into<Axis>, correction: usize) -> Tensor {
        self.var_impl(axis.into(), true, correction)
    }

    /// Standard deviation over `axis` with `correction`.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]);
    /// assert!((t.std(Axis::All, 1).item::<f32>() - 2.607681).abs() < 1e-5);
    /// for (a, b) in t.std(0, 1).to_vec::<f32>().iter().zip([2.1213202f32, 2.828427, 3.535534]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// assert_eq!(t.std(1, 1).to_vec::<f32>(), vec![1.0, 2.0]);
    /// ```
    pub fn std(&self, axis: impl Into<Axis>, correction: usize) -> Tensor {
        self.var(axis, correction).sqrt()
    }

    /// [`Tensor::std`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]);
    /// let r = t.std_keepdim(1, 1);
    /// assert_eq!((r.shape(), r.to_vec::<f32>()), (vec![2, 1], vec![1.0, 2.0]));
    /// ```
    pub fn std_keepdim(&self, axis: impl Into<Axis>, correction: usize) -> Tensor {
        self.var_keepdim(axis, correction).sqrt()
    }

    /// `(var, mean)` over `axis` — tinygrad's `var_mean` (`keepdim` keeps the reduced axes).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    /// let (v, m) = t.var_mean(0isize, 1, false);
    /// assert_eq!((v.item::<f32>(), m.item::<f32>()), (5.0 / 3.0, 2.5));
    /// ```
    pub fn var_mean(
        &self,
        axis: impl Into<Axis>,
        correction: usize,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        let axis = axis.into();
        (
            self.var_impl(axis.clone(), keepdim, correction),
            self.mean_impl(axis, keepdim),
        )
    }

    /// `(std, mean)` over `axis` — tinygrad's `std_mean`.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 3.0], &[2]);
    /// let (s, m) = t.std_mean(0isize, 0, false);
    /// assert_eq!((s.item::<f32>(), m.item::<f32>()), (1.0, 2.0));
    /// ```
    pub fn std_mean(
        &self,
        axis: impl Into<Axis>,
        correction: usize,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        let (v, m) = self.var_mean(axis, correction, keepdim);
        (v.sqrt(), m)
    }

    /// Whether any element over `axis` is non-zero (bool).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[true, true, true, false, false, false], &[3, 2]);
    /// assert!(t.any(Axis::All).item::<bool>());
    /// assert_eq!(t.any(0).to_vec::<bool>(), vec![true, true]);
    /// assert_eq!(t.any(1).to_vec::<bool>(), vec![true, true, false]);
    /// ```
    pub fn any(&self, axis: impl Into<Axis>) -> Tensor {
        self.ne(0).max(axis)
    }

    /// [`Tensor::any`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[true, true, true, false, false, false], &[3, 2]);
    /// let r = t.any_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<bool>()), (vec![3, 1], vec![true, true, false]));
    /// ```
    pub fn any_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.ne(0).max_keepdim(axis)
    }

    /// Whether all elements over `axis` are non-zero (bool).
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[true, true, true, false, false, false], &[3, 2]);
    /// assert!(!t.all(Axis::All).item::<bool>());
    /// assert_eq!(t.all(0).to_vec::<bool>(), vec![false, false]);
    /// assert_eq!(t.all(1).to_vec::<bool>(), vec![true, false, false]);
    /// ```
    pub fn all(&self, axis: impl Into<Axis>) -> Tensor {
        self.eq(0).any(axis).logical_not()
    }

    /// [`Tensor::all`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[true, true, true, false, false, false], &[3, 2]);
    /// let r = t.all_keepdim(1);
    /// assert_eq!((r.shape(), r.to_vec::<bool>()), (vec![3, 1], vec![true, false, false]));
    /// ```
    pub fn all_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.eq(0).any_keepdim(axis).logical_not()
    }

    fn argmax_impl(&self, axis: Option<isize>, keepdim: bool) -> Tensor {
        let Some(axis) = axis else {
            let r = self.flatten(0, -1).argmax_impl(Some(0), false);
            return if keepdim {
                r.reshape(&vec![1; self.ndim()])
            } else {
                r
            };
        };
        let shape = self.shape();
        let a = resolve_axis(axis, shape.len(), "argmax", &shape);
        if shape.is_empty() {
            return Tensor::zeros_on(&[], DType::INT32, self.device());
        }
        let n = shape[a];
        assert!(
            n > 0,
            "argmax/argmin: axis {axis} of shape {shape:?} is empty (no index to return)"
        );
        // first index of the maximum: max over (n - i) where x == max, then n - that
        let mut is_max = self.eq(&self.max_keepdim(a as isize));
        if self.dtype().is_float() {
            // NaN is the maximum (torch, numpy): the first NaN where a row has one
            let nan = self.isnan();
            is_max = nan.any_keepdim(a as isize).where_(&nan, &is_max);
        }
        let mut ramp_shape = vec![1isize; shape.len()];
        ramp_shape[a] = n as isize;
        let ramp = Tensor::index_ramp(n)
            .rsub(n as i64)
            .reshape(&ramp_shape)
            .with_device_of(self);
        let score = is_max.where_(&ramp, 0i32);
        let best = if keepdim {
            score.max_keepdim(a as isize)
        } else {
            score.max(a as isize)
        };
        best.rsub(n as i64).cast(DType::INT32)
    }

    /// Index of the first maximum along `axis` (`None`: of the flattened tensor), as int32.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// assert_eq!(t.argmax(None).item::<i32>(), 3);
    /// assert_eq!(t.argmax(Some(0)).to_vec::<i32>(), vec![1, 1, 1]);
    /// assert_eq!(t.argmax(Some(1)).to_vec::<i32>(), vec![2, 0]);
    /// ```
    pub fn argmax(&self, axis: Option<isize>) -> Tensor {
        self.argmax_impl(axis, false)
    }

    /// [`Tensor::argmax`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// let r = t.argmax_keepdim(Some(1));
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![2, 1], vec![2, 0]));
    /// assert_eq!(t.argmax_keepdim(None).shape(), vec![1, 1]);
    /// ```
    pub fn argmax_keepdim(&self, axis: Option<isize>) -> Tensor {
        self.argmax_impl(axis, true)
    }

    /// Index of the first minimum along `axis` (`None`: of the flattened tensor), as int32.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// assert_eq!(t.argmin(None).item::<i32>(), 1);
    /// assert_eq!(t.argmin(Some(0)).to_vec::<i32>(), vec![0, 0, 0]);
    /// assert_eq!(t.argmin(Some(1)).to_vec::<i32>(), vec![1, 2]);
    /// ```
    pub fn argmin(&self, axis: Option<isize>) -> Tensor {
        self.inverse().argmax_impl(axis, false)
    }

    /// [`Tensor::argmin`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// let r = t.argmin_keepdim(Some(0));
    /// assert_eq!((r.shape(), r.to_vec::<i32>()), (vec![1, 3], vec![0, 0, 0]));
    /// ```
    pub fn argmin_keepdim(&self, axis: Option<isize>) -> Tensor {
        self.inverse().argmax_impl(axis, true)
    }

    /// `exp(x) / sum(exp(x))` along `axis` (stabilized by the maximum).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    /// let want = [0.09003057f32, 0.24472846, 0.66524094, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
    /// for (a, b) in t.softmax(-1).to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn softmax(&self, axis: isize) -> Tensor {
        self.softmax_named(axis, "softmax")
    }

    /// [`Tensor::softmax`] whose errors name `op`, the function the user called: the axis is
    /// checked here, before the `max` and `sum` it is built from see it.
    fn softmax_named(&self, axis: isize, op: &str) -> Tensor {
        self.resolve_axes(Axis::from(axis), op);
        let x = self.cast(least_upper_float(self.dtype()));
        // the max only keeps exp in range: detached as in tinygrad, since the gradient through
        // it is 0 in exact arithmetic and rounding noise (landing on the max's position) in f32
        let e = (&x - &x.max_keepdim(axis).detach()).exp();
        let s = e.sum_keepdim(axis);
        e / s
    }

    /// `log(softmax(x))` along `axis`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    /// let want = [-0.6931472f32, -0.31326166, -0.12692806, -0.6931472, -1.3132617, -2.126928];
    /// for (a, b) in t.log_softmax(0).to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        // checked here so that an error names log_softmax, not the max it is built from
        self.resolve_axes(Axis::from(axis), "log_softmax");
        let x = self.cast(least_upper_float(self.dtype()));
        let m = &x - &x.max_keepdim(axis).detach();
        let lse = m.exp().sum_keepdim(axis).log();
        m - lse
    }

    /// `softmax(-x)` along `axis` (torch's `softmin`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    /// let want = [0.66524094f32, 0.24472848, 0.09003057];
    /// for (a, b) in t.softmin(-1).to_vec::<f32>().iter().zip(want) {
    ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    /// }
    /// ```
    pub fn softmin(&self, axis: isize) -> Tensor {
        self.resolve_axes(Axis::from(axis), "softmin");
        self.cast(least_upper_float(self.dtype()))
            .neg()
            .softmax_named(axis, "softmin")
    }

    /// `log(sum(exp(x)))` over `axis`, stabilized by the maximum.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor};
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    /// assert!((t.logsumexp(Axis::All).item::<f32>() - 3.646695).abs() < 1e-5);
    /// for (a, b) in t.logsumexp(1).to_vec::<f32>().iter().zip([3.407606f32, 2.0986123]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn logsumexp(&self, axis: impl Into<Axis>) -> Tensor {
        self.logsumexp_impl(axis.into(), false)
    }

    /// [`Tensor::logsumexp`] keeping dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
    /// let r = t.logsumexp_keepdim(0);
    /// assert_eq!(r.shape(), vec![1, 3]);
    /// for (a, b) in r.to_vec::<f32>().iter().zip([1.6931472f32, 2.3132617, 3.126928]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// ```
    pub fn logsumexp_keepdim(&self, axis: impl Into<Axis>) -> Tensor {
        self.logsumexp_impl(axis.into(), true)
    }

    fn logsumexp_impl(&self, axis: Axis, keepdim: bool) -> Tensor {
        // checked here so that an error names logsumexp, not the max it is built from
        let axes = self.resolve_axes(axis.clone(), "logsumexp");
        let x = self.cast(least_upper_float(self.dtype()));
        let m = x.max_impl(axis.clone(), true);
        // an all -inf slice has max -inf; use 0 there so x - m stays -inf (not NaN)
        let m = m.eq(f64::NEG_INFINITY).where_(0.0, &m);
        let s = (&x - &m)
            .exp()
            .sum_impl(axis.clone(), true, Ops::Add, "logsumexp")
            .log()
            + &m;
        if keepdim { s } else { s.squeeze_axes(&axes) }
    }

    fn squeeze_axes(&self, axes: &[usize]) -> Tensor {
        let shape = self.shape();
        let out: Vec<usize> = shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        self.reshape_exact(&out)
    }

    /// Matrix product with numpy's rules: 1-D operands are promoted to matrices, leading batch
    /// dimensions broadcast. Computed as `(x * w).sum(-1)` on broadcast views (one fused kernel).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// let b = Tensor::from_slice(&[5i32, 6, 7, 8], &[2, 2]);
    /// assert_eq!(a.matmul(&b).to_vec::<i32>(), vec![19, 22, 43, 50]);
    /// let v = Tensor::from_vec(vec![1i32, 1]);
    /// assert_eq!(a.matmul(&v).to_vec::<i32>(), vec![3, 7]);
    /// ```
    ///
    /// # Panics
    /// If either operand is 0-D or the inner dimensions differ.
    pub fn matmul(&self, w: &Tensor) -> Tensor {
        self.contract(w, "matmul")
    }

    /// See [`Tensor::matmul`].
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let (a, b) = (Tensor::from_vec(vec![1i32, 2, 3]), Tensor::from_vec(vec![1i32, 1, 0]));
    /// let d = a.dot(&b);
    /// assert_eq!((d.shape(), d.item::<i32>()), (vec![], 3));
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let b = Tensor::from_slice(&[5.0f32, 6.0, 7.0, 8.0], &[2, 2]);
    /// assert_eq!(a.dot(&b).to_vec::<f32>(), vec![19.0, 22.0, 43.0, 50.0]);
    /// ```
    pub fn dot(&self, w: &Tensor) -> Tensor {
        self.contract(w, "dot")
    }

    /// [`Tensor::dot`] / [`Tensor::matmul`], with `op` (the one the user called) in the errors.
    fn contract(&self, w: &Tensor, op: &str) -> Tensor {
        let (xs, ws) = (self.shape(), w.shape());
        let (n1, n2) = (xs.len(), ws.len());
        assert!(
            n1 != 0 && n2 != 0,
            "{op}: both operands need at least 1 dimension, got {xs:?} and {ws:?}"
        );
        let k_w = if n2 == 1 { ws[0] } else { ws[n2 - 2] };
        assert!(
            xs[n1 - 1] == k_w,
            "{op}: inner dimensions differ: {xs:?} @ {ws:?} ({} vs {k_w}), dtypes {} and {}",
            xs[n1 - 1],
            self.dtype(),
            w.dtype()
        );
        // the batch dims (all but the last two) must broadcast: checked here so that the error
        // names matmul and its operands, not the mul it is built from
        let (xb, wb) = (&xs[..n1.saturating_sub(2)], &ws[..n2.saturating_sub(2)]);
        assert!(
            crate::broadcast_shape(xb, wb).is_some(),
            "{op}: batch dimensions {xb:?} and {wb:?} don't broadcast: {xs:?} @ {ws:?}, \
             dtypes {} and {}",
            self.dtype(),
            w.dtype()
        );
        let mid = n1.min(n2).saturating_sub(1).min(1);
        let mut xr: Vec<isize> = xs[..n1 - 1].iter().map(|&d| d as isize).collect();
        xr.extend(std::iter::repeat_n(1, mid));
        xr.push(xs[n1 - 1] as isize);
        let wk = n2.min(2);
        let mut wr: Vec<isize> = ws[..n2 - wk].iter().map(|&d| d as isize).collect();
        wr.extend(std::iter::repeat_n(1, mid));
        wr.extend(ws[n2 - wk..].iter().map(|&d| d as isize));
        let x = self.reshape(&xr);
        let wt = w.reshape(&wr).transpose(-1, -(wk as isize));
        (x * wt).sum(-1isize)
    }

    /// `x @ weight + bias` (tinygrad's `linear`: `weight` is `(in, out)`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let weight = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let bias = Tensor::from_vec(vec![1.0f32, 2.0]);
    /// let r = t.linear(&weight, Some(&bias)).to_vec::<f32>();
    /// assert_eq!(r, vec![8.0, 12.0, 16.0, 24.0]);
    /// assert_eq!(t.linear(&weight, None).to_vec::<f32>(), vec![7.0, 10.0, 15.0, 22.0]);
    /// ```
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
        let y = self.matmul(weight);
        match bias {
            Some(b) => y + b,
            None => y,
        }
    }

    /// Cumulative sum along `axis`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[2, 3], DType::FLOAT32);
    /// assert_eq!(t.cumsum(0).to_vec::<f32>(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    /// assert_eq!(t.cumsum(1).to_vec::<f32>(), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    /// ```
    pub fn cumsum(&self, axis: isize) -> Tensor {
        let shape = self.shape();
        // checked first: a 0-d tensor has axis 0 (or -1) only
        let a = resolve_axis(axis, shape.len(), "cumsum", &shape);
        if shape.is_empty() {
            return self.clone();
        }
        let last = shape.len() as isize - 1;
        let t = self.transpose(a as isize, last);
        t.cumsum_last().transpose(a as isize, last)
    }

    /// Cumulative sum of the last axis as a reduce over a sliding window (tinygrad's `_cumalu`):
    /// row `i` of an `n x n` view is the input shifted right by `i` with zeros shifted in.
    fn cumsum_last(&self) -> Tensor {
        let shape = self.shape();
        let n = *shape
            .last()
            .expect("cumsum of a 0-D tensor is handled by the caller");
        if n <= 1 {
            return self.cast(sum_acc_dtype(self.dtype()));
        }
        let pre: Vec<isize> = shape[..shape.len() - 1]
            .iter()
            .map(|&d| d as isize)
            .collect();
        let nd = shape.len();
        let mut pad = vec![(0usize, 0usize); nd];
        pad[nd - 1] = (0, n);
        let p = self.pad(&pad, 0.0); // (..., 2n)
        let mut s = pre.clone();
        s.extend([1, 2 * n as isize]);
        let mut e = pre.clone();
        e.extend([n as isize, 2 * n as isize]);
        let x = p.reshape(&s).expand(&e); // (..., n, 2n)
        let mut flat = pre.clone();
        flat.push((2 * n * n) as isize);
        let x = x.reshape(&flat);
        let mut b: Vec<(usize, usize)> = shape[..nd - 1].iter().map(|&d| (0, d)).collect();
        b.push((0, n * (2 * n - 1)));
        let x = x.shrink(&b);
        let mut win = pre.clone();
        win.extend([n as isize, (2 * n - 1) as isize]);
        let x = x.reshape(&win); // [i, j] = x[(j - i) mod 2n]
        let mut b2: Vec<(usize, usize)> = shape[..nd - 1].iter().map(|&d| (0, d)).collect();
        b2.extend([(0, n), (0, n)]);
        x.shrink(&b2).sum(-2isize)
    }
}
