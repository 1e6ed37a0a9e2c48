//! Pad modes (`reflect`/`replicate`/`circular`), `scatter`/`scatter_reduce`, `meshgrid` and
//! `masked_select`, built from movement ops, one-hot comparisons, `where` and reductions the
//! way tinygrad's `tensor.py` builds them.

use tinygrad_dtype::{ConstValue, DType};

use crate::movement::resolve_axis;
use crate::{Axis, Idx, IntoOperand, Operand, Tensor, broadcast_shape};

/// How [`Tensor::pad_mode`] fills the padded elements (tinygrad's `pad(mode=...)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant value (tinygrad's `mode="constant"` with `value`).
    Constant(ConstValue),
    /// Mirror at the edges without repeating the edge element: `[1, 2, 3]` padded by `(2, 1)`
    /// is `[3, 2, 1, 2, 3, 2]`. Each pad must be smaller than its dim.
    Reflect,
    /// Repeat the edge element.
    Replicate,
    /// Wrap around: `[1, 2, 3]` padded by `(2, 1)` is `[2, 3, 1, 2, 3, 1]`. Each pad must be at
    /// most its dim; negative pads shrink first (`[0, 1, 2, 3, 4]` padded by `(-1, 2)` is
    /// `[1, 2, 3, 4, 1, 2]`, as tinygrad and torch).
    Circular,
}

