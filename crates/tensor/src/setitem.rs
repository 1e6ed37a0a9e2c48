//! [`Tensor::setitem`] (tinygrad's `__setitem__`): writing a value into the part of a tensor that
//! an index selects.
//!
//! The tensor takes a new lazy value, `where(selected, value placed there, old value)`, like
//! tinygrad's `_getitem(indices, v)`:
//! - basic indices (integers, slices with any step, new axes, an ellipsis) select a strided box:
//!   the value is moved into place by the inverse of getitem's movement ops (reshape, un-stride
//!   by padding, flip, pad to the full shape), and the mask is the same ops applied to `true`;
//! - with index tensors, each output position looks up the last selected position that maps to
//!   it (a one-hot reduce, as tinygrad's advanced setitem); index values out of range write
//!   nothing.

use tinygrad_dtype::DType;

use crate::Tensor;
use crate::elementwise::{IntoOperand, Operand, broadcast_shape};
use crate::indexing::{Idx, IndexError, Kind, Parsed};

impl Tensor {
    /// Writes `value` into the elements `indices` select (tinygrad's `t[indices] = value`):
    /// any index [`Tensor::getitem`] takes. `value` is a scalar (cast to this tensor's dtype) or
    /// a tensor of the same dtype whose shape broadcasts to the selection's. With index tensors
    /// that select a position more than once, the last write wins (as numpy); index values out
    /// of range write nothing.
    ///
    /// Like [`Tensor::assign`] the update is lazy and changes what every clone of this handle
    /// reads. When a gradient can flow from this tensor or `value` (they are, or are computed
    /// from, tensors that require gradients), the new value is differentiable
    /// (the gradient flows to `value` at the selected positions and to the old value
    /// elsewhere), as in tinygrad; otherwise it is an assignment (detached). Returns `self`.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::zeros(&[3, 4], tinygrad_tensor::DType::INT32);
    /// t.setitem(&[Idx::Int(1)], 7);
    /// t.setitem(&[Idx::all(), Idx::slice(Some(0), None, 2)], Tensor::from_vec(vec![1i32, 2]));
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 0, 2, 0, 1, 7, 2, 7, 1, 0, 2, 0]);
    /// let rows = Tensor::from_vec(vec![0i32, 2]);
    /// t.setitem(&[rows.into(), Idx::Int(-1)], 9);
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 0, 2, 9, 1, 7, 2, 7, 1, 0, 2, 9]);
    /// ```
    ///
    /// # Panics
    /// Where [`Tensor::try_setitem`] returns an error.
    pub fn setitem(&self, indices: &[Idx], value: impl IntoOperand) -> &Tensor {
        self.try_setitem(indices, value)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tensor::setitem`], returning an [`IndexError`] for an index [`Tensor::try_getitem`]
    /// rejects, a value tensor of another dtype or device, or a value whose shape does not
    /// broadcast to the selection's.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Idx, Tensor};
    /// let t = Tensor::zeros(&[2, 2], DType::FLOAT32);
    /// assert!(t.try_setitem(&[Idx::Int(2)], 1.0).is_err());
    /// assert!(t.try_setitem(&[Idx::Int(0)], Tensor::ones(&[3], DType::FLOAT32)).is_err());
    /// assert!(t.try_setitem(&[Idx::Int(0)], Tensor::ones(&[2], DType::INT32)).is_err());
    /// ```
    pub fn try_setitem(
        &self,
        indices: &[Idx],
        value: impl IntoOperand,
    ) -> Result<&Tensor, IndexError> {
        let shape = self.shape();
        let parsed = self.parse_indices(indices)?;
        let selection = self.try_getitem(indices)?.shape();
        let value = match value.into_operand() {
            Operand::Tensor(t) => {
                if t.dtype() != self.dtype() || t.device() != self.device() {
                    return Err(IndexError(format!(
                        "setitem: value is {} on {}, the tensor (shape {shape:?}) is {} on {}: \
                         cast or move the value first",
                        t.dtype(),
                        t.device(),
                        self.dtype(),
                        self.device()
                    )));
                }
                t
            }
            Operand::Const(c) => Tensor::full_on(&[], c, self.dtype(), self.device()),
        };
        let vshape = value.shape();
        if broadcast_shape(&vshape, &selection).as_deref() != Some(&selection[..]) {
            return Err(IndexError(format!(
                "setitem: value of shape {vshape:?} does not broadcast to the selection's shape \
                 {selection:?} (tensor shape {shape:?})"
            )));
        }
        let value = value.broadcast_to(&selection);
        let advanced = parsed.iter().any(|p| matches!(p.kind, Kind::Tensor(_)));
        let new = if advanced {
            self.set_advanced(indices, &value, &selection)?
        } else {
            self.set_basic(&parsed, &value)
        };
        if crate::autograd::needs_grad(self) || crate::autograd::needs_grad(&value) {
            // differentiable: this tensor takes the new graph (on a view, its base is not
            // written: an assignment, which writes through, would cut the gradient)
            self.replace(&new);
        } else {
            self.assign(&new.detach());
        }
        Ok(self)
    }

    /// The new value for basic indices: `value` (the selection's shape) moved into place by the
    /// inverse of getitem's movement ops.
    fn set_basic(&self, parsed: &[Parsed], value: &Tensor) -> Tensor {
        let shape = self.shape();
        let mops: Vec<&Parsed> = parsed
            .iter()
            .filter(|p| !matches!(p.kind, Kind::NewAxis))
            .collect();
        // per input dim: (selected length, stride, boundary)
        let dims: Vec<(usize, usize, (usize, usize))> = mops
            .iter()
            .map(|p| {
                let (b0, b1) = p.boundary;
                let st = p.stride.unsigned_abs();
                ((b1 - b0).div_ceil(st), st, p.boundary)
            })
            .collect();
        let flips: Vec<isize> = mops
            .iter()
            .enumerate()
            .filter(|(_, p)| p.stride < 0)
            .map(|(i, _)| i as isize)
            .collect();
        let place = |t: &Tensor, fill: bool| -> Tensor {
            let lens: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let mut x = t.reshape_exact(&lens);
            if dims.iter().any(|d| d.1 != 1) {
                // un-stride: each element followed by `stride - 1` fill elements, then cut to
                // the boundary's length
                let split: Vec<usize> = dims.iter().flat_map(|d| [d.0, 1]).collect();
                let pads: Vec<(usize, usize)> =
                    dims.iter().flat_map(|d| [(0, 0), (0, d.1 - 1)]).collect();
                let spread: Vec<usize> = dims.iter().map(|d| d.0 * d.1).collect();
                let cut: Vec<(usize, usize)> = dims.iter().map(|d| (0, d.2.1 - d.2.0)).collect();
                x = x
                    .reshape_exact(&split)
                    .pad(&pads, fill)
                    .reshape_exact(&spread)
                    .shrink(&cut);
            }
            let around: Vec<(usize, usize)> = dims
                .iter()
                .zip(&shape)
                .map(|(d, &n)| (d.2.0, n - d.2.1))
                .collect();
            x.flip(&flips).pad(&around, fill)
        };
        let placed = place(value, false);
        let ones =
            Tensor::full_on(&[], true, DType::BOOL, self.device()).broadcast_to(&value.shape());
        let mask = place(&ones, false);
        mask.where_(placed, self)
    }

    /// The new value with index tensors: each position takes the last selected element that
    /// maps to it (`arange + 1` through getitem, so out-of-range index values, which getitem
    /// reads as 0, select nothing).
    fn set_advanced(
        &self,
        indices: &[Idx],
        value: &Tensor,
        selection: &[usize],
    ) -> Result<Tensor, IndexError> {
        let shape = self.shape();
        let (n, m) = (self.numel(), selection.iter().product::<usize>());
        if m == 0 || n == 0 {
            return Ok(self.clone());
        }
        let dev = self.device();
        let position = Tensor::arange_on(1.0, n as f64 + 1.0, 1.0, DType::INT32, dev)
            .reshape_exact(&shape)
            .try_getitem(indices)?
            .reshape_exact(&[m, 1]);
        let targets =
            Tensor::arange_on(1.0, n as f64 + 1.0, 1.0, DType::INT32, dev).reshape_exact(&[1, n]);
        let writers =
            Tensor::arange_on(1.0, m as f64 + 1.0, 1.0, DType::INT32, dev).reshape_exact(&[m, 1]);
        // per position: 1 + the last selected element written there, or 0
        let last = position.eq(targets).where_(writers, 0).max(0isize);
        let taken = value.reshape_exact(&[m]).gather(0, &last.sub(1).maximum(0));
        let flat = self.reshape_exact(&[n]);
        Ok(last.gt(0).where_(taken, flat).reshape_exact(&shape))
    }
}
