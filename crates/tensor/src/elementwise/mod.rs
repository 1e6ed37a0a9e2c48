//! Elementwise ops: math, comparisons, logic, casts — each a few primitive UOps, with
//! broadcasting and tinygrad's dtype promotion (Rust literals promote like Python scalars).
//!
//! Module map:
//! - this file: operands ([`Operand`], [`IntoOperand`]), broadcasting ([`broadcast_shape`],
//!   `broadcast_to`), `alu`, and the helpers the others share.
//! - `cast`: casts and bitcasts (`float`, `half`, `int`, ..., `cast`, `bitcast`).
//! - `unary`: unary math (`neg`, `sqrt`, `exp`, `log`, `sin`, rounding, `abs`, `relu`,
//!   `sigmoid`, `tanh`, ...).
//! - `binary`: binary math (`add`, `sub`, `mul`, `div` and its modes, `pow`, `maximum`,
//!   `minimum`, `clip`).
//! - `compare`: comparisons (`lt`, `gt`, `le`, `ge`, `eq`, `ne`), bool results.
//! - `logic`: logic and bits (`logical_*`, `bitwise_*`, shifts) and `where_`.

mod binary;
mod cast;
mod compare;
mod logic;
mod unary;

use tinygrad_dtype::{ConstValue, least_upper_dtype, least_upper_float, promote_with_const};
use tinygrad_uop::{Ops, UOp};

use crate::Tensor;

/// The right-hand side of a binary op: a tensor or a scalar constant.
#[derive(Clone)]
pub enum Operand {
    /// A tensor.
    Tensor(Tensor),
    /// A scalar ("weak": promotes like a Python scalar in tinygrad).
    Const(ConstValue),
}

/// Things usable as an operand: tensors and Rust scalars.
pub trait IntoOperand {
    /// The operand.
    fn into_operand(self) -> Operand;
}

impl IntoOperand for Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self)
    }
}

impl IntoOperand for &Tensor {
    fn into_operand(self) -> Operand {
        Operand::Tensor(self.clone())
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            fn into_operand(self) -> Operand { Operand::Const(ConstValue::from(self)) }
        }
    )*};
}
scalar_operand!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, usize, bool);

impl IntoOperand for Operand {
    fn into_operand(self) -> Operand {
        self
    }
}

impl IntoOperand for ConstValue {
    fn into_operand(self) -> Operand {
        Operand::Const(self)
    }
}

