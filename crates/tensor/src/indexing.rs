//! Indexing and selection, built from movement ops, comparisons and sums as tinygrad does:
//! `__getitem__` ([`Tensor::getitem`] with [`Idx`]), [`Tensor::gather`],
//! [`Tensor::masked_fill`], [`Tensor::tril`]/[`Tensor::triu`], and [`Tensor::roll`],
//! [`Tensor::repeat`], [`Tensor::split`], [`Tensor::chunk`].
//!
//! Basic indices (integers, slices with any step, `None`, `...`) become views: shrink, flip,
//! then pad + reshape + shrink for strides, and a reshape that drops integer-indexed dims and
//! inserts new axes. Tensor ("advanced") indices compare the index values with an `arange`
//! (a one-hot mask) and sum the masked input over the indexed dim, like tinygrad, so an index
//! *value* out of range selects nothing and gives `0` (tinygrad's documented behaviour;
//! numpy would raise). Out-of-range *integer* indices are an error.

use std::fmt;
use std::ops::{Range, RangeFrom, RangeFull, RangeTo};

use tinygrad_dtype::{ConstValue, DType};

use crate::elementwise::broadcast_shape;
use crate::movement::resolve_axis;
use crate::{IntoOperand, Tensor};

/// One index of a [`Tensor::getitem`] call (one entry of a Python index tuple).
#[derive(Clone, Debug)]
pub enum Idx {
    /// `t[i]`: selects one position and removes the dim (negative counts from the end).
    Int(isize),
    /// `t[start:stop:step]`: Python slice semantics (`None` bounds are the defaults for the
    /// step's sign, out-of-range bounds are clamped, a negative step walks backwards).
    Slice {
        /// First position (`None`: the start for a positive step, the end for a negative one).
        start: Option<isize>,
        /// Position to stop before (`None`: past the end in the step's direction).
        stop: Option<isize>,
        /// Stride, non-zero.
        step: isize,
    },
    /// `t[None]`: inserts a new axis of size 1.
    NewAxis,
    /// `t[...]`: as many full slices as needed to index every dim (at most one per index).
    Ellipsis,
    /// An integer index tensor (advanced indexing; negative values count from the end, values
    /// out of range select nothing and give 0).
    Tensor(Tensor),
    /// A list of integers, used like an index tensor (`t[[2, 0, 1]]`).
    List(Vec<isize>),
    /// `t[start:stop]` with bounds that may be bound variables (tinygrad's slicing with a
    /// `sint`, as a KV cache's `cache[:, 0:start_pos + seqlen]`): non-negative, step 1, within
    /// the dim at their bound values; the result's size along the dim is symbolic.
    SymSlice {
        /// First position.
        start: tinygrad_uop::SInt,
        /// Position to stop before.
        stop: tinygrad_uop::SInt,
    },
}

impl Idx {
    /// The full slice `:`.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]);
    /// assert_eq!(t.getitem(&[Idx::all(), Idx::Int(1)]).to_vec::<i32>(), vec![1, 4]);
    /// ```
    pub fn all() -> Idx {
        Idx::Slice {
            start: None,
            stop: None,
            step: 1,
        }
    }

    /// `start:stop:step`.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::from_vec(vec![0i32, 1, 2, 3, 4, 5]);
    /// assert_eq!(t.getitem(&[Idx::slice(Some(1), None, 2)]).to_vec::<i32>(), vec![1, 3, 5]);
    /// let r = t.getitem(&[Idx::slice(Some(-2), None, -1)]);
    /// assert_eq!(r.to_vec::<i32>(), vec![4, 3, 2, 1, 0]);
    /// ```
    pub fn slice(start: Option<isize>, stop: Option<isize>, step: isize) -> Idx {
        Idx::Slice { start, stop, step }
    }

    /// `start:stop`.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::from_vec(vec![0i32, 1, 2, 3, 4, 5]);
    /// assert_eq!(t.getitem(&[Idx::range(1, 4)]).to_vec::<i32>(), vec![1, 2, 3]);
    /// assert_eq!(t.getitem(&[Idx::range(-2, 6)]).to_vec::<i32>(), vec![4, 5]);
    /// ```
    pub fn range(start: isize, stop: isize) -> Idx {
        Idx::slice(Some(start), Some(stop), 1)
    }

    /// `::step`.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::from_vec(vec![0i32, 1, 2, 3, 4, 5]);
    /// assert_eq!(t.getitem(&[Idx::step(3)]).to_vec::<i32>(), vec![0, 3]);
    /// assert_eq!(t.getitem(&[Idx::step(-2)]).to_vec::<i32>(), vec![5, 3, 1]);
    /// ```
    pub fn step(step: isize) -> Idx {
        Idx::slice(None, None, step)
    }
}

impl From<isize> for Idx {
    fn from(i: isize) -> Idx {
        Idx::Int(i)
    }
}

impl From<Tensor> for Idx {
    fn from(t: Tensor) -> Idx {
        Idx::Tensor(t)
    }
}

impl From<&Tensor> for Idx {
    fn from(t: &Tensor) -> Idx {
        Idx::Tensor(t.clone())
    }
}

