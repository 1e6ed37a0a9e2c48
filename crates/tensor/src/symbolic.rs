//! Symbolic sizes (tinygrad's `Variable` and `sint`): a [`Variable`] is a named integer with
//! bounds; [`Variable::bind`] gives it a value for one graph. Movement ops that take a bound
//! variable (`shrink_sym`, `reshape_sym`, `expand_sym`, `pad_sym`) give a tensor symbolic
//! sizes: [`Tensor::shape`] reports the bound values, [`Tensor::sym_shape`] the sizes as
//! expressions. The scheduler compiles such graphs with the variable as a kernel argument, so
//! one kernel (and one schedule) serves every value — a growing KV cache compiles its attention
//! once, not once per length. Ops on a symbolic tensor keep the sizes symbolic where they carry
//! one over (elementwise ops, reductions, reshapes that keep or merge an axis, expands, a shrink
//! to the end of an axis, `cat`; `mean`'s and `var`'s count is a sum of ones over the symbolic
//! axes); a size an op computes anew from the bound value is a constant of the kernel, correct
//! for that value.

use tinygrad_uop::{Arg, Ops, SInt, UOp};

use crate::Tensor;

/// A symbolic integer with inclusive bounds (tinygrad's `Variable(name, min, max)`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Variable {
    uop: UOp,
}

/// A [`Variable`] bound to a value (tinygrad's `Variable.bind`): what the symbolic movement ops
/// take, as an [`SInt`] (`.into()`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BoundVar {
    uop: UOp,
}

impl Variable {
    /// A variable `name` taking values in `min..=max`.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// let n = Variable::new("n", 1, 512);
    /// assert_eq!((n.name(), n.min(), n.max()), ("n", 1, 512));
    /// ```
    ///
    /// # Panics
    /// If `min > max`.
    pub fn new(name: &str, min: usize, max: usize) -> Variable {
        assert!(
            min <= max,
            "Variable::new: {name} has empty bounds [{min}, {max}]"
        );
        Variable {
            uop: UOp::variable(name, min as i64, max as i64),
        }
    }

    /// The name.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// assert_eq!(Variable::new("pos", 0, 9).name(), "pos");
    /// ```
    pub fn name(&self) -> &str {
        match self.uop.arg() {
            Arg::Var(n, _, _) => n,
            _ => unreachable!("a Variable is a DefineVar"),
        }
    }

    /// The smallest value.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// assert_eq!(Variable::new("pos", 2, 9).min(), 2);
    /// ```
    pub fn min(&self) -> usize {
        match self.uop.arg() {
            Arg::Var(_, lo, _) => *lo as usize,
            _ => unreachable!("a Variable is a DefineVar"),
        }
    }

    /// The largest value.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// assert_eq!(Variable::new("pos", 2, 9).max(), 9);
    /// ```
    pub fn max(&self) -> usize {
        match self.uop.arg() {
            Arg::Var(_, _, hi) => *hi as usize,
            _ => unreachable!("a Variable is a DefineVar"),
        }
    }

    /// The variable with `value` for one graph.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// let n = Variable::new("n", 1, 8);
    /// assert_eq!(n.bind(3).value(), 3);
    /// ```
    ///
    /// # Panics
    /// If `value` is outside the bounds (naming them).
    pub fn bind(&self, value: usize) -> BoundVar {
        assert!(
            (self.min()..=self.max()).contains(&value),
            "Variable::bind: {} = {value} is outside its bounds [{}, {}]",
            self.name(),
            self.min(),
            self.max()
        );
        BoundVar {
            uop: self.uop.bind(value as i64),
        }
    }

    /// The variable as an (unbound) size.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// let n = Variable::new("n", 1, 8);
    /// assert!(n.sint().is_symbolic());
    /// assert_eq!(n.sint().max_value(), 8);
    /// ```
    pub fn sint(&self) -> SInt {
        SInt::Sym(self.uop.clone())
    }
}

impl BoundVar {
    /// The bound value.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// assert_eq!(Variable::new("p", 0, 9).bind(7).value(), 7);
    /// ```
    pub fn value(&self) -> usize {
        self.uop.s(1).as_int().expect("a Bind holds a constant") as usize
    }

