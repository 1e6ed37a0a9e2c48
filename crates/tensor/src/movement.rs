//! Movement ops: views that never copy (they become index arithmetic in kernels).

use tinygrad_dtype::ConstValue;
use tinygrad_uop::{Arg, Ops, SInt, UOp};

use crate::Tensor;

/// Resolves a possibly negative axis against `ndim`. A 0-d tensor has one axis to name, `0` or
/// `-1` (as tinygrad's `_resolve_dim` and torch: the range is `[-max(1, n), max(1, n) - 1]`);
/// both resolve to 0, which callers treat as "no axis" for a 0-d tensor.
///
/// # Panics
/// If out of range (message names the op and the shape).
/// The argument of movement op `op` with numbers `arg` on `src`, whose shape has symbolic
/// sizes, with each number that stands for one of them made that size again: callers compute
/// shapes from [`Tensor::shape`] (the bound values), and a size kept from the source (an
/// expanded or reshaped axis that is not split, a shrink to the end of an axis) must stay
/// symbolic so that the kernel reads the variable instead of this call's value. A number that
/// does not correspond to a symbolic size stays a number (correct for this binding; the kernel
/// is then specialized to it).
///
/// # Panics
/// If a reshape splits a symbolic size into several axes.
fn symbolic_arg(src: &UOp, op: Ops, arg: Arg) -> Arg {
    let sym = src.sym_shape_vec();
    let bound: Vec<usize> = sym.iter().map(SInt::bound_value).collect();
    match op {
        Ops::Expand => {
            let new = arg.as_shape().expect("expand arg");
            let sizes: Vec<SInt> = new
                .iter()
                .zip(&sym)
                .zip(&bound)
                .map(|((&n, s), &b)| if n == b { s.clone() } else { SInt::Const(n) })
                .collect();
            Arg::sizes(&sizes)
        }
        Ops::Reshape => {
            let new = arg.as_shape().expect("reshape arg").to_vec();
            Arg::sizes(&reshape_sizes(&sym, &bound, &new))
        }
        Ops::Shrink => {
            let pairs = arg.as_pairs().expect("shrink arg");
            let sym_pairs: Vec<(SInt, SInt)> = pairs
                .iter()
                .zip(&sym)
                .zip(&bound)
                .map(|((&(b, e), s), &d)| {
                    let end = if e == d && s.is_symbolic() {
                        s.clone()
                    } else {
                        SInt::Const(e)
                    };
                    (SInt::Const(b), end)
                })
                .collect();
            Arg::sym_pairs_of(&sym_pairs)
        }
        _ => arg,
    }
}

/// The sizes of a reshape of a symbolic shape `sym` (bound values `bound`) to `new`: axes
/// grouped where the running products of the bound values meet; in a group holding a symbolic
/// size the one non-1 new axis is the group's product.
fn reshape_sizes(sym: &[SInt], bound: &[usize], new: &[usize]) -> Vec<SInt> {
    let mut out: Vec<SInt> = new.iter().map(|&n| SInt::Const(n)).collect();
    let (mut i, mut j) = (0usize, 0usize);
    while i < sym.len() || j < new.len() {
        // one group: old axes [i0, i) and new axes [j0, j) with equal products
        let (i0, j0) = (i, j);
        let (mut pi, mut pj) = (1usize, 1usize);
        if i < sym.len() {
            pi = bound[i];
            i += 1;
        }
        if j < new.len() {
            pj = new[j];
            j += 1;
        }
        while pi != pj {
            if pi < pj && i < sym.len() {
                pi = pi.saturating_mul(bound[i]);
                i += 1;
            } else if j < new.len() {
                pj = pj.saturating_mul(new[j]);
                j += 1;
            } else if i < sym.len() {
                pi = pi.saturating_mul(bound[i]);
                i += 1;
            } else {
                break;
            }
        }
        if sym[i0..i].iter().any(SInt::is_symbolic) {
            let big: Vec<usize> = (j0..j).filter(|&k| new[k] != 1).collect();
            assert!(
                big.len() <= 1,
                "reshape: a symbolic size ({}) cannot be split into {:?}",
                sym[i0..i]
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" x "),
                &new[j0..j]
            );
            if let Some(&k) = big.first() {
                out[k] = tinygrad_uop::prod(&sym[i0..i]);
            }
        }
    }
    out
}

