//! The primitive views: `reshape`, `permute`, `expand`, `pad`, `shrink`, `flip`.

use tinygrad_dtype::ConstValue;
use tinygrad_uop::{Arg, Ops};

use super::{ShapeDim, resolve_axis};
use crate::Tensor;

impl Tensor {
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
}
