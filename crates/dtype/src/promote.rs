//! Type promotion exactly as tinygrad's `dtype.py` (the JAX-style lattice, no complex types).
//!
//! The lattice (an edge `a -> b` means `a` promotes to `b`):
//! ```text
//! bool -> index -> int8 -> int16 -> int32 -> int64 -> uint64
//!                  index -> uint8 -> int16, uint16;  uint16 -> int32, uint32
//!                  uint32 -> int64, uint64;  uint64 -> fp8e4m3, fp8e5m2
//! fp8e4m3, fp8e5m2 -> float16, bfloat16 -> float32 -> float64
//! ```
//! `least_upper_dtype(a, b, ...)` is the smallest (by priority, then bitsize) dtype reachable from
//! all inputs. `index` plays the role of tinygrad's `weakint`.

use std::sync::OnceLock;

use crate::{ConstValue, DType, Scalar};

/// The direct parents of a scalar kind in the lattice.
fn parents(s: Scalar) -> &'static [Scalar] {
    use Scalar::*;
    match s {
        Bool => &[Index],
        Index => &[Int8, UInt8],
        Int8 => &[Int16],
        Int16 => &[Int32],
        Int32 => &[Int64],
        Int64 => &[UInt64],
        UInt8 => &[Int16, UInt16],
        UInt16 => &[Int32, UInt32],
        UInt32 => &[Int64, UInt64],
        UInt64 => &[Fp8E4M3, Fp8E5M2],
        Fp8E4M3 | Fp8E5M2 => &[Float16, BFloat16],
        Float16 | BFloat16 => &[Float32],
        Float32 => &[Float64],
        Float64 | Void => &[],
    }
}

/// All dtypes reachable from `d` in the lattice, including `d` (as a bit set over the kinds).
fn ancestors(d: Scalar) -> u32 {
    let mut set = 1u32 << (d as u32);
    for &p in parents(d) {
        set |= ancestors(p);
    }
    set
}

const KINDS: [Scalar; 17] = {
    use Scalar::*;
    [
        Void, Index, Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Fp8E4M3,
        Fp8E5M2, Float16, BFloat16, Float32, Float64,
    ]
};

/// The least upper bound of `ds` in the promotion lattice (tinygrad's `least_upper_dtype`).
/// Vector widths and pointer-ness are ignored: the result is a scalar dtype.
///
/// # Panics
/// If `ds` is empty or contains `void` (which promotes with nothing).
pub fn least_upper_dtype(ds: &[DType]) -> DType {
    assert!(
        !ds.is_empty(),
        "least_upper_dtype: needs at least one dtype"
    );
    let mut common = u32::MAX;
    for d in ds {
        assert!(
            d.kind() != Scalar::Void,
            "least_upper_dtype: void does not promote (got {ds:?})"
        );
        common &= ancestors(d.kind());
    }
    KINDS
        .iter()
        .filter(|k| common & (1 << (**k as u32)) != 0)
        .map(|k| DType::scalar_of(*k))
        .min()
        .expect("float64 is an ancestor of every non-void dtype")
}

/// `dt` (as a scalar dtype) if it is a float, else the least upper bound of `dt` and
/// [`default_float`] (tinygrad's `least_upper_float`).
pub fn least_upper_float(dt: DType) -> DType {
    if dt.is_float() {
        dt.scalar()
    } else {
        least_upper_dtype(&[dt, default_float()])
    }
}

/// The default float dtype: `float32`, or the dtype named by the `DEFAULT_FLOAT` environment
/// variable (read once; it must name a float dtype).
pub fn default_float() -> DType {
    static DEFAULT: OnceLock<DType> = OnceLock::new();
    *DEFAULT.get_or_init(|| match std::env::var("DEFAULT_FLOAT") {
        Ok(name) if !name.is_empty() => {
            let dt: DType = name
                .parse()
                .unwrap_or_else(|e| panic!("DEFAULT_FLOAT: {e}"));
            assert!(dt.is_float(), "DEFAULT_FLOAT: {dt} is not a float dtype");
            dt
        }
        _ => DType::FLOAT32,
    })
}

/// The default integer dtype, `int32`.
pub const fn default_int() -> DType {
    DType::INT32
}

/// The accumulator dtype tinygrad uses for `sum` over `dt`: unsigned -> at least `uint32`,
/// signed/bool -> at least `int32`, floats -> at least `float32`.
pub fn sum_acc_dtype(dt: DType) -> DType {
    if dt.is_unsigned() {
        least_upper_dtype(&[dt, DType::UINT32])
    } else if dt.is_int() || dt.is_bool() {
        least_upper_dtype(&[dt, DType::INT32])
    } else {
        least_upper_dtype(&[dt, DType::FLOAT32])
    }
}

/// The dtype a binary op takes when a tensor of `dt` meets a "weak" constant (a Rust literal, as a
/// Python scalar in tinygrad's `_broadcasted`): a float tensor keeps its dtype; an int tensor keeps
/// its dtype against an int constant; otherwise the constant's default dtype (`bool`,
/// [`default_int`], [`default_float`]) is promoted with `dt`.
///
/// So `int32 tensor * 2.5 -> float32`, `float16 tensor + 1.0 -> float16`,
/// `bool tensor + 1 -> int32`, `int8 tensor + 1 -> int8`.
pub fn promote_with_const(dt: DType, c: &ConstValue) -> DType {
    let dt = dt.scalar();
    if dt.is_float() || (dt.is_int() && matches!(c, ConstValue::Int(_) | ConstValue::UInt(_))) {
        return dt;
    }
    let cdt = match c {
        ConstValue::Bool(_) => DType::BOOL,
        ConstValue::Int(_) | ConstValue::UInt(_) => default_int(),
        ConstValue::Float(_) => default_float(),
    };
    least_upper_dtype(&[dt, cdt])
}

/// Whether every value of `from` is exactly representable in `to` (tinygrad's
/// `can_lossless_cast`, like numpy's `can_cast`).
pub fn can_lossless_cast(from: DType, to: DType) -> bool {
    use Scalar::*;
    let (f, t) = (from.kind(), to.kind());
    if f == t || f == Bool {
        return true;
    }
    let fp8 = matches!(f, Fp8E4M3 | Fp8E5M2);
    match t {
        Index => from.is_int(),
        Float64 => {
            fp8 || matches!(
                f,
                Float32 | Float16 | BFloat16 | UInt32 | UInt16 | UInt8 | Int32 | Int16 | Int8
            )
        }
        Float32 => fp8 || matches!(f, Float16 | BFloat16 | UInt16 | UInt8 | Int16 | Int8),
        Float16 => fp8 || matches!(f, UInt8 | Int8),
        UInt64 => matches!(f, UInt32 | UInt16 | UInt8),
        UInt32 => matches!(f, UInt16 | UInt8),
        UInt16 => matches!(f, UInt8),
        Int64 => matches!(f, UInt32 | UInt16 | UInt8 | Int32 | Int16 | Int8),
        Int32 => matches!(f, UInt16 | UInt8 | Int16 | Int8),
        Int16 => matches!(f, UInt8 | Int8),
        _ => false,
    }
}