pub(crate) fn resolve_axis(axis: isize, ndim: usize, op: &str, shape: &[usize]) -> usize {
    let n = ndim as isize;
    let m = n.max(1);
    assert!(
        (-m..m).contains(&axis),
        "{op}: axis {axis} out of range for shape {shape:?} (ndim {ndim})"
    );
    if ndim == 0 {
        return 0;
    }
    (if axis < 0 { axis + n } else { axis }) as usize
}

impl Tensor {
    fn movement(&self, op: Ops, arg: Arg) -> Tensor {
        // Every shape a tensor can take is created here (or by a buffer), so this is where an
        // element count or byte size that overflows is stopped: in release builds it would wrap
        // to a small buffer that the kernel then writes past.
        let name = match op {
            Ops::Reshape => Some("reshape"),
            Ops::Expand => Some("expand"),
            Ops::Pad => Some("pad"),
            _ => None,
        };
        if let Some(name) = name {
            let new_shape: Vec<usize> = match (op, &arg) {
                (Ops::Pad, _) => {
                    let pairs = arg.as_pairs().expect("pad arg");
                    self.shape()
                        .iter()
                        .zip(pairs)
                        .map(|(&d, &(b, a))| {
                            d.checked_add(b)
                                .and_then(|x| x.checked_add(a))
                                .unwrap_or_else(|| {
                                    panic!(
                                        "pad: padding {pairs:?} of shape {:?} overflows usize",
                                        self.shape()
                                    )
                                })
                        })
                        .collect()
                }
                _ => arg.as_shape().expect("movement shape arg").to_vec(),
            };
            if tinygrad_uop::shape::checked_numel(&new_shape, self.dtype().itemsize()).is_none() {
                panic!(
                    "{name}: shape {:?} ({}) can't become {new_shape:?}: more than {} bytes \
                     (isize::MAX) of {}",
                    self.shape(),
                    self.dtype(),
                    tinygrad_uop::shape::MAX_BYTES,
                    self.dtype()
                );
            }
        }
        let src = self.uop();
        let arg = if src.has_sym() && !arg.is_symbolic() {
            symbolic_arg(&src, op, arg)
        } else {
            arg
        };
        let u = UOp::new(op, self.dtype(), vec![src], arg.clone());
        match op {
            // views in torch's sense: an assignment to them writes through (a zero pad is a
            // new tensor, as torch's `pad`)
            Ops::Reshape | Ops::Permute | Ops::Shrink | Ops::Flip | Ops::Expand => {
                self.with_view_uop(u, op, arg)
            }
            _ => self.with_uop(u),
        }
    }

    pub(crate) fn reshape_exact(&self, shape: &[usize]) -> Tensor {
        if self.shape() == shape {
            return self.clone();
        }
        self.movement(Ops::Reshape, Arg::shape(shape))
    }

    pub(crate) fn expand_exact(&self, shape: &[usize]) -> Tensor {
        if self.shape() == shape {
            return self.clone();
        }
        self.movement(Ops::Expand, Arg::shape(shape))
    }

    /// A view with another shape of the same size; one dimension may be `-1` (inferred).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1);
    /// assert_eq!(t.reshape(&[2, 3]).shape(), vec![2, 3]);
    /// assert_eq!(t.reshape(&[-1, 2]).shape(), vec![3, 2]);
    /// assert_eq!(t.reshape(&[3, 2]).to_vec::<i32>(), vec![0, 1, 2, 3, 4, 5]);
    /// ```
    ///
    /// The sizes may be any integer type, so a shape read with [`Tensor::shape`] (`usize`) goes
    /// back in as it is:
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// let b = Tensor::arange(0, 6, 1).reshape(&a.shape()); // &Vec<usize>
    /// assert_eq!(b.shape(), vec![2, 3]);
    /// let rows = a.shape()[0];
    /// assert_eq!(a.reshape(&[rows as i64, -1]).shape(), vec![2, 3]);
    /// ```
    ///
    /// # Panics
    /// If the sizes differ, more than one `-1` is given, or a size is negative.
    pub fn reshape<D: ShapeDim>(&self, shape: &[D]) -> Tensor {
        let shape: Vec<isize> = shape.iter().map(|&d| d.to_isize("reshape")).collect();
        self.reshape_isize(&shape)
    }

