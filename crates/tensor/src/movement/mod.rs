//! Movement ops: views that never copy (they become index arithmetic in kernels).
//!
//! Files: this one holds the shared helpers (axis resolution, symbolic arguments) and
//! [`ShapeDim`]; `basic` the primitive views (`reshape`, `permute`, `expand`, `pad`, `shrink`,
//! `flip`), `axes` the axis helpers (`transpose`, `flatten`, `squeeze`, `view`, ...), `join`
//! `cat`, `stack` and `repeat_interleave`, `resize` `slice`, `shrink_to` and `pad_to`, and
//! `diagonal` `diag` and `diagonal`.

mod axes;
mod basic;
mod diagonal;
mod join;
mod resize;

use tinygrad_uop::{Arg, Ops, SInt, UOp};

use crate::Tensor;

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

/// Resolves a possibly negative axis against `ndim`. A 0-d tensor has one axis to name, `0` or
/// `-1` (as tinygrad's `_resolve_dim` and torch: the range is `[-max(1, n), max(1, n) - 1]`);
/// both resolve to 0, which callers treat as "no axis" for a 0-d tensor.
///
/// # Panics
/// If out of range (message names the op and the shape).
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
