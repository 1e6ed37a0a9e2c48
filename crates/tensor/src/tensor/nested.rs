//! Tensors from nested, Python-style data and back: [`Data`] (a scalar or a list of `Data`),
//! [`Tensor::new`] (tinygrad's `Tensor([[1, 2], [3, 4]])`, with its dtype inference),
//! [`Tensor::tolist`] and [`Tensor::item_value`], and the [`tensor!`](crate::tensor!) macro.
//!
//! Leaves are [`ConstValue`]s, so a list may mix booleans, integers and floats as a Python list
//! does; the dtype is inferred from all leaves together, as tinygrad does: every leaf a bool →
//! `bool`; every leaf an integer or bool (and at least one leaf) → the default int (`int32`);
//! otherwise (a float among them, or no leaf at all) → the default float. An explicit dtype
//! converts each leaf as tinygrad's `dtype.const` + `truncate` do (floats to integers toward
//! zero, integers wrapped to the dtype's width, floats rounded to the dtype).

use std::fmt;

use tinygrad_dtype::{ConstValue, DType, default_float};
use tinygrad_runtime::default_device;

use super::Tensor;

/// Nested data for [`Tensor::new`] and from [`Tensor::tolist`]: a scalar, or a list whose items
/// all have the same shape.
///
/// Made from Rust scalars, `Vec`s, arrays and slices of them (nested to any depth), or with
/// the [`tensor!`](crate::tensor!) macro when a list mixes kinds of values (`[true, 3, 2.5]`).
///
/// Equality is Python's: numbers compare by value whatever their kind (`2 == 2.0`,
/// `true == 1`), NaN equals nothing, lists compare item by item.
///
/// ```
/// use tinygrad_tensor::{Data, Tensor};
/// let d = Data::from(vec![vec![1, 2], vec![3, 4]]);
/// assert_eq!(d.shape(), Ok(vec![2, 2]));
/// assert_eq!(Tensor::new(d.clone()).tolist(), d);
/// assert_eq!(Data::from(2), Data::from(2.0));
/// ```
#[derive(Clone, Debug)]
pub enum Data {
    /// One value (a Python `bool`, `int` or `float`).
    Scalar(ConstValue),
    /// A list of items of one shape.
    List(Vec<Data>),
}

impl Data {
    /// The shape this data describes (`[]` for a scalar, `[n, ...]` for a list of `n` items),
    /// or an error naming where the items' shapes differ (tinygrad's "inhomogeneous shape").
    ///
    /// ```
    /// use tinygrad_tensor::{Data, tensor};
    /// assert_eq!(Data::from(vec![Vec::<f32>::new(); 2]).shape(), Ok(vec![2, 0]));
    /// let ragged = Data::List(vec![Data::from(vec![1]), Data::List(vec![])]);
    /// assert!(ragged.shape().unwrap_err().contains("inhomogeneous"));
    /// ```
    pub fn shape(&self) -> Result<Vec<usize>, String> {
        match self {
            Data::Scalar(_) => Ok(Vec::new()),
            Data::List(items) => {
                let mut inner: Option<Vec<usize>> = None;
                for (i, item) in items.iter().enumerate() {
                    let s = item.shape()?;
                    match &inner {
                        None => inner = Some(s),
                        Some(first) if *first != s => {
                            return Err(format!(
                                "inhomogeneous shape: item 0 has shape {first:?}, item {i} has shape {s:?}"
                            ));
                        }
                        Some(_) => {}
                    }
                }
                let mut shape = vec![items.len()];
                shape.extend(inner.unwrap_or_default());
                Ok(shape)
            }
        }
    }

    /// Every scalar, in row-major order.
    fn leaves<'a>(&'a self, out: &mut Vec<&'a ConstValue>) {
        match self {
            Data::Scalar(v) => out.push(v),
            Data::List(items) => items.iter().for_each(|i| i.leaves(out)),
        }
    }

    /// The dtype tinygrad's `Tensor(data)` gives this data without a dtype (see the module
    /// docs): `bool` if every leaf is a bool, `int32` if every leaf is an integer or bool,
    /// else the default float (also for no leaves at all). A scalar gets its own kind's dtype.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Data, tensor};
    /// assert_eq!(Data::from(vec![true, false]).inferred_dtype(), DType::BOOL);
    /// assert_eq!(Data::from(vec![1u8, 2]).inferred_dtype(), DType::INT32);
    /// assert_eq!(Data::from(Vec::<i32>::new()).inferred_dtype(), DType::FLOAT32);
    /// ```
    pub fn inferred_dtype(&self) -> DType {
        let mut leaves = Vec::new();
        self.leaves(&mut leaves);
        if let Data::Scalar(v) = self {
            return python_scalar_dtype(v);
        }
        if !leaves.is_empty() && leaves.iter().all(|v| matches!(v, ConstValue::Bool(_))) {
            DType::BOOL
        } else if !leaves.is_empty() && leaves.iter().all(|v| !matches!(v, ConstValue::Float(_))) {
            DType::INT32
        } else {
            default_float()
        }
    }
}

