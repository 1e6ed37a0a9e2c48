//! Ordering and cumulative ops, mirroring tinygrad's algorithms with this crate's primitives:
//! `cumprod`, `cummax`, `cummin`, `logcumsumexp` (sliding-window reductions, tinygrad's
//! `_cumalu`) and `sort`, `argsort`, `topk` (tinygrad's bitonic sort built from movement ops,
//! `maximum`/`minimum` and `cat`).
//!
//! Semantics worth knowing (all as in tinygrad):
//! - indices are `int32`;
//! - `cummax`/`cummin` indices point at the *first* position where the running extreme was
//!   reached (ties keep the earlier index);
//! - `sort`/`argsort`/`topk` are stable for ties in both directions: equal elements keep their
//!   original relative order (the k-th equal element of the output is the k-th equal element of
//!   the input);
//! - `sort`/`argsort`/`topk` order floats as torch: NaN above `+inf` (last ascending, first
//!   descending), `-0.0` equal to `0.0` (stable between them, each keeping its sign); the
//!   output is always a permutation of the input. `cummax`/`cummin` index a NaN as `n` (the
//!   length of the axis).
//!   `logcumsumexp` gives NaN from the first `+inf` or leading `-inf` on (it subtracts the running
//!   max), where numpy gives `inf`/`-inf`.

use tinygrad_dtype::{ConstValue, DType};

use crate::Tensor;
use crate::movement::resolve_axis;

/// The reduction a cumulative op applies over its window.
#[derive(Clone, Copy)]
enum CumOp {
    Max,
    Mul,
}

impl Tensor {
    /// tinygrad's `_inverse`: an order-reversing map (`-x` for floats, `~x` for ints, `!x` for
    /// bools).
    fn order_inverse(&self) -> Tensor {
        if self.dtype().is_float() {
            self.neg()
        } else if self.dtype().is_bool() {
            self.logical_not()
        } else {
            self.bitwise_not()
        }
    }