impl PadMode {
    fn name(&self) -> &'static str {
        match self {
            PadMode::Constant(_) => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// Bounds keeping `[s, e)` of axis `d` and everything of the other axes.
fn dim_bounds(shape: &[usize], d: usize, s: usize, e: usize) -> Vec<(usize, usize)> {
    shape
        .iter()
        .enumerate()
        .map(|(k, &n)| if k == d { (s, e) } else { (0, n) })
        .collect()
}

impl Tensor {
    /// Pads each axis by `(before, after)` elements filled according to `mode` (tinygrad's
    /// `pad(padding, mode, value)` with grouped padding: one pair per axis). Negative pads
    /// remove elements like a negative slice; for `Reflect`/`Replicate` they are applied after
    /// padding (the reflection sees the full data), as in tinygrad. `Constant` is
    /// [`Tensor::pad`] (plus the negative pads).
    ///
    /// ```
    /// use tinygrad_tensor::{PadMode, Tensor};
    /// let t = Tensor::arange(0, 9, 1).reshape(&[1, 1, 3, 3]);
    /// let p = t.pad_mode(&[(0, 0), (0, 0), (0, -1), (1, 2)], PadMode::Constant(0.into()));
    /// assert_eq!(p.shape(), vec![1, 1, 2, 6]);
    /// assert_eq!(p.to_vec::<i32>(), vec![0, 0, 1, 2, 0, 0, 0, 3, 4, 5, 0, 0]);
    /// let r = Tensor::from_vec(vec![1i32, 2, 3]);
    /// assert_eq!(r.pad_mode(&[(2, 1)], PadMode::Reflect).to_vec::<i32>(), vec![3, 2, 1, 2, 3, 2]);
    /// assert_eq!(r.pad_mode(&[(2, 1)], PadMode::Replicate).to_vec::<i32>(), vec![1, 1, 1, 2, 3, 3]);
    /// assert_eq!(r.pad_mode(&[(2, 1)], PadMode::Circular).to_vec::<i32>(), vec![2, 3, 1, 2, 3, 1]);
    /// ```
    ///
    /// # Panics
    /// If the number of pairs differs from the number of axes; for `Reflect` if a pad is not
    /// smaller than its dim; for `Circular` if a pad is larger than its dim (it would wrap more
    /// than once, after the negative pads have shrunk it); if negative pads remove more than the
    /// whole dim.
    pub fn pad_mode(&self, padding: &[(isize, isize)], mode: PadMode) -> Tensor {
        let shape = self.shape();
        let name = mode.name();
        assert_eq!(
            padding.len(),
            shape.len(),
            "pad: padding length is improper, {} pairs {padding:?} for shape {shape:?} (mode {name})",
            padding.len()
        );
        let pos: Vec<(usize, usize)> = padding
            .iter()
            .map(|&(b, a)| (b.max(0) as usize, a.max(0) as usize))
            .collect();
        match mode {
            PadMode::Constant(value) => {
                // shrink first for negative pads, then pad with the non-negative parts
                let x = self.neg_pad_shrink(padding, &shape, name);
                x.pad(&pos, value)
            }
            PadMode::Circular => {
                // tinygrad's `_pad_circular`: negative pads shrink first, then the
                // non-negative ones wrap around what is left
                let x = self.neg_pad_shrink(padding, &shape, name);
                let shape = x.shape();
                for (d, (&(b, a), &s)) in pos.iter().zip(&shape).enumerate() {
                    assert!(
                        b <= s && a <= s,
                        "pad: circular padding {padding:?} wraps around more than once for shape {:?} (dim {d}, of size {s} after the negative pads)",
                        self.shape()
                    );
                }
                let reps: Vec<usize> = pos
                    .iter()
                    .map(|&(b, a)| 1 + usize::from(b > 0) + usize::from(a > 0))
                    .collect();
                let x = x.repeat(&reps);
                let xs = x.shape();
                let bounds: Vec<(usize, usize)> = pos
                    .iter()
                    .zip(shape.iter().zip(&xs))
                    .map(|(&(b, a), (&o, &n))| {
                        (
                            if b == 0 { 0 } else { o - b },
                            if a == 0 { n } else { n - o + a },
                        )
                    })
                    .collect();
                x.shrink(&bounds)
            }
            PadMode::Reflect | PadMode::Replicate => {
                let mut x = self.clone();
                for (d, &(b, a)) in pos.iter().enumerate() {
                    let xs = x.shape();
                    let s = xs[d];
                    let (xb, xa) = if mode == PadMode::Reflect {
                        assert!(
                            b < s && a < s,
                            "pad: reflect padding ({b}, {a}) should be less than the input size {s} for dim {d} (shape {shape:?}, padding {padding:?})"
                        );
                        // x[b:0:-1] and x[s-2:s-2-a:-1] along d
                        (
                            (b > 0).then(|| {
                                x.shrink(&dim_bounds(&xs, d, 1, b + 1)).flip(&[d as isize])
                            }),
                            (a > 0).then(|| {
                                x.shrink(&dim_bounds(&xs, d, s - 1 - a, s - 1))
                                    .flip(&[d as isize])
                            }),
                        )
                    } else {
                        assert!(
                            s > 0 || (b == 0 && a == 0),
                            "pad: replicate padding ({b}, {a}) of the empty dim {d} (shape {shape:?}, padding {padding:?})"
                        );
                        let grow = |p: usize| -> Vec<isize> {
                            xs.iter()
                                .enumerate()
                                .map(|(k, &n)| if k == d { p as isize } else { n as isize })
                                .collect()
                        };
                        (
                            (b > 0).then(|| x.shrink(&dim_bounds(&xs, d, 0, 1)).expand(&grow(b))),
                            (a > 0)
                                .then(|| x.shrink(&dim_bounds(&xs, d, s - 1, s)).expand(&grow(a))),
                        )
                    };
                    if xb.is_some() || xa.is_some() {
                        let parts: Vec<&Tensor> = [xb.as_ref(), Some(&x), xa.as_ref()]
                            .into_iter()
                            .flatten()
                            .collect();
                        x = Tensor::cat(&parts, d as isize);
                    }
                }
                // shrink after for negative pads (reflection/replication must see full data first)
                let xs = x.shape();
                x.neg_pad_shrink(padding, &xs, name)
            }
        }
    }

    /// Applies the negative parts of `padding` as a shrink (tinygrad's
    /// `(-min(pB, 0), min(pA + s, s))`).
    fn neg_pad_shrink(&self, padding: &[(isize, isize)], shape: &[usize], mode: &str) -> Tensor {
        if padding.iter().all(|&(b, a)| b >= 0 && a >= 0) {
            return self.clone();
        }
        let bounds: Vec<(usize, usize)> = padding
            .iter()
            .zip(shape)
            .enumerate()
            .map(|(d, (&(b, a), &s))| {
                let s = s as isize;
                let (lo, hi) = (-b.min(0), (a + s).min(s));
                assert!(
                    lo <= hi && hi >= 0,
                    "pad: negative padding ({b}, {a}) removes more than the size {s} of dim {d} (shape {:?}, padding {padding:?}, mode {mode})",
                    self.shape()
                );
                (lo as usize, hi as usize)
            })
            .collect();
        self.shrink(&bounds)
    }

    /// tinygrad's `_pre_scatter`: `src` (shrunk to the index shape) broadcast along a new last
    /// axis over the positions of `dim`, and the bool mask `index == position`, both moved so
    /// that `dim` has `self`'s size and the last axis runs over the index entries along `dim`,
    /// then padded (with zeros / `false`) to `self`'s shape.
    fn pre_scatter(&self, dim: isize, index: &Tensor, src: &Tensor, op: &str) -> (Tensor, Tensor) {
        let (shape, ishape, sshape) = (self.shape(), index.shape(), src.shape());
        assert!(
            ishape.len() == shape.len() && sshape.len() == shape.len(),
            "{op}: self, index and src must have the same number of dims, got shapes {shape:?}, {ishape:?} and {sshape:?}"
        );
        let d = resolve_axis(dim, shape.len(), op, &shape);
        assert!(
            (0..shape.len()).all(|k| (k == d || shape[k] >= ishape[k]) && sshape[k] >= ishape[k]),
            "{op}: index shape {ishape:?} must not exceed src shape {sshape:?}, nor self shape {shape:?} outside dim {d}"
        );
        assert!(
            index.dtype().is_int(),
            "{op}: index must be an integer tensor, got {} (shape {ishape:?})",
            index.dtype()
        );
        assert!(
            self.dtype() == src.dtype(),
            "{op}: self dtype {} must equal src dtype {} (shapes {shape:?} and {sshape:?})",
            self.dtype(),
            src.dtype()
        );
        let device = self.device().to_string();
        let (index, src) = (index.to(&device), src.to(&device));
        let n = shape[d];
        let bounds: Vec<(usize, usize)> = ishape.iter().map(|&i| (0, i)).collect();
        let mut big: Vec<isize> = ishape.iter().map(|&i| i as isize).collect();
        big.push(n as isize);
        let src = src
            .shrink(&bounds)
            .unsqueeze(-1)
            .expand(&big)
            .transpose(-1, d as isize);
        let ramp = Tensor::nn_ramp(n, DType::INT32, &device);
        let mask = index.unsqueeze(-1).eq(&ramp).transpose(-1, d as isize);
        let mut pads: Vec<(usize, usize)> = (0..shape.len())
            .map(|k| (0, if k == d { 0 } else { shape[k] - ishape[k] }))
            .collect();
        pads.push((0, 0));
        (src.pad(&pads, 0), mask.pad(&pads, false))
    }

    /// Writes `src` into a copy of `self` along `dim`: for `dim = 0`,
    /// `out[index[i][j]][j] = src[i][j]` (and so on for other dims). `src` is a tensor (same
    /// dtype as `self`, at least as large as `index`) or a scalar (cast to `self`'s dtype).
    ///
    /// As in tinygrad (a one-hot comparison of `index` with `0..self.shape[dim]`), index values
    /// outside `0..self.shape[dim]` (negative ones too) write nothing; when several entries of
    /// `index` hit the same element, the last one along `dim` wins (tinygrad's
    /// `_masked_setitem`; here a max-reduce picks it). Nothing is read or written outside a
    /// buffer.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let src = Tensor::arange(1, 11, 1).reshape(&[2, 5]);
    /// let index = Tensor::from_slice(&[0i32, 1, 2, 0], &[1, 4]);
    /// let out = Tensor::zeros(&[3, 5], DType::INT32).scatter(0, &index, &src);
    /// assert_eq!(out.to_vec::<i32>(), vec![1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0]);
    /// let index = Tensor::from_slice(&[0i32, 1, 2, 0, 1, 4], &[2, 3]);
    /// let out = Tensor::zeros(&[3, 5], DType::INT32).scatter(1, &index, &src);
    /// assert_eq!(out.to_vec::<i32>(), vec![1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0]);
    /// ```
    ///
    /// # Panics
    /// If `self`, `index` and `src` differ in number of dims, `index` is larger than `src`
    /// anywhere or than `self` outside `dim`, `index` is not an integer tensor, the dtypes of
    /// `self` and `src` differ, or `dim` is out of range.
    pub fn scatter(&self, dim: isize, index: &Tensor, src: impl IntoOperand) -> Tensor {
        self.scatter_with(dim, index, src, None)
    }

    /// [`Tensor::scatter`] with tinygrad's `reduce` argument: `None` (plain scatter), `"add"`
    /// (`scatter_reduce(.., "sum", true)`) or `"multiply"` (`"prod"`). A reduce needs a scalar
    /// `src`; see [`Tensor::scatter_reduce`] for tensor sources.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::full(&[2, 4], 2.0f32);
    /// let index = Tensor::from_slice(&[2i32, 3], &[2, 1]);
    /// let m = t.scatter_with(1, &index, 1.23, Some("multiply")).to_vec::<f32>();
    /// assert_eq!(m, vec![2.0, 2.0, 2.46, 2.0, 2.0, 2.0, 2.0, 2.46]);
    /// let a = t.scatter_with(1, &index, 1.23, Some("add")).to_vec::<f32>();
    /// let want = [2.0, 2.0, 3.23, 2.0, 2.0, 2.0, 2.0, 3.23];
    /// assert!(a.iter().zip(want).all(|(x, y)| (x - y).abs() < 1e-6));
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::scatter`]; also if `reduce` is not `None`, `"add"` or `"multiply"`, or a
    /// reduce is given with a tensor `src`.
    pub fn scatter_with(
        &self,
        dim: isize,
        index: &Tensor,
        src: impl IntoOperand,
        reduce: Option<&str>,
    ) -> Tensor {
        assert!(
            matches!(reduce, None | Some("add") | Some("multiply")),
            "scatter: reduce {reduce:?} must be None, 'multiply' or 'add' (shape {:?})",
            self.shape()
        );
        let src = match src.into_operand() {
            Operand::Tensor(t) => {
                assert!(
                    reduce.is_none(),
                    "scatter: a tensor src is not supported with reduce {reduce:?}; see scatter_reduce (shape {:?})",
                    self.shape()
                );
                t
            }
            Operand::Const(c) => Tensor::full_on(&index.shape(), c, self.dtype(), self.device()),
        };
        match reduce {
            Some("add") => {
                return self.scatter_reduce_impl(dim, index, &src, "sum", true, "scatter");
            }
            Some("multiply") => {
                return self.scatter_reduce_impl(dim, index, &src, "prod", true, "scatter");
            }
            _ => {}
        }
        let (src, mask) = self.pre_scatter(dim, index, &src, "scatter");
        // tinygrad folds the last axis so that the last true mask entry wins; the same element
        // is picked here by the largest position `j` whose mask is set
        let j = *mask.shape().last().expect("the scatter axis");
        let ramp = Tensor::nn_ramp(j, DType::INT32, self.device());
        let winner = mask.where_(&ramp, -1).max_keepdim(-1isize);
        let vals = ramp
            .eq(&winner)
            .where_(&src, 0)
            .sum(-1isize)
            .cast(self.dtype());
        winner.squeeze(Some(-1)).ge(0).where_(&vals, self)
    }

    /// Reduces `src` into a copy of `self` along `dim` at the positions given by `index`
    /// (for `dim = 0`, `src[i][j]` goes to `out[index[i][j]][j]`): `reduce` is `"sum"`,
    /// `"prod"`, `"mean"`, `"amax"` or `"amin"`. With `include_self`, `self`'s value takes part
    /// in each reduction; without, elements that some index hits get the reduction of their
    /// `src` values only (the others keep `self`). As in tinygrad, index values outside
    /// `0..self.shape[dim]` contribute nothing; `"mean"` divides (true division, so an integer
    /// tensor gives a float one).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let src = Tensor::arange(1, 11, 1).cast(DType::FLOAT32).reshape(&[2, 5]);
    /// let index = Tensor::zeros(&[2, 5], DType::INT32);
    /// let ones = Tensor::ones(&[1, 5], DType::FLOAT32);
    /// let s = ones.scatter_reduce(0, &index, &src, "sum", true);
    /// assert_eq!(s.to_vec::<f32>(), vec![8.0, 10.0, 12.0, 14.0, 16.0]);
    /// let p = ones.scatter_reduce(0, &index, &src, "prod", true);
    /// assert_eq!(p.to_vec::<f32>(), vec![6.0, 14.0, 24.0, 36.0, 50.0]);
    /// let m = ones.scatter_reduce(0, &index, &src, "mean", false);
    /// assert_eq!(m.to_vec::<f32>(), vec![3.5, 4.5, 5.5, 6.5, 7.5]);
    /// let t = Tensor::from_slice(&[-10.0f32, 20.0, 0.0, 5.0, 10.0], &[1, 5]);
    /// let mx = t.scatter_reduce(0, &index, &src, "amax", true);
    /// assert_eq!(mx.to_vec::<f32>(), vec![6.0, 20.0, 8.0, 9.0, 10.0]);
    /// let mn = t.scatter_reduce(0, &index, &src, "amin", true);
    /// assert_eq!(mn.to_vec::<f32>(), vec![-10.0, 2.0, 0.0, 4.0, 5.0]);
    /// ```
    ///
    /// # Panics
    /// As [`Tensor::scatter`], or if `reduce` is not one of the five names.
    pub fn scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
    ) -> Tensor {
        self.scatter_reduce_impl(dim, index, src, reduce, include_self, "scatter_reduce")
    }

    fn scatter_reduce_impl(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: &str,
        include_self: bool,
        op: &str,
    ) -> Tensor {
        assert!(
            matches!(reduce, "sum" | "prod" | "mean" | "amax" | "amin"),
            "{op}: reduce {reduce:?} must be one of 'sum', 'prod', 'mean', 'amax', 'amin' (shape {:?})",
            self.shape()
        );
        let (src, mask) = self.pre_scatter(dim, index, src, op);
        let untouched = || mask.any(-1isize).logical_not();
        let inv = |a: Operand, b: Operand| untouched().where_(a, b);
        let me = || Operand::Tensor(self.clone());
        let base = |identity: ConstValue| -> Operand {
            if include_self {
                me()
            } else {
                Operand::Tensor(inv(me(), Operand::Const(identity)))
            }
        };
        match reduce {
            "sum" => mask
                .where_(&src, 0)
                .sum(-1isize)
                .add(base(ConstValue::Int(0))),
            "prod" => mask
                .where_(&src, 1)
                .prod(-1isize)
                .mul(base(ConstValue::Int(1))),
            "amax" => {
                let m = src.dtype().min();
                mask.where_(&src, m).max(-1isize).maximum(base(m))
            }
            "amin" => {
                let m = src.dtype().max();
                mask.where_(&src, m).min(-1isize).minimum(base(m))
            }
            _ => {
                let add: Operand = if include_self {
                    Operand::Const(ConstValue::Int(1))
                } else {
                    Operand::Tensor(inv(
                        Operand::Const(ConstValue::Int(1)),
                        Operand::Const(ConstValue::Int(0)),
                    ))
                };
                let count = mask.where_(1, 0).sum(-1isize).add(add);
                mask.where_(&src, 0)
                    .sum(-1isize)
                    .add(base(ConstValue::Int(0)))
                    .div(&count)
            }
        }
    }

    /// Coordinate grids from 1-D coordinate vectors (tinygrad's `meshgrid`): with
    /// `indexing = "ij"` output `k` varies along axis `k` and the shape is
    /// `(n0, n1, ...)`; with `"xy"` the first two axes are swapped (shape `(n1, n0, ...)`).
    /// Inputs are flattened first; a single tensor is returned as it is (tinygrad).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![1i32, 2, 3]);
    /// let y = Tensor::from_vec(vec![4i32, 5, 6]);
    /// let g = Tensor::meshgrid(&[&x, &y], "ij");
    /// assert_eq!(g[0].to_vec::<i32>(), vec![1, 1, 1, 2, 2, 2, 3, 3, 3]);
    /// assert_eq!(g[1].to_vec::<i32>(), vec![4, 5, 6, 4, 5, 6, 4, 5, 6]);
    /// let g = Tensor::meshgrid(&[&x, &y], "xy");
    /// assert_eq!(g[0].to_vec::<i32>(), vec![1, 2, 3, 1, 2, 3, 1, 2, 3]);
    /// ```
    ///
    /// # Panics
    /// If `indexing` is not `"ij"` or `"xy"`, or `tensors` is empty.
    pub fn meshgrid(tensors: &[&Tensor], indexing: &str) -> Vec<Tensor> {
        assert!(
            matches!(indexing, "ij" | "xy"),
            "meshgrid: indexing must be \"ij\" or \"xy\", got {indexing:?}"
        );
        assert!(!tensors.is_empty(), "meshgrid: needs at least one tensor");
        let n = tensors.len();
        if n == 1 {
            return vec![tensors[0].clone()];
        }
        let basis: Vec<usize> = if indexing == "ij" {
            (0..n).collect()
        } else {
            [1, 0].into_iter().chain(2..n).collect()
        };
        let shaped: Vec<Tensor> = tensors
            .iter()
            .zip(basis)
            .map(|(t, i)| {
                let mut s = vec![-1isize];
                s.extend(std::iter::repeat_n(1, n - 1 - i));
                t.reshape(&s)
            })
            .collect();
        let out = shaped.iter().fold(Vec::new(), |acc: Vec<usize>, t| {
            broadcast_shape(&acc, &t.shape()).expect("meshgrid shapes broadcast")
        });
        shaped.iter().map(|t| t.broadcast_to(&out)).collect()
    }

    /// The elements of `self` where the bool `mask` (broadcast to `self`'s shape) is true, as a
    /// 1-D tensor in row-major order (tinygrad's `masked_select`: a cumsum of the mask, a
    /// scatter-add and a gather). The result's length depends on the data, so this realizes
    /// the mask's count.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 9, 1).reshape(&[3, 3]);
    /// let mask = Tensor::from_slice(
    ///     &[true, false, true, false, true, false, false, false, true],
    ///     &[3, 3],
    /// );
    /// assert_eq!(t.masked_select(&mask).to_vec::<i32>(), vec![0, 2, 4, 8]);
    /// ```
    ///
    /// # Panics
    /// If `mask` is not bool or does not broadcast to `self`'s shape.
    pub fn masked_select(&self, mask: &Tensor) -> Tensor {
        let shape = self.shape();
        assert!(
            mask.dtype() == DType::BOOL,
            "masked_select: expects a bool mask, got {} (shapes {shape:?} and {:?})",
            mask.dtype(),
            mask.shape()
        );
        let x = self.flatten(0, -1);
        let mask = mask.to(self.device()).broadcast_to(&shape).flatten(0, -1);
        let count = mask.sum(Axis::All).to_f64_vec()[0] as usize;
        if count == 0 {
            return Tensor::zeros_on(&[0], self.dtype(), self.device());
        }
        let mask_cumsum = mask.cumsum(0);
        let counts = Tensor::zeros_on(&[count], DType::INT32, self.device());
        let idxs = counts
            .scatter_with(0, &mask_cumsum, 1, Some("add"))
            .cumsum(0);
        x.getitem(&[Idx::Tensor(idxs)])
    }

    /// The indices of the non-zero elements, one row per element in row-major order
    /// (`[count, ndim]`, `int32`) — tinygrad's `nonzero` (realizes the count, like
    /// [`Tensor::masked_select`]).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 0, 3], &[5]);
    /// assert_eq!(t.nonzero().to_vec::<i32>(), vec![0, 2, 4]);
    /// let m = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 2.0], &[2, 2]);
    /// assert_eq!(m.nonzero().shape(), vec![2, 2]);
    /// assert_eq!(m.nonzero().to_vec::<i32>(), vec![0, 0, 1, 1]);
    /// ```
    pub fn nonzero(&self) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        let mask = self.ne(0).flatten(0, -1);
        if nd == 0 {
            let n = mask.sum(Axis::All).to_f64_vec()[0] as usize;
            return Tensor::zeros_on(&[n, 0], DType::INT32, self.device());
        }
        let indices = self.index_grid();
        let numel = self.numel() as isize;
        let picked = indices.masked_select(&mask.unsqueeze(-1).expand(&[numel, nd as isize]));
        picked.reshape(&[-1, nd as isize])
    }