    /// The variable.
    ///
    /// ```
    /// use tinygrad_tensor::Variable;
    /// let n = Variable::new("n", 1, 8);
    /// assert_eq!(n.bind(4).variable(), n);
    /// ```
    pub fn variable(&self) -> Variable {
        Variable {
            uop: self.uop.s(0).clone(),
        }
    }
}

impl From<BoundVar> for SInt {
    fn from(b: BoundVar) -> SInt {
        SInt::Sym(b.uop)
    }
}

impl From<&BoundVar> for SInt {
    fn from(b: &BoundVar) -> SInt {
        SInt::Sym(b.uop.clone())
    }
}

fn bound(s: &SInt) -> usize {
    s.bound_value()
}

fn describe(s: &[SInt]) -> String {
    let v: Vec<String> = s.iter().map(ToString::to_string).collect();
    format!("[{}]", v.join(", "))
}

impl Tensor {
    /// The shape with symbolic sizes where they are (tinygrad's `shape` of `sint`s);
    /// [`Tensor::shape`] gives the bound values.
    ///
    /// ```
    /// use tinygrad_tensor::{SInt, Tensor, Variable};
    /// let t = Tensor::arange(0, 12, 1).reshape(&[4, 3]);
    /// let n = Variable::new("n", 1, 4).bind(2);
    /// let s = t.shrink_sym(&[(0.into(), n.into()), (0.into(), 3.into())]);
    /// assert_eq!(s.shape(), vec![2, 3]);
    /// assert!(s.sym_shape()[0].is_symbolic());
    /// assert_eq!(s.sym_shape()[1], SInt::Const(3));
    /// assert_eq!(s.to_vec::<i32>(), vec![0, 1, 2, 3, 4, 5]);
    /// ```
    pub fn sym_shape(&self) -> Vec<SInt> {
        self.uop().sym_shape_vec()
    }

    /// The largest shape the tensor can have: each symbolic size at its variable's maximum
    /// (tinygrad's `max_shape`); the shape itself when no size is symbolic.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, Variable};
    /// let v = Variable::new("v", 1, 32);
    /// let t = Tensor::empty(&[2, 32, 4], DType::FLOAT32)
    ///     .shrink_sym(&[(0.into(), 2.into()), (0.into(), v.bind(8).into()), (0.into(), 4.into())]);
    /// assert_eq!((t.shape(), t.max_shape()), (vec![2, 8, 4], vec![2, 32, 4]));
    /// ```
    pub fn max_shape(&self) -> Vec<usize> {
        self.sym_shape().iter().map(SInt::max_value).collect()
    }

    /// The number of elements of [`Tensor::max_shape`] (tinygrad's `max_numel`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, Variable};
    /// let n = Variable::new("n", 1, 10);
    /// let t = Tensor::empty(&[10, 3], DType::FLOAT32).shrink_sym(&[(0.into(), n.bind(2).into()), (0.into(), 3.into())]);
    /// assert_eq!((t.numel(), t.max_numel()), (6, 30));
    /// ```
    pub fn max_numel(&self) -> usize {
        self.max_shape().iter().product()
    }

    /// [`Tensor::shrink`] with bounds that may be bound variables.
    ///
    /// ```
    /// use tinygrad_tensor::{Tensor, Variable};
    /// let t = Tensor::arange(0, 8, 1);
    /// let n = Variable::new("n", 1, 8);
    /// assert_eq!(t.shrink_sym(&[(0.into(), n.bind(3).into())]).to_vec::<i32>(), vec![0, 1, 2]);
    /// ```
    ///
    /// # Panics
    /// If the bounds do not fit the shape (at their bound values), or their count differs from
    /// the number of dims.
    pub fn shrink_sym(&self, bounds: &[(SInt, SInt)]) -> Tensor {
        let shape = self.shape();
        assert_eq!(
            bounds.len(),
            shape.len(),
            "shrink_sym: {} bounds for shape {shape:?}",
            bounds.len()
        );
        let sym = self.sym_shape();
        for (((b, e), &d), s) in bounds.iter().zip(&shape).zip(&sym) {
            assert!(
                bound(b) <= bound(e) && bound(e) <= d,
                "shrink_sym: bounds ({b}, {e}) = ({}, {}) outside a dimension of {d} (shape \
                 {shape:?})",
                bound(b),
                bound(e)
            );
            // the kernels serve every value of the variables: each must fit (a symbolic size
            // at its largest value)
            assert!(
                e.max_value() <= s.max_value(),
                "shrink_sym: bound {e} can reach {}, past a dimension of {} (shape {shape:?}): \
                 give the variable a largest value that fits",
                e.max_value(),
                s.max_value()
            );
        }
        // a view, as `shrink`'s: assigning to it writes into this tensor
        let arg = Arg::sym_pairs_of(bounds);
        let u = UOp::new(Ops::Shrink, self.dtype(), vec![self.uop()], arg.clone());
        self.with_view_uop(u, Ops::Shrink, arg)
    }