    /// Cumulative `op` over the last axis (length `n >= 2`): a reduce over the sliding windows
    /// of the input padded with the identity on the left, like tinygrad's `_cumalu` (built as in
    /// [`Tensor::cumsum`]).
    fn cumalu_last(&self, op: CumOp) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        let n = shape[nd - 1];
        if n <= 1 {
            return self.clone();
        }
        let identity: ConstValue = match op {
            CumOp::Max => self.dtype().min(),
            CumOp::Mul => ConstValue::Int(1),
        };
        let pre: Vec<isize> = shape[..nd - 1].iter().map(|&d| d as isize).collect();
        let mut pad = vec![(0usize, 0usize); nd];
        pad[nd - 1] = (0, n);
        let p = self.pad(&pad, identity); // (..., 2n)
        let mut s = pre.clone();
        s.extend([1, 2 * n as isize]);
        let mut e = pre.clone();
        e.extend([n as isize, 2 * n as isize]);
        let mut flat = pre.clone();
        flat.push((2 * n * n) as isize);
        let x = p.reshape(&s).expand(&e).reshape(&flat);
        let mut b: Vec<(usize, usize)> = shape[..nd - 1].iter().map(|&d| (0, d)).collect();
        b.push((0, n * (2 * n - 1)));
        let mut win = pre.clone();
        win.extend([n as isize, (2 * n - 1) as isize]);
        // [i, j] = x[j - i], the identity where j < i
        let x = x.shrink(&b).reshape(&win);
        let mut b2: Vec<(usize, usize)> = shape[..nd - 1].iter().map(|&d| (0, d)).collect();
        b2.extend([(0, n), (0, n)]);
        let x = x.shrink(&b2);
        match op {
            CumOp::Max => x.max(-2isize),
            CumOp::Mul => x.prod(-2isize).cast(self.dtype()),
        }
    }

    fn cumalu(&self, axis: isize, op: CumOp, name: &str) -> Tensor {
        let shape = self.shape();
        // checked first: a 0-d tensor has axis 0 (or -1) only
        let a = resolve_axis(axis, shape.len(), name, &shape) as isize;
        if shape.is_empty() {
            return self.clone();
        }
        if shape.contains(&0) {
            return self.clone();
        }
        let last = shape.len() as isize - 1;
        self.transpose(a, last).cumalu_last(op).transpose(a, last)
    }

    /// Cumulative product along `axis` (negative counts from the end), in the input's dtype.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::arange_dtype(1.0, 7.0, 1.0, DType::INT32).reshape(&[2, 3]);
    /// assert_eq!(t.cumprod(0).to_vec::<i32>(), vec![1, 2, 3, 4, 10, 18]);
    /// assert_eq!(t.cumprod(-1).to_vec::<i32>(), vec![1, 2, 6, 4, 20, 120]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range.
    pub fn cumprod(&self, axis: isize) -> Tensor {
        self.cumalu(axis, CumOp::Mul, "cumprod")
    }

    /// Cumulative maximum along `axis`: `(values, indices)`, the indices (`int32`) of the first
    /// position where each running maximum was reached.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, -1, 2, -2, 3, -3], &[7]);
    /// let (values, indices) = t.cummax(0);
    /// assert_eq!(values.to_vec::<i32>(), vec![0, 1, 1, 2, 2, 3, 3]);
    /// assert_eq!(indices.to_vec::<i32>(), vec![0, 1, 1, 3, 3, 5, 5]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range.
    pub fn cummax(&self, axis: isize) -> (Tensor, Tensor) {
        self.cummax_impl(axis, "cummax")
    }

    fn cummax_impl(&self, axis: isize, name: &str) -> (Tensor, Tensor) {
        let shape = self.shape();
        let zeros = || Tensor::zeros_on(&shape, DType::INT32, self.device());
        if shape.is_empty() {
            resolve_axis(axis, 0, name, &shape);
            return (self.clone(), zeros());
        }
        let a = resolve_axis(axis, shape.len(), name, &shape) as isize;
        let values = self.cumalu(a, CumOp::Max, name);
        if shape.contains(&0) {
            return (values, zeros());
        }
        let n = shape[a as usize];
        let x = self.transpose(a, -1);
        let vt = values.transpose(a, -1);
        // matched[.., i, j]: x[i] == values[j] with i <= j; the index is the first such i
        let ramp = Tensor::index_ramp(n).with_device_of(self);
        let upper = ramp
            .reshape(&[n as isize, 1])
            .le(&ramp.reshape(&[1, n as isize]));
        let matched = x.unsqueeze(-1).eq(&vt.unsqueeze(-2)).logical_and(&upper);
        // score n - i, maximized over i, gives the first matching i
        let score = ramp.rsub(n as i64).reshape(&[n as isize, 1]);
        let idx = matched
            .where_(&score, 0i32)
            .max(-2isize)
            .rsub(n as i64)
            .cast(DType::INT32);
        (values, idx.transpose(-1, a))
    }

    /// Cumulative minimum along `axis`: `(values, indices)`, the indices (`int32`) of the first
    /// position where each running minimum was reached.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, -1, 2, -2, 3, -3], &[7]);
    /// let (values, indices) = t.cummin(0);
    /// assert_eq!(values.to_vec::<i32>(), vec![0, 0, -1, -1, -2, -2, -3]);
    /// assert_eq!(indices.to_vec::<i32>(), vec![0, 0, 2, 2, 4, 4, 6]);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range.
    pub fn cummin(&self, axis: isize) -> (Tensor, Tensor) {
        let (values, indices) = self.order_inverse().cummax_impl(axis, "cummin");
        (values.order_inverse(), indices)
    }

    /// `log(cumsum(exp(x)))` along `axis`, computed stably as tinygrad does: for each prefix,
    /// the running maximum is subtracted before exponentiating.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[0.0f32, 0.0, 1000.0, 1000.0], &[2, 2]);
    /// let r = t.logcumsumexp(1).to_vec::<f32>();
    /// let ln2 = 2f32.ln();
    /// assert!((r[1] - ln2).abs() < 1e-5 && (r[3] - (1000.0 + ln2)).abs() < 1e-3);
    /// assert_eq!(r[2], 1000.0);
    /// ```
    ///
    /// # Panics
    /// If `axis` is out of range.
    pub fn logcumsumexp(&self, axis: isize) -> Tensor {
        let shape = self.shape();
        if shape.is_empty() {
            resolve_axis(axis, 0, "logcumsumexp", &shape);
            return self.clone();
        }
        let a = resolve_axis(axis, shape.len(), "logcumsumexp", &shape) as isize;
        if shape.contains(&0) {
            return self.cast(tinygrad_dtype::least_upper_float(self.dtype()));
        }
        let x = self.transpose(a, -1);
        let n = shape[a as usize];
        let cmax = x.cumalu(-1, CumOp::Max, "logcumsumexp");
        // lower[j, i]: i <= j
        let ramp = Tensor::index_ramp(n).with_device_of(self);
        let lower = ramp
            .reshape(&[1, n as isize])
            .le(&ramp.reshape(&[n as isize, 1]));
        let diff = x.unsqueeze(-2).sub(&cmax.unsqueeze(-1)); // [.., j, i] = x[i] - max[j]
        let ret = lower
            .where_(&diff, self.dtype().min())
            .exp()
            .sum(-1isize)
            .log()
            .add(&cmax);
        ret.transpose(-1, a)
    }

    /// Sorts along `dim` (negative counts from the end) with tinygrad's bitonic sort:
    /// `(values, indices)`, the indices (`int32`) into the input. Stable: equal elements keep
    /// their original order (in both directions).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(
    ///     &[0.1f32, 0.5, 1.2, 3.4, 2.1, 2.2, 1.9, 0.3, 4.5, 0.8],
    ///     &[2, 5],
    /// );
    /// let (values, indices) = t.sort(1, true);
    /// assert_eq!(
    ///     values.to_vec::<f32>(),
    ///     vec![3.4, 2.1, 1.2, 0.5, 0.1, 4.5, 2.2, 1.9, 0.8, 0.3]
    /// );
    /// assert_eq!(indices.to_vec::<i32>(), vec![3, 4, 2, 1, 0, 3, 0, 1, 4, 2]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range.
    pub fn sort(&self, dim: isize, descending: bool) -> (Tensor, Tensor) {
        self.sort_impl(dim, descending, "sort")
    }

    /// An integer key with the order torch sorts floats in: the IEEE order, with `-0.0` equal
    /// to `0.0` and every NaN equal and above `+inf`. Integers compare without the NaN that
    /// breaks a sorting network of `maximum`/`minimum` (it spreads to every output).
    fn float_sort_key(&self) -> Tensor {
        let kdt = match self.dtype().itemsize() {
            1 => DType::INT8,
            2 => DType::INT16,
            4 => DType::INT32,
            _ => DType::INT64,
        };
        // -0.0 -> 0.0 (by a select: `x + 0.0` may be folded away)
        let x = self.eq(0).where_(&Tensor::zeros_like(self), self);
        let bits = x.bitcast(kdt);
        // negative floats: flip the magnitude bits, so larger magnitudes sort lower
        let key = bits.lt(0).where_(&bits.bitwise_xor(kdt.max()), &bits);
        self.isnan().where_(kdt.max(), &key)
    }

    fn sort_impl(&self, dim: isize, descending: bool, name: &str) -> (Tensor, Tensor) {
        let shape = self.shape();
        let d = resolve_axis(dim, shape.len(), name, &shape);
        let ndim = shape.len();
        let orig_len = if ndim == 0 { 1 } else { shape[d] };
        if orig_len <= 1 || shape.contains(&0) {
            return (
                self.clone(),
                Tensor::zeros_on(&shape, DType::INT32, self.device()),
            );
        }
        if self.dtype().is_float() {
            // sort the keys; the values are the input's at the sorted indices (so a -0.0 keeps
            // its sign and a NaN its payload)
            let (_, idx) = self.float_sort_key().sort_impl(dim, descending, name);
            return (self.gather(d as isize, &idx), idx);
        }
        // pad to a power of two with values that sort last, one axis of 2 per bit
        let n_stages = (usize::BITS - (orig_len - 1).leading_zeros()) as usize;
        let mut pads = vec![(0usize, 0usize); ndim];
        pads[d] = (0, (1usize << n_stages) - orig_len);
        let fill = if descending {
            self.dtype().min()
        } else {
            self.dtype().max()
        };
        let mut x = self
            .pad(&pads, fill)
            .unflatten(d as isize, &vec![2isize; n_stages]);
        let halves = |t: &Tensor, axis: usize| {
            let p = t.split(1, axis as isize);
            (p[0].clone(), p[1].clone())
        };
        // https://en.wikipedia.org/wiki/Bitonic_sorter#/media/File:BitonicSort1.svg
        for stage in 1..=n_stages {
            let crossover_dim = (d + n_stages).wrapping_sub(stage + 1);
            let flip_dims: Vec<isize> = (1..=(stage + ndim - d) as isize).map(|i| -i).collect();
            if stage != n_stages {
                // flip so the arrows of the green boxes point the same way as the blue boxes
                let (blue, green) = halves(&x, crossover_dim);
                x = Tensor::cat(&[&blue, &green.flip(&flip_dims)], crossover_dim as isize)
                    .contiguous();
            }
            for substage in (0..stage).rev() {
                let partner_dim = d + n_stages - substage - 1;
                let (top, bottom) = halves(&x, partner_dim);
                let (larger, smaller) = (top.maximum(&bottom), top.minimum(&bottom));
                x = if descending {
                    Tensor::cat(&[&larger, &smaller], partner_dim as isize)
                } else {
                    Tensor::cat(&[&smaller, &larger], partner_dim as isize)
                }
                .contiguous();
            }
            if stage != n_stages {
                // flip the wires back to undo the crossover
                let (blue, flipped_green) = halves(&x, crossover_dim);
                x = Tensor::cat(
                    &[&blue, &flipped_green.flip(&flip_dims)],
                    crossover_dim as isize,
                );
            }
        }
        let x = x.flatten(d as isize, (d + n_stages - 1) as isize);
        let bounds: Vec<(usize, usize)> = shape.iter().map(|&s| (0, s)).collect();
        let x = x.shrink(&bounds);
        // indices: the k-th occurrence of a value in the output is its k-th occurrence in the
        // input. mask[a, b]: b <= a
        let ramp = Tensor::index_ramp(orig_len).with_device_of(self);
        let mut mask_shape = vec![orig_len as isize, orig_len as isize];
        mask_shape.extend(vec![1isize; ndim - d - 1]);
        let mut col = vec![1isize, orig_len as isize];
        col.extend(vec![1isize; ndim - d - 1]);
        let mut row = vec![orig_len as isize, 1];
        row.extend(vec![1isize; ndim - d - 1]);
        let mask = ramp
            .reshape(&col)
            .le(&ramp.reshape(&row))
            .reshape(&mask_shape);
        let di = d as isize;
        let counts = |t: &Tensor| {
            mask.logical_and(&t.unsqueeze(di).eq(&t.unsqueeze(di + 1)))
                .sum(di + 1)
        };
        let (count_orig, count_sorted) = (counts(self), counts(&x));
        let cond = self
            .unsqueeze(di + 1)
            .eq(&x.unsqueeze(di))
            .logical_and(&count_orig.unsqueeze(di + 1).eq(&count_sorted.unsqueeze(di)));
        let idx_shape: Vec<isize> = (0..ndim)
            .map(|i| if i == d { orig_len as isize } else { 1 })
            .collect();
        let idx = ramp.reshape(&idx_shape).unsqueeze(di + 1);
        let idx = cond.where_(&idx, 0i32).sum(di).cast(DType::INT32);
        (x, idx)
    }

    /// The indices (`int32`) that sort the tensor along `dim` ([`Tensor::sort`]'s second
    /// output; stable).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[2i32, 3, 4, 1, 1, 4, 3, 2], &[2, 4]);
    /// assert_eq!(t.argsort(-1, false).to_vec::<i32>(), vec![3, 0, 1, 2, 0, 3, 2, 1]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range.
    pub fn argsort(&self, dim: isize, descending: bool) -> Tensor {
        self.sort_impl(dim, descending, "argsort").1
    }

    /// The `k` largest (`largest`) or smallest elements along `dim`, sorted: `(values,
    /// indices)`, indices `int32`. Ties keep their original order. Only `sorted = true` is
    /// supported, as in tinygrad.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(
    ///     &[0.1f32, 0.5, 1.2, 3.4, 2.1, 2.2, 1.9, 0.3, 4.5, 0.8],
    ///     &[2, 5],
    /// );
    /// let (values, indices) = t.topk(2, 1, true, true);
    /// assert_eq!(values.to_vec::<f32>(), vec![3.4, 2.1, 4.5, 2.2]);
    /// assert_eq!(indices.to_vec::<i32>(), vec![3, 4, 3, 0]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range, `k` is larger than the size of `dim`, or `sorted` is false.
    pub fn topk(&self, k: usize, dim: isize, largest: bool, sorted: bool) -> (Tensor, Tensor) {
        let shape = self.shape();
        assert!(
            sorted,
            "topk: sorted=false is not supported (shape {shape:?}), as in tinygrad"
        );
        let d = resolve_axis(dim, shape.len(), "topk", &shape);
        let size = if shape.is_empty() { 1 } else { shape[d] };
        assert!(
            k <= size,
            "topk: k={k} is out of range for dim {dim} of size {size} (shape {shape:?}); \
             expected k <= {size}"
        );
        let (x, idx) = self.sort_impl(dim, largest, "topk");
        if shape.is_empty() {
            return (x, idx);
        }
        let bounds: Vec<(usize, usize)> = shape
            .iter()
            .enumerate()
            .map(|(i, &s)| (0, if i == d { k } else { s }))
            .collect();
        (x.shrink(&bounds), idx.shrink(&bounds))
    }
}
