//! Joining and repeating: `cat`, `stack`, `repeat_interleave`.

use super::resolve_axis;
use crate::Tensor;

impl Tensor {
    /// Concatenates tensors along `dim` (shapes must match elsewhere).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t0 = Tensor::from_slice(&[1i32, 2], &[1, 2]);
    /// let (t1, t2) = (&t0 + 2, &t0 + 4);
    /// let c = Tensor::cat(&[&t0, &t1, &t2], 0);
    /// assert_eq!((c.shape(), c.to_vec::<i32>()), (vec![3, 2], vec![1, 2, 3, 4, 5, 6]));
    /// let c = Tensor::cat(&[&t0, &t1, &t2], 1);
    /// assert_eq!((c.shape(), c.to_vec::<i32>()), (vec![1, 6], vec![1, 2, 3, 4, 5, 6]));
    /// ```
    ///
    /// # Panics
    /// If the list is empty, a tensor is 0-d (as torch: "zero-dimensional tensor cannot be
    /// concatenated"; [`Tensor::stack`] them), the tensors are on different devices, or the
    /// shapes differ outside `dim`.
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Tensor {
        let first = tensors.first().expect("cat: needs at least one tensor");
        let shape = first.shape();
        for (i, t) in tensors.iter().enumerate() {
            assert!(
                t.ndim() > 0,
                "cat: zero-dimensional tensor (at position {i}) cannot be concatenated; use stack"
            );
            assert!(
                t.device() == first.device(),
                "cat: tensors on different devices: {} (position 0, shape {shape:?}) and {} \
                 (position {i}, shape {:?})",
                first.device(),
                t.device(),
                t.shape()
            );
        }
        let d = resolve_axis(dim, shape.len(), "cat", &shape);
        let dt = tinygrad_dtype::least_upper_dtype(
            &tensors.iter().map(|t| t.dtype()).collect::<Vec<_>>(),
        );
        for t in tensors {
            let s = t.shape();
            assert!(
                s.len() == shape.len()
                    && s.iter()
                        .zip(&shape)
                        .enumerate()
                        .all(|(i, (a, b))| i == d || a == b),
                "cat: shape {s:?} doesn't match {shape:?} outside dim {d}"
            );
        }
        if tensors.iter().any(|t| t.uop().has_sym()) {
            return Tensor::cat_sym(tensors, d, dt);
        }
        let total: usize = tensors.iter().map(|t| t.shape()[d]).sum();
        let mut off = 0;
        let mut acc: Option<Tensor> = None;
        for t in tensors {
            let n = t.shape()[d];
            let mut pad = vec![(0usize, 0usize); shape.len()];
            pad[d] = (off, total - off - n);
            off += n;
            let p = t.cast(dt).pad(&pad, 0.0);
            acc = Some(match acc {
                None => p,
                Some(a) => a + p,
            });
        }
        acc.expect("at least one tensor")
    }

    /// [`Tensor::cat`] of tensors with symbolic sizes: each padded along `d` by the sizes of
    /// the tensors before and after it as they are (symbolic where they are), so that one
    /// kernel serves every value of the variables.
    fn cat_sym(tensors: &[&Tensor], d: usize, dt: tinygrad_dtype::DType) -> Tensor {
        use tinygrad_uop::SInt;
        let sizes: Vec<SInt> = tensors.iter().map(|t| t.sym_shape()[d].clone()).collect();
        let sum = |s: &[SInt]| s.iter().fold(SInt::Const(0), |a, b| &a + b);
        let mut acc: Option<Tensor> = None;
        for (k, t) in tensors.iter().enumerate() {
            let mut pad = vec![(SInt::Const(0), SInt::Const(0)); t.ndim()];
            pad[d] = (sum(&sizes[..k]), sum(&sizes[k + 1..]));
            let p = t.cast(dt).pad_sym(&pad);
            acc = Some(match acc {
                None => p,
                Some(a) => a + p,
            });
        }
        acc.expect("at least one tensor")
    }

    /// Stacks tensors of equal shape along a new axis `dim`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t0 = Tensor::from_slice(&[1i32, 2], &[2]);
    /// let (t1, t2) = (&t0 + 2, &t0 + 4);
    /// let s = Tensor::stack(&[&t0, &t1, &t2], 0);
    /// assert_eq!((s.shape(), s.to_vec::<i32>()), (vec![3, 2], vec![1, 2, 3, 4, 5, 6]));
    /// let s = Tensor::stack(&[&t0, &t1, &t2], 1);
    /// assert_eq!((s.shape(), s.to_vec::<i32>()), (vec![2, 3], vec![1, 3, 5, 2, 4, 6]));
    /// ```
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Tensor {
        let first = tensors.first().expect("stack: needs at least one tensor");
        let shape = first.shape();
        for t in tensors {
            assert_eq!(
                t.shape(),
                shape,
                "stack: shapes {:?} and {shape:?} differ",
                t.shape()
            );
        }
        let d = resolve_axis(dim, shape.len() + 1, "stack", &shape) as isize;
        let us: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(d)).collect();
        Tensor::cat(&us.iter().collect::<Vec<_>>(), d)
    }

    /// Repeats each element `repeats` times along `dim` (the flattened tensor when `None`) —
    /// PyTorch's and tinygrad's `repeat_interleave` with an integer count.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// assert_eq!(t.repeat_interleave(2, None).to_vec::<i32>(), vec![1, 1, 2, 2, 3, 3, 4, 4]);
    /// assert_eq!(t.repeat_interleave(2, Some(0)).shape(), vec![4, 2]);
    /// assert_eq!(t.repeat_interleave(2, Some(0)).to_vec::<i32>(), vec![1, 2, 1, 2, 3, 4, 3, 4]);
    /// ```
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Tensor {
        let (x, d) = match dim {
            None => (self.flatten(0, -1), 0),
            Some(d) => {
                let shape = self.shape();
                (
                    self.clone(),
                    resolve_axis(d, shape.len(), "repeat_interleave", &shape),
                )
            }
        };
        let shp: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
        let mut with_one = shp[..=d].to_vec();
        with_one.push(1);
        with_one.extend(&shp[d + 1..]);
        let mut expanded = shp[..=d].to_vec();
        expanded.push(repeats as isize);
        expanded.extend(&shp[d + 1..]);
        let mut out = shp[..d].to_vec();
        out.push(shp[d] * repeats as isize);
        out.extend(&shp[d + 1..]);
        // a new tensor (torch's copies), not an expanded view of `self`
        x.reshape(&with_one).expand(&expanded).reshape(&out).fresh()
    }
}