    /// [`Tensor::masked_select`] with a static length (tinygrad's `masked_select(mask, size=,
    /// fill_value=)`): the first `size` selected elements, padded with `fill_value` (cast to
    /// `self`'s dtype) or truncated. Nothing is read back to the host, so it runs under a
    /// [`Jit`](crate::Jit), where `masked_select` is refused.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]);
    /// let mask = Tensor::from_slice(&[true, false, true, false], &[4]);
    /// assert_eq!(t.masked_select_sized(&mask, 4, -1).to_vec::<i32>(), vec![1, 3, -1, -1]);
    /// assert_eq!(t.masked_select_sized(&mask, 1, -1).to_vec::<i32>(), vec![1]);
    /// ```
    ///
    /// # Panics
    /// If `mask` is not bool or does not broadcast to `self`'s shape.
    pub fn masked_select_sized(
        &self,
        mask: &Tensor,
        size: usize,
        fill_value: impl IntoOperand,
    ) -> Tensor {
        let shape = self.shape();
        assert!(
            mask.dtype() == DType::BOOL,
            "masked_select_sized: expects a bool mask, got {} (shapes {shape:?} and {:?})",
            mask.dtype(),
            mask.shape()
        );
        let (dev, numel) = (self.device(), self.numel());
        let x = self.flatten(0, -1);
        let mask = mask.to(dev).broadcast_to(&shape).flatten(0, -1);
        if size == 0 || numel == 0 {
            let none = Tensor::zeros_on(&[size], DType::BOOL, dev);
            return none
                .where_(&Tensor::zeros_on(&[size], self.dtype(), dev), fill_value)
                .cast(self.dtype());
        }
        // tinygrad's: a scatter-add of the mask's cumsum, whose cumsum is the index of each
        // selected element; counted over `numel + 1` slots (every cumsum value has one) and
        // clamped into `x` (the slots past the count are filled)
        let slots = size.max(numel + 1);
        let counts = Tensor::zeros_on(&[slots], DType::INT32, dev).scatter_with(
            0,
            &mask.cumsum(0),
            1,
            Some("add"),
        );
        let idxs = counts
            .cumsum(0)
            .shrink(&[(0, size)])
            .minimum(numel as i32 - 1);
        let keep = Tensor::arange_on(0.0, size as f64, 1.0, DType::INT32, dev)
            .lt(&mask.cast(DType::INT32).sum(Axis::All));
        keep.where_(&x.getitem(&[Idx::Tensor(idxs)]), fill_value)
            .cast(self.dtype())
    }