/// tinygrad's `dtypes.from_py` of one Python value.
fn python_scalar_dtype(v: &ConstValue) -> DType {
    match v {
        ConstValue::Bool(_) => DType::BOOL,
        ConstValue::Int(_) | ConstValue::UInt(_) => DType::INT32,
        ConstValue::Float(_) => default_float(),
    }
}

/// Python's `==` on two numbers.
fn python_eq(a: &ConstValue, b: &ConstValue) -> bool {
    use ConstValue::{Float, UInt};
    match (a, b) {
        (Float(_), _) | (_, Float(_)) => a.as_f64() == b.as_f64(),
        (UInt(x), UInt(y)) => x == y,
        (UInt(_), _) | (_, UInt(_)) => as_i128(a) == as_i128(b),
        _ => a.as_i64() == b.as_i64(),
    }
}

fn as_i128(v: &ConstValue) -> i128 {
    match v {
        ConstValue::UInt(u) => i128::from(*u),
        other => i128::from(other.as_i64()),
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        match (self, other) {
            (Data::Scalar(a), Data::Scalar(b)) => python_eq(a, b),
            (Data::List(a), Data::List(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Data {
    /// Python's list syntax: `[[1, 2], [3, 4]]`, `[1.5, nan]`, `True`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Data::Scalar(ConstValue::Bool(b)) => f.write_str(if *b { "True" } else { "False" }),
            Data::Scalar(v) => write!(f, "{v}"),
            Data::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

macro_rules! data_from_scalars {
    ($($t:ty),*) => {$(
        impl From<$t> for Data {
            fn from(x: $t) -> Data { Data::Scalar(ConstValue::from(x)) }
        }
    )*};
}

data_from_scalars!(
    bool,
    i8,
    i16,
    i32,
    i64,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize,
    f32,
    f64,
    half::f16,
    half::bf16
);

impl From<ConstValue> for Data {
    fn from(v: ConstValue) -> Data {
        Data::Scalar(v)
    }
}

impl<T: Into<Data>> From<Vec<T>> for Data {
    fn from(items: Vec<T>) -> Data {
        Data::List(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Data>, const N: usize> From<[T; N]> for Data {
    fn from(items: [T; N]) -> Data {
        Data::List(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Data> + Clone> From<&[T]> for Data {
    fn from(items: &[T]) -> Data {
        Data::List(items.iter().cloned().map(Into::into).collect())
    }
}

/// Nested data with any mix of values, as a Python list literal: `tensor!([[true, 3], [3, 2.5]])`
/// is `Tensor::new` of that list ([`Data`]: bools, integers and floats may be mixed; the dtype is
/// inferred from all of them). `tensor!(data; dtype)` gives the dtype instead.
///
/// ```
/// use tinygrad_tensor::{DType, tensor};
/// let t = tensor!([[true, 3], [3, true]]);
/// assert_eq!((t.shape(), t.dtype()), (vec![2, 2], DType::INT32));
/// assert_eq!(t.to_vec::<i32>(), vec![1, 3, 3, 1]);
/// let f = tensor!([[1, -2.5]]; DType::FLOAT64);
/// assert_eq!(f.to_vec::<f64>(), vec![1.0, -2.5]);
/// ```
#[macro_export]
macro_rules! tensor {
    ([ $($items:tt)* ] ; $dtype:expr) => {
        $crate::Tensor::new_dtype($crate::tensor!(@list [] $($items)*), $dtype)
    };
    ([ $($items:tt)* ]) => {
        $crate::Tensor::new($crate::tensor!(@list [] $($items)*))
    };
    // the items of a list, one at a time: a bracketed list, else an expression
    (@list [$($done:expr),*]) => {
        $crate::Data::List(vec![$($done),*])
    };
    (@list [$($done:expr),*] [ $($inner:tt)* ] $(, $($rest:tt)*)?) => {
        $crate::tensor!(@list [$($done,)* $crate::tensor!(@list [] $($inner)*)] $($($rest)*)?)
    };
    (@list [$($done:expr),*] $x:expr $(, $($rest:tt)*)?) => {
        $crate::tensor!(@list [$($done,)* $crate::Data::from($x)] $($($rest)*)?)
    };
    ($x:expr ; $dtype:expr) => {
        $crate::Tensor::new_dtype($crate::Data::from($x), $dtype)
    };
    ($x:expr) => {
        $crate::Tensor::new($crate::Data::from($x))
    };
}

impl Tensor {
    /// A tensor from nested data on the default device, its dtype inferred as tinygrad's
    /// `Tensor(data)` infers it (see [`Data::inferred_dtype`]): `Tensor::new(55)` is a 0-d
    /// `int32`, `Tensor::new(vec![vec![1.5, 2.0]])` a `1x2` float32.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::new([[1, 2, 3], [4, 5, 6]]);
    /// assert_eq!((t.shape(), t.dtype()), (vec![2, 3], DType::INT32));
    /// assert_eq!(Tensor::new(3.14).shape(), Vec::<usize>::new());
    /// assert_eq!(Tensor::new(vec![true, false]).dtype(), DType::BOOL);
    /// ```
    ///
    /// # Panics
    /// If the lists' shapes differ (`Tensor::new: inhomogeneous shape ...`).
    pub fn new(data: impl Into<Data>) -> Tensor {
        let data = data.into();
        let dtype = data.inferred_dtype();
        Tensor::from_data("Tensor::new", &data, dtype)
    }

    /// Like [`Tensor::new`] with an explicit dtype: each value converted as tinygrad converts
    /// it (floats to integers toward zero, integers wrapped to the dtype's width, floats
    /// rounded to the dtype; `bfloat16` and fp8 through float32).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::new_dtype(vec![-3.5, 2.5], DType::INT32);
    /// assert_eq!(t.to_vec::<i32>(), vec![-3, 2]);
    /// let u = Tensor::new_dtype(vec![-1i64, 1 << 32], DType::UINT32);
    /// assert_eq!(u.to_vec::<u32>(), vec![u32::MAX, 0]);
    /// ```
    ///
    /// # Panics
    /// If the lists' shapes differ, or `dtype` is not a scalar element dtype.
    pub fn new_dtype(data: impl Into<Data>, dtype: DType) -> Tensor {
        assert!(
            dtype.count() == 1 && !dtype.is_ptr() && dtype != DType::VOID && dtype != DType::INDEX,
            "Tensor::new_dtype: {dtype:?} is not a dtype a tensor's elements can have"
        );
        Tensor::from_data("Tensor::new_dtype", &data.into(), dtype)
    }

    fn from_data(op: &str, data: &Data, dtype: DType) -> Tensor {
        let shape = data.shape().unwrap_or_else(|e| panic!("{op}: {e}"));
        let mut leaves = Vec::new();
        data.leaves(&mut leaves);
        let through_f32 = dtype == DType::BFLOAT16 || dtype.is_fp8();
        let mut bytes = Vec::with_capacity(leaves.len() * dtype.itemsize());
        for v in leaves {
            let v = if through_f32 {
                v.cast(DType::FLOAT32)
            } else {
                *v
            };
            bytes.extend(v.to_le_bytes(dtype));
        }
        Tensor::from_bytes(&bytes, dtype, &shape, &default_device())
    }

    /// The values as nested data (tinygrad's `tolist`): a 0-d tensor gives a
    /// [`Data::Scalar`], others lists nested as the shape; each value of the dtype's kind
    /// (bool, integer or float).
    ///
    /// ```
    /// use tinygrad_tensor::{Data, Tensor};
    /// let t = Tensor::new([[1, 2, 3], [4, 5, 6]]);
    /// assert_eq!(t.tolist(), Data::from([[1, 2, 3], [4, 5, 6]]));
    /// assert_eq!(Tensor::new(2.5).tolist(), Data::from(2.5));
    /// assert_eq!(t.tolist().to_string(), "[[1, 2, 3], [4, 5, 6]]");
    /// ```
    ///
    /// # Panics
    /// If realizing fails.
    pub fn tolist(&self) -> Data {
        let dtype = self.dtype();
        let bytes = self
            .try_to_bytes()
            .unwrap_or_else(|e| panic!("tolist: {e}"));
        let mut values = bytes
            .chunks_exact(dtype.itemsize())
            .map(|b| Data::Scalar(ConstValue::from_le_bytes(dtype, b)));
        nest(&self.shape(), &mut values)
    }

    /// The single value of a one-element tensor as a value of its dtype's kind (tinygrad's
    /// `item()`, which returns a Python `bool`, `int` or `float` by dtype); see
    /// [`Tensor::item`] for a typed read.
    ///
    /// ```
    /// use tinygrad_tensor::{ConstValue, Tensor};
    /// assert_eq!(Tensor::new(vec![7]).item_value(), ConstValue::Int(7));
    /// assert_eq!(Tensor::new(true).item_value(), ConstValue::Bool(true));
    /// ```
    ///
    /// # Panics
    /// If the tensor has more or less than one element.
    pub fn item_value(&self) -> ConstValue {
        assert_eq!(
            self.numel(),
            1,
            "item: tensor of shape {:?} has {} elements, expected 1",
            self.shape(),
            self.numel()
        );
        match self.reshape::<isize>(&[]).tolist() {
            Data::Scalar(v) => v,
            Data::List(_) => unreachable!("a 0-d tensor's tolist is a scalar"),
        }
    }
}

/// Values in row-major order nested as `shape`.
fn nest(shape: &[usize], values: &mut impl Iterator<Item = Data>) -> Data {
    match shape.split_first() {
        None => values.next().expect("one value per element"),
        Some((&n, rest)) => Data::List((0..n).map(|_| nest(rest, values)).collect()),
    }
}