    fn reshape_isize(&self, shape: &[isize]) -> Tensor {
        let old = self.shape();
        let numel: usize = old.iter().product();
        let infer = shape.iter().filter(|&&d| d == -1).count();
        assert!(
            infer <= 1,
            "reshape: only one dimension can be -1, got {shape:?} (from {old:?})"
        );
        assert!(
            shape.iter().all(|&d| d >= -1),
            "reshape: negative size in {shape:?} (from {old:?})"
        );
        let known: usize = shape
            .iter()
            .filter(|&&d| d != -1)
            .map(|&d| d as usize)
            .product();
        let new: Vec<usize> = shape
            .iter()
            .map(|&d| {
                if d == -1 {
                    assert!(
                        known != 0 && numel.is_multiple_of(known),
                        "reshape: can't infer -1 in {shape:?} for shape {old:?} ({numel} elements)"
                    );
                    numel / known
                } else {
                    d as usize
                }
            })
            .collect();
        let n: usize = new.iter().product();
        assert_eq!(
            n, numel,
            "reshape: shape {old:?} ({numel} elements) can't become {shape:?} ({n} elements)"
        );
        self.reshape_exact(&new)
    }

    /// Reorders the axes (`order` is a permutation of `0..ndim`, negative axes allowed).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// let p = t.permute(&[1, 0]);
    /// assert_eq!((p.shape(), p.to_vec::<i32>()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    /// ```
    ///
    /// # Panics
    /// If `order` is not a permutation.
    pub fn permute(&self, order: &[isize]) -> Tensor {
        let shape = self.shape();
        assert_eq!(
            order.len(),
            shape.len(),
            "permute: order {order:?} for shape {shape:?} needs {} axes",
            shape.len()
        );
        let ord: Vec<usize> = order
            .iter()
            .map(|&a| resolve_axis(a, shape.len(), "permute", &shape))
            .collect();
        let mut seen = vec![false; ord.len()];
        for &a in &ord {
            assert!(
                !seen[a],
                "permute: {order:?} repeats axis {a} (shape {shape:?})"
            );
            seen[a] = true;
        }
        if ord.iter().enumerate().all(|(i, &a)| i == a) {
            return self.clone();
        }
        self.movement(Ops::Permute, Arg::shape(&ord))
    }

    /// Broadcasts size-1 axes to `shape` (`-1` keeps a size; leading new axes allowed).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]).expand(&[4, -1]);
    /// assert_eq!(t.shape(), vec![4, 3]);
    /// assert_eq!(t.to_vec::<i32>(), [1, 2, 3].repeat(4));
    /// ```
    ///
    /// Like [`Tensor::reshape`], it takes sizes of any integer type (`&t.shape()` too).
    ///
    /// # Panics
    /// If a non-1 axis would change size.
    pub fn expand<D: ShapeDim>(&self, shape: &[D]) -> Tensor {
        let shape: Vec<isize> = shape.iter().map(|&d| d.to_isize("expand")).collect();
        self.expand_isize(&shape)
    }