/// The broadcast shape of `a` and `b` (numpy rules), or `None`.
///
/// ```
/// use tinygrad_tensor::broadcast_shape;
/// assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
/// assert_eq!(broadcast_shape(&[2, 3], &[4]), None);
/// ```
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let pa = |i: usize| {
        if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        }
    };
    let pb = |i: usize| {
        if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        }
    };
    (0..n)
        .map(|i| match (pa(i), pb(i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl Tensor {
    /// Broadcasts to `shape` (left-padding with size-1 axes, then expanding).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3]).broadcast_to(&[2, 3]);
    /// assert_eq!(t.shape(), vec![2, 3]);
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 2, 3, 1, 2, 3]);
    /// ```
    ///
    /// # Panics
    /// If the shapes are not broadcast-compatible.
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let s = self.shape();
        if s == shape {
            return self.clone();
        }
        assert!(
            s.len() <= shape.len() && broadcast_shape(&s, shape).as_deref() == Some(shape),
            "broadcast_to: cannot broadcast shape {s:?} to {shape:?}"
        );
        let mut padded = vec![1usize; shape.len() - s.len()];
        padded.extend(&s);
        self.reshape_exact(&padded).expand_exact(shape)
    }

    /// [`Tensor::broadcast_to`] a shape that may have symbolic sizes.
    pub(crate) fn broadcast_to_sym(&self, shape: &[tinygrad_uop::SInt]) -> Tensor {
        let s = self.shape();
        let mut padded = vec![1usize; shape.len() - s.len()];
        padded.extend(&s);
        let r = self.reshape_exact(&padded);
        // an axis keeps its own size unless it broadcasts (its value is 1, the target's is
        // not): an axis of 2 against a symbolic one bound to 2 is the same axis, not a broadcast
        let own = r.sym_shape();
        let to: Vec<tinygrad_uop::SInt> = own
            .iter()
            .zip(shape)
            .map(|(o, t)| {
                if o.bound_value() == t.bound_value() {
                    o.clone()
                } else {
                    t.clone()
                }
            })
            .collect();
        if own == to {
            return r;
        }
        r.expand_sym(&to)
    }

    /// Both operands broadcast to a common shape and promoted to a common dtype.
    pub(crate) fn broadcasted(&self, other: impl IntoOperand, op: &str) -> (Tensor, Tensor) {
        self.broadcasted_match(other, op, true)
    }

    fn broadcasted_match(
        &self,
        other: impl IntoOperand,
        op: &str,
        match_dtype: bool,
    ) -> (Tensor, Tensor) {
        match other.into_operand() {
            Operand::Const(c) => {
                let dt = if match_dtype {
                    promote_with_const(self.dtype(), &c)
                } else {
                    c.default_dtype()
                };
                let x = if match_dtype {
                    self.cast(dt)
                } else {
                    self.clone()
                };
                let y = x.const_like(c, dt);
                (x, y)
            }
            Operand::Tensor(t) => {
                assert_eq!(
                    self.device(),
                    t.device(),
                    "{op}: operands on different devices ({} and {})",
                    self.device(),
                    t.device()
                );
                let (sa, sb) = (self.shape(), t.shape());
                let shape = broadcast_shape(&sa, &sb).unwrap_or_else(|| {
                    panic!(
                        "{op}: cannot broadcast shapes {sa:?} and {sb:?} ({} and {})",
                        self.dtype(),
                        t.dtype()
                    )
                });
                let (mut x, mut y) = if self.uop().has_sym() || t.uop().has_sym() {
                    // symbolic sizes: each axis takes the operand's size that is not 1, so a
                    // size-1 axis broadcast to a symbolic one stays symbolic
                    let target = broadcast_sym(&self.sym_shape(), &t.sym_shape());
                    (self.broadcast_to_sym(&target), t.broadcast_to_sym(&target))
                } else {
                    (self.broadcast_to(&shape), t.broadcast_to(&shape))
                };
                if match_dtype && x.dtype() != y.dtype() {
                    let dt = least_upper_dtype(&[x.dtype(), y.dtype()]);
                    x = x.cast(dt);
                    y = y.cast(dt);
                }
                (x, y)
            }
        }
    }

    /// A raw ALU op on `self` and `rest` (tinygrad's `alu`): no broadcasting or dtype promotion
    /// — the operands must already share shape and dtype (comparisons give bool).
    ///
    /// ```
    /// use tinygrad_tensor::{Ops, Tensor};
    /// let a = Tensor::from_vec(vec![1i32, 5, 3]);
    /// let b = Tensor::from_vec(vec![4i32, 2, 3]);
    /// assert_eq!(a.alu(Ops::Max, &[&b]).to_vec::<i32>(), vec![4, 5, 3]);
    /// assert_eq!(a.alu(Ops::CmpLt, &[&b]).to_vec::<bool>(), vec![true, false, false]);
    /// ```
    ///
    /// # Panics
    /// If `op` is not an ALU op, the number of operands is wrong, their shapes differ, or their
    /// dtypes break the op's contract (e.g. `Add` of int32 and float32, a non-bool `Where`
    /// condition).
    pub fn alu(&self, op: Ops, rest: &[&Tensor]) -> Tensor {
        let describe = || {
            let all = std::iter::once(self).chain(rest.iter().copied());
            all.map(|t| format!("{:?} {}", t.shape(), t.dtype()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let arity = op.alu_arity();
        assert!(
            arity == Some(rest.len() + 1),
            "alu: {op} takes {} operands, got {} ({})",
            arity.map_or_else(|| "no".to_string(), |a| a.to_string()),
            rest.len() + 1,
            describe()
        );
        // Operands of different shapes would be indexed with the first one's indices: a read
        // past the end of the smaller buffer.
        let shape = self.uop().shape();
        for t in rest {
            assert!(
                t.uop().shape() == shape,
                "alu: {op} needs operands of one shape (no broadcasting), got {}",
                describe()
            );
            assert_eq!(
                t.device(),
                self.device(),
                "alu: {op} of tensors on different devices ({} and {})",
                self.device(),
                t.device()
            );
        }
        let src: Vec<UOp> = rest.iter().map(|t| t.uop()).collect();
        let u = self.uop().alu(op, &src);
        if let Err(e) = tinygrad_uop::verify::verify_alu(&u) {
            panic!("alu: {op} of {}: {e}", describe());
        }
        self.with_uop(u)
    }

    fn float_unary(&self, op: Ops) -> Tensor {
        let x = self.cast(least_upper_float(self.dtype()));
        x.alu(op, &[])
    }
}

/// The broadcast of two symbolic shapes (right-aligned): each axis the size that is not 1 (the
/// bound shapes broadcast, checked by the caller).
fn broadcast_sym(a: &[tinygrad_uop::SInt], b: &[tinygrad_uop::SInt]) -> Vec<tinygrad_uop::SInt> {
    let n = a.len().max(b.len());
    let one = tinygrad_uop::SInt::Const(1);
    (0..n)
        .map(|i| {
            let x = (i + a.len()).checked_sub(n).map_or(&one, |k| &a[k]);
            let y = (i + b.len()).checked_sub(n).map_or(&one, |k| &b[k]);
            if *x == 1 { y.clone() } else { x.clone() }
        })
        .collect()
}