    /// [`Tensor::reshape`] to sizes that may be bound variables (no `-1`).
    ///
    /// ```
    /// use tinygrad_tensor::{SInt, Tensor, Variable};
    /// let n = Variable::new("n", 1, 4).bind(2); // n * 4 fits the 16 elements for every n
    /// let t = Tensor::arange(0, 16, 1).shrink_sym(&[(0.into(), (SInt::from(&n) * 4).into())]);
    /// let r = t.reshape_sym(&[n.into(), 4.into()]);
    /// assert_eq!(r.shape(), vec![2, 4]);
    /// assert_eq!(r.to_vec::<i32>(), (0..8).collect::<Vec<i32>>());
    /// ```
    ///
    /// # Panics
    /// If the element counts differ at the bound values.
    pub fn reshape_sym(&self, shape: &[SInt]) -> Tensor {
        let n: usize = shape.iter().map(bound).product();
        assert_eq!(
            n,
            self.numel(),
            "reshape_sym: shape {:?} ({} elements) can't become {} ({n} elements)",
            self.shape(),
            self.numel(),
            describe(shape)
        );
        self.sym_movement(Ops::Reshape, Arg::sizes(shape))
    }

    /// [`Tensor::expand`] to sizes that may be bound variables.
    ///
    /// ```
    /// use tinygrad_tensor::{Tensor, Variable};
    /// let n = Variable::new("n", 1, 8).bind(3);
    /// let t = Tensor::from_slice(&[1.0f32, 2.0], &[1, 2]).expand_sym(&[n.into(), 2.into()]);
    /// assert_eq!(t.to_vec::<f32>(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    /// ```
    ///
    /// # Panics
    /// If a dim whose value is not 1 would change (an expand only broadcasts: a dim of 2 cannot
    /// become a variable bound to 2), or the ranks differ.
    pub fn expand_sym(&self, shape: &[SInt]) -> Tensor {
        let (old, sym) = (self.shape(), self.sym_shape());
        assert!(
            old.len() == shape.len()
                && old
                    .iter()
                    .zip(&sym)
                    .zip(shape)
                    .all(|((&o, s), n)| o == 1 || s == n),
            "expand_sym: cannot broadcast shape {} to {} (only dims of 1 broadcast)",
            describe(&sym),
            describe(shape)
        );
        self.sym_movement(Ops::Expand, Arg::sizes(shape))
    }

    /// A zero [`Tensor::pad`] by amounts that may be bound variables.
    ///
    /// ```
    /// use tinygrad_tensor::{Tensor, Variable};
    /// let p = Variable::new("p", 0, 4).bind(2);
    /// let t = Tensor::from_slice(&[1i32, 2], &[2]).pad_sym(&[(p.into(), 0.into())]);
    /// assert_eq!(t.to_vec::<i32>(), vec![0, 0, 1, 2]);
    /// ```
    ///
    /// # Panics
    /// If the pair count differs from the number of dims.
    pub fn pad_sym(&self, padding: &[(SInt, SInt)]) -> Tensor {
        assert_eq!(
            padding.len(),
            self.ndim(),
            "pad_sym: {} pairs for shape {:?}",
            padding.len(),
            self.shape()
        );
        self.sym_movement(Ops::Pad, Arg::sym_pairs_of(padding))
    }

    fn sym_movement(&self, op: Ops, arg: Arg) -> Tensor {
        let u = UOp::new(op, self.dtype(), vec![self.uop()], arg);
        self.with_uop(u)
    }
}