impl From<Vec<isize>> for Idx {
    fn from(v: Vec<isize>) -> Idx {
        Idx::List(v)
    }
}

impl From<Range<isize>> for Idx {
    fn from(r: Range<isize>) -> Idx {
        Idx::range(r.start, r.end)
    }
}

impl From<RangeFrom<isize>> for Idx {
    fn from(r: RangeFrom<isize>) -> Idx {
        Idx::slice(Some(r.start), None, 1)
    }
}

impl From<RangeTo<isize>> for Idx {
    fn from(r: RangeTo<isize>) -> Idx {
        Idx::slice(None, Some(r.end), 1)
    }
}

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Idx {
        Idx::all()
    }
}

/// A bad index for [`Tensor::try_getitem`] (tinygrad raises `IndexError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexError(pub String);

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IndexError {}

/// The sizes for [`Tensor::split`]: one chunk size, or the size of every piece.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitSizes {
    /// Equal pieces of this size (the last one may be smaller).
    Size(usize),
    /// Pieces of these sizes (they must add up to the dim's size).
    Sizes(Vec<usize>),
}

impl From<usize> for SplitSizes {
    fn from(s: usize) -> SplitSizes {
        SplitSizes::Size(s)
    }
}

impl From<Vec<usize>> for SplitSizes {
    fn from(v: Vec<usize>) -> SplitSizes {
        SplitSizes::Sizes(v)
    }
}