    fn expand_isize(&self, shape: &[isize]) -> Tensor {
        let old = self.shape();
        assert!(
            shape.len() >= old.len(),
            "expand: can't expand {old:?} to fewer dims {shape:?}"
        );
        assert!(
            shape.iter().all(|&d| d >= -1),
            "expand: negative size in {shape:?} (from {old:?}; only -1, keep the size, is allowed)"
        );
        let off = shape.len() - old.len();
        let new: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if d == -1 {
                    assert!(i >= off, "expand: -1 in a new axis of {shape:?}");
                    old[i - off]
                } else {
                    d as usize
                }
            })
            .collect();
        let ok = old.iter().zip(&new[off..]).all(|(&o, &n)| o == n || o == 1);
        assert!(ok, "expand: cannot broadcast shape {old:?} to {new:?}");
        self.broadcast_to(&new)
    }

    /// Pads each axis with `(before, after)` elements of `value`. Like tinygrad, a non-zero
    /// `value` is combined with the tensor as a Python scalar would be: an integer keeps an int
    /// dtype, a float promotes it to float.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 4, 1).reshape(&[2, 2]);
    /// let p = t.pad(&[(1, 0), (0, 1)], -1);
    /// assert_eq!(p.shape(), vec![3, 3]);
    /// assert_eq!(p.to_vec::<i32>(), vec![-1, -1, -1, 0, 1, -1, 2, 3, -1]);
    /// ```
    ///
    /// # Panics
    /// If the number of pairs does not match the number of axes.
    pub fn pad(&self, padding: &[(usize, usize)], value: impl Into<ConstValue>) -> Tensor {
        let value = value.into();
        let shape = self.shape();
        assert_eq!(
            padding.len(),
            shape.len(),
            "pad: {} pairs for shape {shape:?}",
            padding.len()
        );
        if padding.iter().all(|&(a, b)| a == 0 && b == 0) {
            return self.clone();
        }
        let padded = self.movement(Ops::Pad, Arg::pairs(padding));
        if value.as_f64() == 0.0 {
            return padded;
        }
        // the pad op fills zeros; add `value` where the mask (a padded ones tensor) is false
        let mask = Tensor::full_dtype(&shape, true, tinygrad_dtype::DType::BOOL)
            .with_device_of(self)
            .movement(Ops::Pad, Arg::pairs(padding));
        mask.where_(&padded, value)
    }

    pub(crate) fn with_device_of(&self, other: &Tensor) -> Tensor {
        Tensor::from_uop(self.uop(), other.device())
    }

    /// Keeps `[start, end)` of each axis.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 9, 1).reshape(&[3, 3]);
    /// assert_eq!(t.shrink(&[(0, 3), (1, 3)]).to_vec::<i32>(), vec![1, 2, 4, 5, 7, 8]);
    /// assert_eq!(t.shrink(&[(0, 2), (0, 2)]).to_vec::<i32>(), vec![0, 1, 3, 4]);
    /// ```
    ///
    /// # Panics
    /// If a range is out of bounds or reversed.
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Tensor {
        let shape = self.shape();
        assert_eq!(
            bounds.len(),
            shape.len(),
            "shrink: {} ranges for shape {shape:?}",
            bounds.len()
        );
        for (i, (&(s, e), &d)) in bounds.iter().zip(&shape).enumerate() {
            assert!(
                s <= e && e <= d,
                "shrink: range {s}..{e} out of bounds for axis {i} of size {d} (shape {shape:?})"
            );
        }
        if bounds
            .iter()
            .zip(&shape)
            .all(|(&(s, e), &d)| s == 0 && e == d)
        {
            return self.clone();
        }
        self.movement(Ops::Shrink, Arg::pairs(bounds))
    }

    /// Reverses the given axes.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// assert_eq!(t.flip(&[0]).to_vec::<i32>(), vec![3, 4, 5, 0, 1, 2]);
    /// assert_eq!(t.flip(&[0, 1]).to_vec::<i32>(), vec![5, 4, 3, 2, 1, 0]);
    /// ```
    ///
    /// # Panics
    /// If an axis is out of range or named twice (tinygrad and torch reject `flip((0, 0))`:
    /// flipping twice is not a no-op anyone means).
    pub fn flip(&self, axes: &[isize]) -> Tensor {
        let shape = self.shape();
        let mut ax: Vec<usize> = axes
            .iter()
            .map(|&a| resolve_axis(a, shape.len(), "flip", &shape))
            .collect();
        ax.sort_unstable();
        let n = ax.len();
        ax.dedup();
        assert!(
            ax.len() == n,
            "flip: axes {axes:?} name an axis more than once (repeated axis) for shape {shape:?}"
        );
        // a 0-d tensor's axis 0 and size-1 axes have nothing to reverse
        ax.retain(|&a| shape.get(a).is_some_and(|&d| d > 1));
        if ax.is_empty() {
            return self.clone();
        }
        self.movement(Ops::Flip, Arg::shape(&ax))
    }

    /// Swaps two axes.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]).transpose(0, 1);
    /// assert_eq!((t.shape(), t.to_vec::<i32>()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    /// ```
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Tensor {
        let shape = self.shape();
        let (a, b) = (
            resolve_axis(dim0, shape.len(), "transpose", &shape),
            resolve_axis(dim1, shape.len(), "transpose", &shape),
        );
        let mut order: Vec<isize> = (0..shape.len() as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// Matrix transpose of a 2-D tensor (`transpose(-2, -1)`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]).t();
    /// assert_eq!((t.shape(), t.to_vec::<i32>()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    /// ```
    pub fn t(&self) -> Tensor {
        self.transpose(-2, -1)
    }

    /// Merges axes `start_dim..=end_dim` into one.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 8, 1).reshape(&[2, 2, 2]);
    /// assert_eq!(t.flatten(0, -1).to_vec::<i32>(), (0..8).collect::<Vec<i32>>());
    /// assert_eq!(t.flatten(1, -1).shape(), vec![2, 4]);
    /// ```
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Tensor {
        let shape = self.shape();
        if shape.is_empty() {
            return self.reshape(&[1]);
        }
        let (s, e) = (
            resolve_axis(start_dim, shape.len(), "flatten", &shape),
            resolve_axis(end_dim, shape.len(), "flatten", &shape),
        );
        assert!(
            s <= e,
            "flatten: start_dim {start_dim} after end_dim {end_dim} for shape {shape:?}"
        );
        let mut new: Vec<isize> = shape[..s].iter().map(|&d| d as isize).collect();
        new.push(shape[s..=e].iter().product::<usize>() as isize);
        new.extend(shape[e + 1..].iter().map(|&d| d as isize));
        self.reshape(&new)
    }

    /// Splits axis `dim` into `sizes` (one may be -1).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[3, 4, 1], DType::FLOAT32);
    /// assert_eq!(t.unflatten(1, &[2, 2]).shape(), vec![3, 2, 2, 1]);
    /// assert_eq!(t.unflatten(1, &[-1, 2]).shape(), vec![3, 2, 2, 1]);
    /// let u = Tensor::ones(&[5, 12, 3], DType::FLOAT32).unflatten(-2, &[2, 2, 3, 1, 1]);
    /// assert_eq!(u.shape(), vec![5, 2, 2, 3, 1, 1, 3]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range, more than one size is -1, a size is negative, or the sizes do
    /// not multiply to the size of `dim`.
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Tensor {
        let shape = self.shape();
        assert!(
            !shape.is_empty(),
            "unflatten: a 0-d tensor has no dim to unflatten into {sizes:?}"
        );
        let d = resolve_axis(dim, shape.len(), "unflatten", &shape);
        let n = shape[d];
        let inferred = sizes.iter().filter(|&&s| s == -1).count();
        let known: isize = sizes.iter().filter(|&&s| s != -1).product();
        // checked here so that the error names unflatten and the dim, not the reshape
        assert!(
            inferred <= 1 && sizes.iter().all(|&s| s >= -1),
            "unflatten: sizes {sizes:?} for dim {dim} (size {n}) of shape {shape:?}: at most one \
             -1 and no other negative size"
        );
        assert!(
            if inferred == 1 {
                known > 0 && (n as isize) % known == 0
            } else {
                known == n as isize
            },
            "unflatten: sizes {sizes:?} don't multiply to {n}, the size of dim {dim} of shape \
             {shape:?}"
        );
        let mut new: Vec<isize> = shape[..d].iter().map(|&x| x as isize).collect();
        new.extend(sizes.iter().map(|&s| {
            if s == -1 {
                shape[d] as isize / known.max(1)
            } else {
                s
            }
        }));
        new.extend(shape[d + 1..].iter().map(|&x| x as isize));
        self.reshape(&new)
    }

    /// Removes axis `dim` if it has size 1 (`None`: all size-1 axes).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[2, 1, 2, 1, 2], DType::FLOAT32);
    /// assert_eq!(t.squeeze(None).shape(), vec![2, 2, 2]);
    /// assert_eq!(t.squeeze(Some(0)).shape(), vec![2, 1, 2, 1, 2]);
    /// assert_eq!(t.squeeze(Some(1)).shape(), vec![2, 2, 1, 2]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range (a 0-d tensor has only dim 0 or -1, as in torch).
    pub fn squeeze(&self, dim: Option<isize>) -> Tensor {
        let shape = self.shape();
        let new: Vec<isize> = match dim {
            None => shape
                .iter()
                .filter(|&&d| d != 1)
                .map(|&d| d as isize)
                .collect(),
            Some(d) => {
                // checked first: squeezing a dim a 0-d tensor does not have is an error
                let a = resolve_axis(d, shape.len(), "squeeze", &shape);
                if shape.is_empty() {
                    return self.clone();
                }
                if shape[a] != 1 {
                    return self.clone();
                }
                shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != a)
                    .map(|(_, &d)| d as isize)
                    .collect()
            }
        };
        self.reshape(&new)
    }

    /// Inserts a size-1 axis at `dim` (negative counts from the end of the result).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]);
    /// assert_eq!(t.unsqueeze(0).shape(), vec![1, 4]);
    /// assert_eq!(t.unsqueeze(1).shape(), vec![4, 1]);
    /// assert_eq!(t.unsqueeze(-1).to_vec::<i32>(), vec![1, 2, 3, 4]);
    /// ```
    pub fn unsqueeze(&self, dim: isize) -> Tensor {
        let shape = self.shape();
        let d = resolve_axis(dim, shape.len() + 1, "unsqueeze", &shape);
        let mut new: Vec<isize> = shape.iter().map(|&x| x as isize).collect();
        new.insert(d, 1);
        self.reshape(&new)
    }

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

    /// Basic slicing: for each leading axis a `(start, end, step)` range (negative indices count
    /// from the end, like Python; `step` must be positive).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 12, 1).reshape(&[3, 4]);
    /// // t[::2, 1::2] and t[-2:, :-1]
    /// assert_eq!(t.slice(&[(0, 3, 2), (1, 4, 2)]).to_vec::<i32>(), vec![1, 3, 9, 11]);
    /// assert_eq!(t.slice(&[(-2, 3, 1), (0, -1, 1)]).to_vec::<i32>(), vec![4, 5, 6, 8, 9, 10]);
    /// ```
    ///
    /// # Panics
    /// If a step is not positive or more ranges than axes are given.
    pub fn slice(&self, ranges: &[(isize, isize, usize)]) -> Tensor {
        let shape = self.shape();
        assert!(
            ranges.len() <= shape.len(),
            "slice: {} ranges for shape {shape:?}",
            ranges.len()
        );
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        let mut steps = vec![1usize; shape.len()];
        for (i, &(s, e, st)) in ranges.iter().enumerate() {
            assert!(
                st > 0,
                "slice: step must be positive, got {st} for axis {i}"
            );
            let n = shape[i] as isize;
            let clamp = |x: isize| (if x < 0 { x + n } else { x }).clamp(0, n) as usize;
            let (s, e) = (clamp(s), clamp(e));
            bounds[i] = (s, e.max(s));
            steps[i] = st;
        }
        let mut t = self.shrink(&bounds);
        if steps.iter().all(|&s| s == 1) {
            return t;
        }
        // strided: pad each axis to a multiple of its step, split it, keep the first of each group
        let sh = t.shape();
        let pads: Vec<(usize, usize)> = sh
            .iter()
            .zip(&steps)
            .map(|(&d, &s)| (0, d.div_ceil(s) * s - d))
            .collect();
        t = t.pad(&pads, 0.0);
        let mut split: Vec<isize> = Vec::new();
        for (&d, &s) in sh.iter().zip(&steps) {
            split.push(d.div_ceil(s) as isize);
            split.push(s as isize);
        }
        t = t.reshape(&split);
        let keep: Vec<(usize, usize)> = split
            .chunks(2)
            .flat_map(|c| [(0, c[0] as usize), (0, 1)])
            .collect();
        t = t.shrink(&keep);
        let out: Vec<isize> = split.iter().step_by(2).copied().collect();
        t.reshape(&out)
    }

    /// Alias of [`Tensor::reshape`] (PyTorch's and tinygrad's `view`).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1);
    /// assert_eq!(t.view(&[3, -1]).shape(), vec![3, 2]);
    /// ```
    pub fn view(&self, shape: &[isize]) -> Tensor {
        self.reshape(shape)
    }

    /// [`Tensor::reshape`] with tinygrad's `None` entries: `None` keeps the size of the axis at
    /// that position (`-1` still infers one size).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    /// assert_eq!(t.reshape_opt(&[None, Some(-1)]).shape(), vec![2, 12]);
    /// assert_eq!(t.reshape_opt(&[None, None, Some(2), Some(2)]).shape(), vec![2, 3, 2, 2]);
    /// ```
    ///
    /// # Panics
    /// If a `None` is at a position the tensor has no axis for, or as [`Tensor::reshape`].
    pub fn reshape_opt(&self, shape: &[Option<isize>]) -> Tensor {
        let old = self.shape();
        let new: Vec<isize> = shape
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some(s) => *s,
                None => *old.get(i).unwrap_or_else(|| {
                    panic!(
                        "reshape: None at position {i} of {shape:?} keeps an axis the shape \
                         {old:?} does not have"
                    )
                }) as isize,
            })
            .collect();
        self.reshape(&new)
    }

    /// Shrinks each axis to the first `shape[i]` elements (`None` keeps an axis) — tinygrad's
    /// `shrink_to`.
    ///
    /// # Panics
    /// If `shape` has another length than the tensor's or asks to grow an axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// assert_eq!(t.shrink_to(&[Some(1), None]).to_vec::<i32>(), vec![0, 1, 2]);
    /// ```
    pub fn shrink_to(&self, shape: &[Option<usize>]) -> Tensor {
        let cur = self.shape();
        assert!(
            shape.len() == cur.len(),
            "shrink_to: shape {shape:?} has {} axes, the tensor (shape {cur:?}) has {}",
            shape.len(),
            cur.len()
        );
        let bounds: Vec<(usize, usize)> = cur
            .iter()
            .zip(shape)
            .map(|(&c, s)| {
                let s = s.unwrap_or(c);
                assert!(
                    s <= c,
                    "shrink_to: can't grow axis of size {c} to {s} (shape {cur:?})"
                );
                (0, s)
            })
            .collect();
        self.shrink(&bounds)
    }

    /// Pads each axis with zeros at its end up to `shape[i]` (`None` keeps an axis) —
    /// tinygrad's `pad_to`.
    ///
    /// # Panics
    /// If `shape` has another length than the tensor's or asks to shrink an axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2], &[2]);
    /// assert_eq!(t.pad_to(&[Some(4)]).to_vec::<i32>(), vec![1, 2, 0, 0]);
    /// ```
    pub fn pad_to(&self, shape: &[Option<usize>]) -> Tensor {
        let cur = self.shape();
        assert!(
            shape.len() == cur.len(),
            "pad_to: shape {shape:?} has {} axes, the tensor (shape {cur:?}) has {}",
            shape.len(),
            cur.len()
        );
        let pads: Vec<(usize, usize)> = cur
            .iter()
            .zip(shape)
            .map(|(&c, s)| {
                let s = s.unwrap_or(c);
                assert!(
                    s >= c,
                    "pad_to: can't shrink axis of size {c} to {s} (shape {cur:?})"
                );
                (0, s - c)
            })
            .collect();
        self.pad(&pads, 0)
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

    /// A square matrix with `self` (1-D) on its diagonal and zeros elsewhere — tinygrad's
    /// `diag`.
    ///
    /// # Panics
    /// If `self` is not 1-D.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    /// assert_eq!(t.diag().to_vec::<i32>(), vec![1, 0, 0, 0, 2, 0, 0, 0, 3]);
    /// ```
    pub fn diag(&self) -> Tensor {
        let shape = self.shape();
        assert!(
            shape.len() == 1,
            "diag: expects a 1-D tensor, got shape {shape:?}"
        );
        let n = shape[0];
        self.unsqueeze(-1)
            .pad(&[(0, 0), (0, n)], 0)
            .flatten(0, -1)
            .shrink(&[(0, n * n)])
            .reshape(&[n as isize, n as isize])
    }

    /// The main diagonal of a square 2-D tensor (1-D) — tinygrad's `diagonal`.
    ///
    /// # Panics
    /// If `self` is not a square 2-D tensor.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 9, 1).reshape(&[3, 3]);
    /// assert_eq!(t.diagonal().to_vec::<i32>(), vec![0, 4, 8]);
    /// ```
    pub fn diagonal(&self) -> Tensor {
        // kept as it was (2-D square only); diagonal_with(0, 0, 1) is the general form
        let shape = self.shape();
        assert!(
            shape.len() == 2 && shape[0] == shape[1],
            "diagonal: only 2-D square tensors are supported, got shape {shape:?}"
        );
        let n = shape[0];
        self.flatten(0, -1)
            .pad(&[(0, n)], 0)
            .reshape(&[n as isize, n as isize + 1])
            .shrink(&[(0, n), (0, 1)])
            .reshape(&[n as isize])
    }

    /// The diagonal of `dim1` and `dim2` (torch's and tinygrad's `diagonal(offset, dim1,
    /// dim2)`): those two axes are removed and the diagonal becomes the last axis. `offset > 0`
    /// takes a diagonal above the main one, `offset < 0` one below; any rank, non-square
    /// matrices and negative dims work. An offset past the edge gives an empty last axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    /// let d = t.diagonal_with(1, 0, 2);
    /// assert_eq!((d.shape(), d.to_vec::<i32>()), (vec![3, 2], vec![1, 14, 5, 18, 9, 22]));
    /// assert_eq!(t.diagonal_with(-1, -1, -2).to_vec::<i32>(), vec![1, 6, 11, 13, 18, 23]);
    /// ```
    ///
    /// # Panics
    /// If a dim is out of range or `dim1` and `dim2` are the same axis.
    pub fn diagonal_with(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        let (a, b) = (
            resolve_axis(dim1, nd, "diagonal", &shape),
            resolve_axis(dim2, nd, "diagonal", &shape),
        );
        assert!(
            nd >= 2 && a != b,
            "diagonal: dim1 {dim1} and dim2 {dim2} are the same dimension (or fewer than 2 \
             dims) for shape {shape:?}"
        );
        let mut order: Vec<isize> = (0..nd)
            .filter(|&i| i != a && i != b)
            .map(|i| i as isize)
            .collect();
        order.extend([a as isize, b as isize]);
        let x = self.permute(&order);
        let xs = x.shape();
        let (r, c) = (xs[nd - 2], xs[nd - 1]);
        let mut bounds: Vec<(usize, usize)> = xs.iter().map(|&d| (0, d)).collect();
        let off = offset.unsigned_abs();
        // shift the diagonal onto the main one: drop `offset` columns (or `-offset` rows)
        if offset >= 0 {
            bounds[nd - 1] = (off.min(c), c);
        } else {
            bounds[nd - 2] = (off.min(r), r);
        }
        let x = x.shrink(&bounds);
        let xs = x.shape();
        let n = xs[nd - 2].min(xs[nd - 1]);
        let batch: Vec<isize> = xs[..nd - 2].iter().map(|&d| d as isize).collect();
        if n == 0 {
            let mut out = batch;
            out.push(0);
            return x.reshape(&out);
        }
        // the n x n corner, flattened and padded to n x (n + 1): column 0 is the diagonal
        let mut corner: Vec<(usize, usize)> = xs[..nd - 2].iter().map(|&d| (0, d)).collect();
        corner.extend([(0, n), (0, n)]);
        let mut flat = batch.clone();
        flat.push((n * n) as isize);
        let mut pad = vec![(0usize, 0usize); nd - 1];
        pad[nd - 2] = (0, n);
        let mut grid = batch.clone();
        grid.extend([n as isize, n as isize + 1]);
        let mut first: Vec<(usize, usize)> = xs[..nd - 2].iter().map(|&d| (0, d)).collect();
        first.extend([(0, n), (0, 1)]);
        let mut out = batch;
        out.push(n as isize);
        x.shrink(&corner)
            .reshape(&flat)
            .pad(&pad, 0)
            .reshape(&grid)
            .shrink(&first)
            .reshape(&out)
    }
}

/// An integer usable as a size in [`Tensor::reshape`] and [`Tensor::expand`]: the signed types
/// (where `-1` means "inferred" / "kept") and the unsigned ones [`Tensor::shape`] returns.
pub trait ShapeDim: Copy + std::fmt::Debug {
    /// The size as an `isize`.
    ///
    /// # Panics
    /// If it does not fit (an unsigned size above `isize::MAX`), naming `op`.
    fn to_isize(self, op: &str) -> isize;
}

macro_rules! impl_shape_dim {
    ($($t:ty),*) => {$(
        impl ShapeDim for $t {
            fn to_isize(self, op: &str) -> isize {
                isize::try_from(self).unwrap_or_else(|_| {
                    panic!("{op}: size {self} does not fit in isize")
                })
            }
        }
    )*};
}
impl_shape_dim!(isize, i64, i32, i16, i8, usize, u64, u32, u16, u8);