    /// Every element's index, `[numel, ndim]` `int32` in row-major order (`nonzero`'s
    /// candidates).
    fn index_grid(&self) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        let dims: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
        let columns: Vec<Tensor> = shape
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let mut view = vec![1isize; nd];
                view[i] = s as isize;
                Tensor::arange_on(0.0, s as f64, 1.0, DType::INT32, self.device())
                    .reshape(&view)
                    .expand(&dims)
                    .flatten(0, -1)
            })
            .collect();
        Tensor::stack(&columns.iter().collect::<Vec<_>>(), -1)
    }

    /// [`Tensor::nonzero`] with a static row count (tinygrad's `nonzero(size=, fill_value=)`):
    /// `[size, ndim]`, the first `size` rows, padded with `fill_value` or truncated. Nothing is
    /// read back to the host, so it runs under a [`Jit`](crate::Jit).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 0, 5, 0, 0], &[5]);
    /// let nz = t.nonzero_sized(3, -1);
    /// assert_eq!((nz.shape(), nz.to_vec::<i32>()), (vec![3, 1], vec![2, -1, -1]));
    /// ```
    pub fn nonzero_sized(&self, size: usize, fill_value: impl IntoOperand) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        if nd == 0 {
            return Tensor::zeros_on(&[size, 0], DType::INT32, self.device());
        }
        let mask = self.ne(0).flatten(0, -1);
        let indices = self.index_grid();
        let numel = self.numel() as isize;
        let picked = indices.masked_select_sized(
            &mask.unsqueeze(-1).expand(&[numel, nd as isize]),
            size * nd,
            fill_value,
        );
        picked.reshape(&[size as isize, nd as isize])
    }
}