impl From<&[usize]> for SplitSizes {
    fn from(v: &[usize]) -> SplitSizes {
        SplitSizes::Sizes(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for SplitSizes {
    fn from(v: [usize; N]) -> SplitSizes {
        SplitSizes::Sizes(v.to_vec())
    }
}

/// What one index became after parsing (tinygrad's `indices_parsed`).
pub(crate) enum Kind {
    Int,
    Slice,
    NewAxis,
    Tensor(Tensor),
}

pub(crate) struct Parsed {
    pub(crate) kind: Kind,
    pub(crate) size: usize,
    pub(crate) boundary: (usize, usize),
    pub(crate) stride: isize,
}

/// Python's `slice(start, stop, step).indices(len)`.
fn slice_indices(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    len: usize,
) -> (isize, isize) {
    let n = len as isize;
    let (lower, upper) = if step < 0 { (-1, n - 1) } else { (0, n) };
    let clamp = |v: Option<isize>, default: isize| match v {
        None => default,
        Some(v) => {
            let v = if v < 0 { v + n } else { v };
            v.clamp(lower, upper)
        }
    };
    let s = clamp(start, if step < 0 { upper } else { lower });
    let e = clamp(stop, if step < 0 { lower } else { upper });
    (s, e)
}

fn err<T>(msg: String) -> Result<T, IndexError> {
    Err(IndexError(msg))
}

impl Tensor {
    /// `self == arange(num_classes)` along axis `dim` of the result (tinygrad's
    /// `_one_hot_along_dim`; `self` has size 1 there). Bool.
    fn idx_one_hot(&self, num_classes: usize, dim: isize) -> Tensor {
        let shape = self.shape();
        let d = resolve_axis(dim, shape.len(), "one_hot", &shape);
        let mut rshape = vec![num_classes];
        rshape.extend(std::iter::repeat_n(1, shape.len() - d - 1));
        let ramp = Tensor::nn_ramp(num_classes, DType::INT32, self.device()).reshape_exact(&rshape);
        self.eq(&ramp)
    }

    /// tinygrad's `__getitem__`: indexes with integers, slices (any step), new axes, an
    /// ellipsis and index tensors in any combination, with tinygrad's result shapes. The indices
    /// not given are full slices.
    ///
    /// Integer indices remove their dim. Index tensors (and [`Idx::List`]) broadcast together;
    /// their broadcast shape replaces the indexed dims at the position of the first one, or
    /// goes first when the tensor indices are not adjacent (as in tinygrad, integer indices do
    /// not count here, unlike numpy: they are removed before). Index *values* out of range
    /// select nothing: those outputs are 0.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::arange(0, 12, 1).reshape(&[3, 4]);
    /// assert_eq!(t.getitem(&[Idx::Int(1), Idx::Int(2)]).to_vec::<i32>(), vec![6]);
    /// assert_eq!(t.getitem(&[Idx::range(0, 2), Idx::step(2)]).to_vec::<i32>(), vec![0, 2, 4, 6]);
    /// let (r, c) = (Tensor::from_vec(vec![2i32, 0, 1]), Tensor::from_vec(vec![1i32, 2, 3]));
    /// assert_eq!(t.getitem(&[r.into(), c.into()]).to_vec::<i32>(), vec![9, 2, 7]);
    /// assert_eq!(t.getitem(&[Idx::all(), Idx::NewAxis]).shape(), vec![3, 1, 4]);
    /// // out-of-range index values give 0
    /// let t = Tensor::from_vec(vec![1i32, 2, 3]);
    /// let i = Tensor::from_vec(vec![4i32, 3, 2]);
    /// assert_eq!(t.getitem(&[i.into()]).to_vec::<i32>(), vec![0, 0, 3]);
    /// ```
    ///
    /// # Panics
    /// Where [`Tensor::try_getitem`] returns an error (e.g. an integer index out of range).
    pub fn getitem(&self, indices: &[Idx]) -> Tensor {
        self.try_getitem(indices).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Tensor::getitem`], returning an [`IndexError`] for an integer index out of range, a
    /// zero step, more than one ellipsis, too many indices, a non-integer index tensor, or index
    /// tensors whose shapes don't broadcast.
    ///
    /// ```
    /// use tinygrad_tensor::{Idx, Tensor};
    /// let t = Tensor::arange(0, 12, 1).reshape(&[3, 4]);
    /// assert!(t.try_getitem(&[Idx::Int(3)]).is_err());
    /// assert_eq!(t.try_getitem(&[Idx::Int(-1)]).unwrap().to_vec::<i32>(), vec![8, 9, 10, 11]);
    /// ```
    pub fn try_getitem(&self, indices: &[Idx]) -> Result<Tensor, IndexError> {
        if indices.iter().any(|i| matches!(i, Idx::SymSlice { .. })) {
            return self.sym_getitem(indices);
        }
        if self.uop().has_sym()
            && let Some(r) = self.sym_negative_getitem(indices)
        {
            return r;
        }
        let parsed = self.parse_indices(indices)?;
        // movement ops: shrink, flip negative strides, apply strides
        let mops: Vec<&Parsed> = parsed
            .iter()
            .filter(|p| !matches!(p.kind, Kind::NewAxis))
            .collect();
        let mut x = self.clone();
        if !mops.is_empty() {
            let bounds: Vec<(usize, usize)> = mops.iter().map(|m| m.boundary).collect();
            let flips: Vec<isize> = mops
                .iter()
                .enumerate()
                .filter(|(_, m)| m.stride < 0)
                .map(|(i, _)| i as isize)
                .collect();
            x = x.shrink(&bounds).flip(&flips);
            let strides: Vec<usize> = mops.iter().map(|m| m.stride.unsigned_abs()).collect();
            if strides.iter().any(|&s| s != 1) {
                let sh = x.shape();
                let pads: Vec<(usize, usize)> = sh
                    .iter()
                    .zip(&strides)
                    .map(|(&s, &st)| (0, s.div_ceil(st) * st - s))
                    .collect();
                x = x.pad(&pads, 0);
                let split: Vec<usize> = sh
                    .iter()
                    .zip(&strides)
                    .flat_map(|(&s, &st)| [s.div_ceil(st), st])
                    .collect();
                x = x.reshape_exact(&split);
                let keep: Vec<(usize, usize)> =
                    split.chunks(2).flat_map(|c| [(0, c[0]), (0, 1)]).collect();
                let out: Vec<usize> = split.iter().step_by(2).copied().collect();
                x = x.shrink(&keep).reshape_exact(&out);
            }
        }

        // new axes (size 1) in, integer-indexed dims out
        let x_dims: Vec<&Parsed> = parsed
            .iter()
            .filter(|p| !matches!(p.kind, Kind::Int))
            .collect();
        let sizes: Vec<usize> = x_dims.iter().map(|p| p.size).collect();
        let x = x.reshape_exact(&sizes);

        // tensor indexing
        let tops: Vec<(usize, Tensor)> = x_dims
            .iter()
            .enumerate()
            .filter_map(|(d, p)| match &p.kind {
                Kind::Tensor(t) => Some((d, t.clone())),
                _ => None,
            })
            .collect();
        if tops.is_empty() {
            return Ok(x);
        }
        x.tensor_index(&tops)
    }

    /// Negative slice bounds and integer indices on a symbolic size count from its end, as
    /// tinygrad resolves them against the size: `t[:, :vi][:, -1:]` is `vi-1:vi`, one element
    /// for every value of `vi` (resolved against the bound value, the start would be a constant
    /// and the size `vi - (i-1)`). Applied first, as one `shrink_sym`; the other indices then
    /// act on the result. `None` where there is no such index, or one past the start of the
    /// size (Python clamps it) or past the start of its smallest value (its kernels could not
    /// serve every value): resolved against the bound value as for a concrete size.
    fn sym_negative_getitem(&self, indices: &[Idx]) -> Option<Result<Tensor, IndexError>> {
        use tinygrad_uop::SInt;
        let sym = self.sym_shape();
        let ndim = sym.len();
        let n_ell = indices
            .iter()
            .filter(|i| matches!(i, Idx::Ellipsis))
            .count();
        let num = indices
            .iter()
            .filter(|i| !matches!(i, Idx::Ellipsis | Idx::NewAxis))
            .count();
        if n_ell > 1 || num > ndim {
            return None; // the plain parser reports these
        }
        let mut bounds: Vec<(SInt, SInt)> =
            sym.iter().map(|d| (SInt::Const(0), d.clone())).collect();
        let mut rest = Vec::with_capacity(indices.len());
        let (mut any, mut dim) = (false, 0);
        for i in indices {
            match i {
                Idx::Ellipsis => {
                    dim += ndim - num;
                    rest.push(Idx::Ellipsis);
                    continue;
                }
                Idx::NewAxis => {
                    rest.push(Idx::NewAxis);
                    continue;
                }
                _ => {}
            }
            let (s, n) = (&sym[dim], sym[dim].bound_value() as isize);
            // the smallest value of the size: a bound counted from its end must fit it, else
            // the kernels could not serve every value (resolved against the bound value then)
            let least = match s {
                SInt::Const(c) => *c as i64,
                SInt::Sym(u) => u.vmin(),
            };
            // a bound of Python's slice on this size: negative from its end
            let at = |x: isize| -> Option<SInt> {
                if x < 0 {
                    (x >= -n && x as i64 >= -least).then(|| s - x.unsigned_abs())
                } else if x >= n {
                    Some(s.clone())
                } else {
                    Some(SInt::Const(x as usize))
                }
            };
            match i {
                Idx::Int(k) if *k < 0 && s.is_symbolic() => {
                    let b = at(*k)?;
                    bounds[dim] = (b.clone(), &b + 1);
                    rest.push(Idx::Int(0));
                    any = true;
                }
                Idx::Slice {
                    start,
                    stop,
                    step: 1,
                } if s.is_symbolic()
                    && (start.is_some_and(|x| x < 0) || stop.is_some_and(|x| x < 0)) =>
                {
                    let b = start.map_or(Some(SInt::Const(0)), at)?;
                    let e = stop.map_or(Some(s.clone()), at)?;
                    if b.bound_value() > e.bound_value() {
                        return None;
                    }
                    bounds[dim] = (b, e);
                    rest.push(Idx::all());
                    any = true;
                }
                i => rest.push(i.clone()),
            }
            dim += 1;
        }
        any.then(|| self.shrink_sym(&bounds).try_getitem(&rest))
    }

    /// `getitem` with symbolic slices: they are applied first, as one `shrink_sym` (a full slice
    /// on every other dim), then the other indices on the result, each symbolic slice now `:`.
    fn sym_getitem(&self, indices: &[Idx]) -> Result<Tensor, IndexError> {
        let shape = self.shape();
        let ndim = shape.len();
        let n_ell = indices
            .iter()
            .filter(|i| matches!(i, Idx::Ellipsis))
            .count();
        let n_new = indices.iter().filter(|i| matches!(i, Idx::NewAxis)).count();
        let num = indices.len() - n_ell - n_new;
        if n_ell > 1 || num > ndim {
            // the plain parser reports these
            let plain: Vec<Idx> = indices
                .iter()
                .map(|i| match i {
                    Idx::SymSlice { .. } => Idx::all(),
                    i => i.clone(),
                })
                .collect();
            return self.parse_indices(&plain).map(|_| self.clone());
        }
        let mut bounds: Vec<(tinygrad_uop::SInt, tinygrad_uop::SInt)> = self
            .sym_shape()
            .into_iter()
            .map(|d| (tinygrad_uop::SInt::Const(0), d))
            .collect();
        let mut rest = Vec::with_capacity(indices.len());
        let mut dim = 0;
        for i in indices {
            match i {
                Idx::Ellipsis => {
                    dim += ndim - num;
                    rest.push(Idx::Ellipsis);
                }
                Idx::NewAxis => rest.push(Idx::NewAxis),
                Idx::SymSlice { start, stop } => {
                    let (b, e) = (start.bound_value(), stop.bound_value());
                    // (the kernels serve every value of the variables: the largest must fit)
                    // (a symbolic size: its largest value)
                    let most = self.sym_shape()[dim].max_value();
                    if b > e || e > shape[dim] || stop.max_value() > most {
                        return err(format!(
                            "getitem: slice {start}:{stop} ({b}:{e}) is outside dim {dim} of size {} (shape {shape:?})",
                            shape[dim]
                        ));
                    }
                    bounds[dim] = (start.clone(), stop.clone());
                    rest.push(Idx::all());
                    dim += 1;
                }
                i => {
                    rest.push(i.clone());
                    dim += 1;
                }
            }
        }
        self.shrink_sym(&bounds).try_getitem(&rest)
    }

    /// tinygrad's index parsing: the ellipsis expanded, then one [`Parsed`] per index (new axes
    /// included), with its kind, result size, boundary in the input and stride.
    pub(crate) fn parse_indices(&self, indices: &[Idx]) -> Result<Vec<Parsed>, IndexError> {
        let shape = self.shape();
        let ndim = shape.len();
        // _normalize_indices: expand the ellipsis (or pad at the end) with full slices
        let n_ell = indices
            .iter()
            .filter(|i| matches!(i, Idx::Ellipsis))
            .count();
        if n_ell > 1 {
            return err(format!(
                "getitem: an index can only have a single ellipsis (got {n_ell}) for shape {shape:?}"
            ));
        }
        let n_new = indices.iter().filter(|i| matches!(i, Idx::NewAxis)).count();
        let num = indices.len() - n_ell - n_new;
        if num > ndim {
            return err(format!(
                "getitem: too many indices ({num}) for shape {shape:?} ({ndim} dims)"
            ));
        }
        let mut idx: Vec<Idx> = indices.to_vec();
        let fill = idx
            .iter()
            .position(|i| matches!(i, Idx::Ellipsis))
            .unwrap_or(idx.len());
        idx.splice(
            fill..fill + n_ell,
            std::iter::repeat_n(Idx::all(), ndim - num),
        );

        // parse every index
        let mut parsed: Vec<Parsed> = Vec::with_capacity(idx.len());
        let mut dim = 0;
        for index in idx {
            let mut size = if matches!(index, Idx::NewAxis) {
                1
            } else {
                shape[dim]
            };
            let mut boundary = (0, size);
            let mut stride = 1;
            let kind = match index {
                Idx::Tensor(t) => {
                    if !t.dtype().is_int() {
                        return err(format!(
                            "getitem: index tensor dtype {} is not supported (shape {:?}, indexing dim {dim} of shape {shape:?}); use an integer dtype",
                            t.dtype(),
                            t.shape()
                        ));
                    }
                    let t = t.to(self.device());
                    // negative values count from the end
                    Kind::Tensor(t.lt(0).where_(t.add(size as i64), &t))
                }
                Idx::List(v) => {
                    let n = size as isize;
                    let vals: Vec<i32> = v
                        .iter()
                        .map(|&i| (if i < 0 { i + n } else { i }) as i32)
                        .collect();
                    Kind::Tensor(Tensor::from_slice_on(&vals, &[vals.len()], self.device()))
                }
                Idx::Int(i) => {
                    let n = size as isize;
                    if i >= n || i < -n {
                        return err(format!(
                            "getitem: index {i} is out of bounds for dim {dim} with size {size} (shape {shape:?})"
                        ));
                    }
                    let i = (if i < 0 { i + n } else { i }) as usize;
                    boundary = (i, i + 1);
                    Kind::Int
                }
                Idx::Slice { start, stop, step } => {
                    if step == 0 {
                        return err(format!(
                            "getitem: slice step cannot be 0 (dim {dim} of shape {shape:?})"
                        ));
                    }
                    let (s, e) = slice_indices(start, stop, step, size);
                    let (b0, b1) = if step * (e - s) < 0 {
                        (0, 0)
                    } else if step < 0 {
                        (e + 1, s + 1)
                    } else {
                        (s, e)
                    };
                    boundary = (b0 as usize, b1 as usize);
                    stride = step;
                    size = (b1 - b0).unsigned_abs().div_ceil(step.unsigned_abs());
                    Kind::Slice
                }
                Idx::NewAxis => Kind::NewAxis,
                Idx::Ellipsis => unreachable!("the ellipsis was expanded above"),
                Idx::SymSlice { start, stop } => {
                    // (getitem applies them before parsing; other users of the parser don't
                    // take them)
                    return err(format!(
                        "symbolic slice {start}:{stop} (dim {dim} of shape {shape:?}) is supported by getitem only"
                    ));
                }
            };
            if !matches!(kind, Kind::NewAxis) {
                dim += 1;
            }
            parsed.push(Parsed {
                kind,
                size,
                boundary,
                stride,
            });
        }
        Ok(parsed)
    }

    /// The advanced-indexing part of `_getitem`: `tops` are `(dim, index)` pairs into `self`,
    /// index values already non-negative where in range.
    fn tensor_index(&self, tops: &[(usize, Tensor)]) -> Result<Tensor, IndexError> {
        let xs = self.shape();
        let xn = xs.len();
        let dims: Vec<usize> = tops.iter().map(|(d, _)| *d).collect();
        let d0 = dims[0];
        let mut big: Vec<usize> = tops[0].1.shape();
        for (_, t) in &tops[1..] {
            big = broadcast_shape(&big, &t.shape()).ok_or_else(|| {
                IndexError(format!(
                    "getitem: cannot broadcast index tensor shapes {:?} (indexing shape {xs:?})",
                    tops.iter().map(|(_, t)| t.shape()).collect::<Vec<_>>()
                ))
            })?;
        }
        let consecutive = dims.iter().enumerate().all(|(i, &d)| d == d0 + i);

        // consecutive tensor indices: one linear index into the merged dims instead of one mask
        // per dim
        if dims.len() > 1 && consecutive {
            let ishp: Vec<usize> = dims.iter().map(|&d| xs[d]).collect();
            let strides: Vec<usize> = (0..dims.len())
                .map(|i| ishp[i + 1..].iter().product())
                .collect();
            let mut linear: Option<Tensor> = None;
            let mut valid: Option<Tensor> = None;
            for (((_, t), &s), &n) in tops.iter().zip(&strides).zip(&ishp) {
                let tb = t.broadcast_to(&big);
                let term = tb.mul(s as i64);
                linear = Some(match linear {
                    None => term,
                    Some(l) => l + term,
                });
                let ok = tb.ge(0).logical_and(&tb.lt(n as i64));
                valid = Some(match valid {
                    None => ok,
                    Some(v) => v.logical_and(&ok),
                });
            }
            let (linear, valid) = (
                linear.expect("two or more indices"),
                valid.expect("two or more indices"),
            );
            let dlast = dims[dims.len() - 1];
            let (pre, post) = (&xs[..d0], &xs[dlast + 1..]);
            let mut merged = pre.to_vec();
            merged.push(ishp.iter().product());
            merged.extend_from_slice(post);
            let mut sub: Vec<Idx> = vec![Idx::all(); pre.len()];
            sub.push(Idx::Tensor(valid.where_(&linear, 0)));
            let x = self.reshape_exact(&merged).try_getitem(&sub)?;
            let mut vshape = vec![1; pre.len()];
            vshape.extend_from_slice(&big);
            vshape.extend(std::iter::repeat_n(1, post.len()));
            return Ok(valid
                .reshape_exact(&vshape)
                .where_(&x, 0)
                .cast(self.dtype()));
        }

        // one-hot mask per indexed dim, multiplied together, then a sum over the indexed dims
        let mut pre_reduce = xs[..d0].to_vec();
        pre_reduce.extend_from_slice(&big);
        pre_reduce.extend_from_slice(&xs[d0..]);
        let target: Vec<isize> = pre_reduce.iter().map(|&d| d as isize).collect();
        let mut mask: Option<Tensor> = None;
        for (dim, t) in tops {
            let mut ts = t.shape();
            ts.extend(std::iter::repeat_n(1, xn - d0));
            let i = t.reshape_exact(&ts);
            let ok = i
                .shape()
                .iter()
                .rev()
                .zip(pre_reduce.iter().rev())
                .all(|(&a, &b)| a == b || a == 1);
            if !ok {
                return err(format!(
                    "getitem: cannot broadcast index shape {:?} to {pre_reduce:?} (indexing shape {xs:?})",
                    t.shape()
                ));
            }
            let m = i
                .expand(&target)
                .idx_one_hot(xs[*dim], *dim as isize - xn as isize);
            mask = Some(match mask {
                None => m,
                Some(a) => a.logical_and(&m),
            });
        }
        let mask = mask.expect("at least one tensor index");
        let mut reshape_arg = xs[..d0].to_vec();
        reshape_arg.extend(std::iter::repeat_n(1, big.len()));
        reshape_arg.extend_from_slice(&xs[d0..]);
        let sum_axes: Vec<isize> = dims.iter().map(|&d| (d + big.len()) as isize).collect();
        // -0.0 where not selected (floats): the sum is exactly the selected value, and the
        // scheduler collapses it into a load at the index
        let unselected = if self.dtype().is_float() {
            ConstValue::Float(-0.0)
        } else {
            ConstValue::Int(0)
        };
        let mut x = mask
            .where_(&self.reshape_exact(&reshape_arg), unselected)
            .sum(sum_axes)
            .cast(self.dtype());
        // non-adjacent tensor indices: the broadcast dims go first
        if d0 != 0 && dims.len() != 1 && !consecutive {
            let nb = big.len();
            let n = x.ndim();
            let order: Vec<isize> = (d0..d0 + nb)
                .chain(0..d0)
                .chain(d0 + nb..n)
                .map(|a| a as isize)
                .collect();
            x = x.permute(&order);
        }
        Ok(x)
    }

    /// Gathers values along `dim`: `out[i][j][k] = self[index[i][j][k]][j][k]` for `dim = 0`
    /// (and so on). `index` has as many dims as `self`, and is no larger outside `dim`. Like
    /// tinygrad (a one-hot comparison and a sum), index values out of `0..self.shape[dim]`
    /// (negative ones too) select nothing and give 0.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// let i = Tensor::from_slice(&[0i32, 0, 1, 0], &[2, 2]);
    /// assert_eq!(t.gather(1, &i).to_vec::<i32>(), vec![1, 1, 4, 3]);
    /// ```
    ///
    /// # Panics
    /// If the dims differ, `index` is larger than `self` outside `dim`, `index` is not an
    /// integer tensor, or `dim` is out of range.
    pub fn gather(&self, dim: isize, index: &Tensor) -> Tensor {
        let (shape, ishape) = (self.shape(), index.shape());
        assert_eq!(
            shape.len(),
            ishape.len(),
            "gather: index shape {ishape:?} must have as many dims as the input shape {shape:?}"
        );
        let d = resolve_axis(dim, shape.len(), "gather", &shape);
        assert!(
            shape
                .iter()
                .zip(&ishape)
                .enumerate()
                .all(|(k, (&s, &i))| k == d || s >= i),
            "gather: index shape {ishape:?} must not exceed the input shape {shape:?} outside dim {d}"
        );
        assert!(
            index.dtype().is_int(),
            "gather: index must be an integer tensor, got {} (shape {ishape:?})",
            index.dtype()
        );
        let index = index.to(self.device());
        let bounds: Vec<(usize, usize)> = (0..shape.len())
            .map(|k| (0, if k == d { shape[k] } else { ishape[k] }))
            .collect();
        let x = self.shrink(&bounds).unsqueeze(-1).transpose(-1, d as isize);
        let hot = index.unsqueeze(-1).idx_one_hot(shape[d], -1);
        // -0.0 where not selected: the sum then is exactly the selected value, sign of zero
        // included
        let picked = if self.dtype().is_float() {
            hot.where_(&x, -0.0)
        } else {
            hot.where_(&x, 0)
        };
        picked.sum(-1isize).cast(self.dtype())
    }

    /// `value` where the bool `mask` is true, `self` elsewhere (`mask.where(value, self)`; all
    /// three broadcast).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5]);
    /// let mask = Tensor::from_vec(vec![true, false, true, false, false]);
    /// assert_eq!(t.masked_fill(&mask, -12).to_vec::<i32>(), vec![-12, 2, -12, 4, 5]);
    /// ```
    ///
    /// # Panics
    /// If `mask` is not bool or the shapes don't broadcast.
    pub fn masked_fill(&self, mask: &Tensor, value: impl IntoOperand) -> Tensor {
        assert!(
            mask.dtype().is_bool(),
            "masked_fill: mask must be bool, got {} (mask shape {:?}, input shape {:?})",
            mask.dtype(),
            mask.shape(),
            self.shape()
        );
        mask.where_(value, self)
    }

    /// tinygrad's `_tri`: `arange(r)[:, None] + diagonal <= arange(c)`.
    fn tri(r: usize, c: usize, diagonal: isize, device: &str) -> Tensor {
        let rows = Tensor::nn_ramp(r, DType::INT32, device).reshape_exact(&[r, 1]);
        let cols = Tensor::nn_ramp(c, DType::INT32, device).reshape_exact(&[1, c]);
        rows.add(diagonal as i64).le(&cols)
    }

    fn tri_dims(&self, op: &str) -> (usize, usize) {
        let shape = self.shape();
        assert!(
            shape.len() >= 2,
            "{op}: needs at least 2 dims, got shape {shape:?}"
        );
        (shape[shape.len() - 2], shape[shape.len() - 1])
    }

    /// The upper triangle of the last two dims (the rest set to 0): elements on and above
    /// diagonal `diagonal` (0: the main one, positive: above, negative: below).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(1, 7, 1).reshape(&[2, 3]);
    /// assert_eq!(t.triu(0).to_vec::<i32>(), vec![1, 2, 3, 0, 5, 6]);
    /// assert_eq!(t.triu(1).to_vec::<i32>(), vec![0, 2, 3, 0, 0, 6]);
    /// ```
    ///
    /// # Panics
    /// If `self` has fewer than 2 dims.
    pub fn triu(&self, diagonal: isize) -> Tensor {
        let (r, c) = self.tri_dims("triu");
        Tensor::tri(r, c, diagonal, self.device()).where_(self, Tensor::zeros_like(self))
    }

    /// The lower triangle of the last two dims (the rest set to 0): elements on and below
    /// diagonal `diagonal` (0: the main one, positive: above, negative: below).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(1, 7, 1).reshape(&[2, 3]);
    /// assert_eq!(t.tril(0).to_vec::<i32>(), vec![1, 0, 0, 4, 5, 0]);
    /// assert_eq!(t.tril(-1).to_vec::<i32>(), vec![0, 0, 0, 4, 0, 0]);
    /// ```
    ///
    /// # Panics
    /// If `self` has fewer than 2 dims.
    pub fn tril(&self, diagonal: isize) -> Tensor {
        let (r, c) = self.tri_dims("tril");
        Tensor::tri(r, c, diagonal + 1, self.device()).where_(Tensor::zeros_like(self), self)
    }

    /// Rolls (circularly shifts) by `shifts[i]` along `dims[i]`: elements pushed off the end come
    /// back at the start. Empty `dims` rolls the flattened tensor by `shifts[0]` (tinygrad's
    /// `dims=None`). A dim listed twice is rolled by the sum of its shifts (like numpy).
    /// Built as tinygrad does: [`Tensor::repeat`] twice along the rolled dims, then a slice.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// assert_eq!(t.roll(&[1], &[1]).to_vec::<i32>(), vec![2, 0, 1, 5, 3, 4]);
    /// assert_eq!(t.roll(&[-1, 1], &[0, 1]).to_vec::<i32>(), vec![5, 3, 4, 2, 0, 1]);
    /// ```
    ///
    /// # Panics
    /// If `shifts` and `dims` have different lengths (one shift when `dims` is empty), or a dim
    /// is out of range.
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Tensor {
        let shape = self.shape();
        if dims.is_empty() {
            assert_eq!(
                shifts.len(),
                1,
                "roll: without dims, expects one shift, got {shifts:?} (shape {shape:?})"
            );
            return self
                .reshape_exact(&[self.numel()])
                .roll(shifts, &[0])
                .reshape_exact(&shape);
        }
        assert_eq!(
            shifts.len(),
            dims.len(),
            "roll: {} shifts {shifts:?} for {} dims {dims:?} (shape {shape:?})",
            shifts.len(),
            dims.len()
        );
        let mut total = vec![0isize; shape.len()];
        let mut rolled = vec![false; shape.len()];
        for (&s, &d) in shifts.iter().zip(dims) {
            let d = resolve_axis(d, shape.len(), "roll", &shape);
            total[d] += s;
            rolled[d] = true;
        }
        let repeats: Vec<usize> = rolled.iter().map(|&r| if r { 2 } else { 1 }).collect();
        let idx: Vec<Idx> = (0..shape.len())
            .map(|d| {
                let n = shape[d] as isize;
                if !rolled[d] || n == 0 {
                    return Idx::all();
                }
                let delta = n - total[d].rem_euclid(n);
                Idx::range(delta, delta + n)
            })
            .collect();
        self.repeat(&repeats).getitem(&idx)
    }

    /// Tiles the tensor: `repeats[i]` copies along dim `i` (with more repeats than dims, the
    /// tensor gets new leading dims of size 1 first).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3]);
    /// let r = t.repeat(&[4, 2]);
    /// assert_eq!(r.shape(), vec![4, 6]);
    /// assert_eq!(r.to_vec::<i32>()[..6], [1, 2, 3, 1, 2, 3]);
    /// assert_eq!(t.repeat(&[4, 2, 1]).shape(), vec![4, 2, 3]);
    /// ```
    ///
    /// # Panics
    /// If there are fewer repeats than dims.
    pub fn repeat(&self, repeats: &[usize]) -> Tensor {
        let shape = self.shape();
        assert!(
            repeats.len() >= shape.len(),
            "repeat: {} repeats {repeats:?} for shape {shape:?} (needs at least {})",
            repeats.len(),
            shape.len()
        );
        let mut base = vec![1usize; repeats.len() - shape.len()];
        base.extend_from_slice(&shape);
        let new_shape: Vec<usize> = base.iter().flat_map(|&b| [1, b]).collect();
        let expand: Vec<isize> = repeats
            .iter()
            .zip(&base)
            .flat_map(|(&r, &b)| [r as isize, b as isize])
            .collect();
        let fin: Vec<usize> = repeats.iter().zip(&base).map(|(&r, &b)| r * b).collect();
        // a new tensor (torch's `repeat` copies), not an expanded view of `self`
        self.reshape_exact(&new_shape)
            .expand(&expand)
            .reshape_exact(&fin)
            .fresh()
    }

    /// Splits along `dim` into pieces: with one size, equal pieces of that size (the last one
    /// smaller if it doesn't divide); with a list, pieces of those sizes (they must add up to
    /// the dim's size).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 10, 1).reshape(&[5, 2]);
    /// let p = t.split(2usize, 0);
    /// assert_eq!(p.iter().map(|x| x.shape()).collect::<Vec<_>>(), [vec![2, 2], vec![2, 2], vec![1, 2]]);
    /// let p = t.split([1, 4], 0);
    /// assert_eq!(p[0].to_vec::<i32>(), vec![0, 1]);
    /// assert_eq!(p[1].shape(), vec![4, 2]);
    /// ```
    ///
    /// # Panics
    /// If the sizes don't add up to the dim's size (a size of 0 for a non-empty dim), or `dim`
    /// is out of range.
    pub fn split(&self, sizes: impl Into<SplitSizes>, dim: isize) -> Vec<Tensor> {
        let shape = self.shape();
        let d = resolve_axis(dim, shape.len(), "split", &shape);
        let n = shape[d];
        let sizes: Vec<usize> = match sizes.into() {
            SplitSizes::Size(s) => (0..n.max(1))
                .step_by(s.max(1))
                .map(|k| s.min(n - k))
                .collect(),
            SplitSizes::Sizes(v) => v,
        };
        let total: usize = sizes.iter().sum();
        assert_eq!(
            total, n,
            "split: sizes {sizes:?} must add up to {n}, the size of dim {d} of shape {shape:?}"
        );
        let mut start = 0;
        sizes
            .iter()
            .map(|&s| {
                let mut idx = vec![Idx::all(); d];
                idx.push(Idx::range(start as isize, (start + s) as isize));
                start += s;
                self.getitem(&idx)
            })
            .collect()
    }

    /// Splits along `dim` into `chunks` pieces of size `ceil(size / chunks)` (the last one
    /// smaller). Like tinygrad, this can give fewer than `chunks` pieces (6 into 4: sizes 2, 2,
    /// 2); an empty dim gives `chunks` empty pieces.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(1, 12, 1);
    /// let c = t.chunk(6, 0);
    /// assert_eq!(c.len(), 6);
    /// assert_eq!(c[5].to_vec::<i32>(), vec![11]);
    /// ```
    ///
    /// # Panics
    /// If `chunks` is 0 or `dim` is out of range.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Vec<Tensor> {
        let shape = self.shape();
        assert!(
            chunks > 0,
            "chunk: chunks must be positive, got 0 (shape {shape:?})"
        );
        let d = resolve_axis(dim, shape.len(), "chunk", &shape);
        if shape[d] == 0 {
            self.split(vec![0; chunks], d as isize)
        } else {
            self.split(shape[d].div_ceil(chunks), d as isize)
        }
    }
}
