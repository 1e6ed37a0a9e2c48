//! [`ConstValue`]: a scalar constant (bool / signed int / unsigned int / float) with tinygrad's
//! casting semantics and byte conversion for every dtype.
//!
//! Casting rules (tinygrad's `dtype.const` + `truncate`, with the float -> int corner cases made
//! total instead of raising):
//! - to `bool`: non-zero is `true` (NaN is `true`);
//! - to an integer dtype: integers wrap to the width (two's complement); floats truncate toward
//!   zero then wrap; floats outside the `i64` range saturate and NaN becomes 0 (the CPU backend's
//!   saturating conversion does the same, so constant folding and kernels agree);
//! - to a float dtype: round to nearest even in that format (`bfloat16` rounds to `f32` first,
//!   then to `bfloat16`, as tinygrad's `float_to_bf16` does); finite overflow gives infinity in
//!   f16, bf16, f32 and f64 but saturates to the largest finite value in the fp8 formats (as CUDA's
//!   `satfinite` and tinygrad do); NaN is preserved, and infinities are preserved where the format
//!   has them (an infinity cast to e4m3, which has none, becomes NaN).

use std::fmt;
use std::hash::{Hash, Hasher};

use half::{bf16, f16};

use crate::fp8::{Fp8Format, f64_to_fp8, fp8_to_f64};
use crate::{DType, Scalar};

/// A scalar constant. Equality and hashing treat floats by bit pattern with NaN canonicalized:
/// `-0.0 != 0.0`, `NaN == NaN` (tinygrad's `ConstFloat`), so constants can key caches.
#[derive(Clone, Copy, Debug)]
pub enum ConstValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer (also used for `index`).
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float, held as `f64`; it is exactly representable in the dtype it was cast to.
    Float(f64),
}

impl ConstValue {
    fn key(&self) -> (u8, u64) {
        match *self {
            ConstValue::Bool(b) => (0, b as u64),
            ConstValue::Int(i) => (1, i as u64),
            ConstValue::UInt(u) => (2, u),
            ConstValue::Float(f) if f.is_nan() => (3, f64::NAN.to_bits()),
            ConstValue::Float(f) => (3, f.to_bits()),
        }
    }

    /// The dtype tinygrad gives a Python scalar of this kind (`dtypes.from_py`):
    /// `bool`, the default int, or the default float.
    pub fn default_dtype(&self) -> DType {
        match self {
            ConstValue::Bool(_) => DType::BOOL,
            ConstValue::Int(_) | ConstValue::UInt(_) => crate::default_int(),
            ConstValue::Float(_) => crate::default_float(),
        }
    }

    /// The value as `f64` (integers convert to the nearest `f64`).
    pub fn as_f64(&self) -> f64 {
        match *self {
            ConstValue::Bool(b) => b as u8 as f64,
            ConstValue::Int(i) => i as f64,
            ConstValue::UInt(u) => u as f64,
            ConstValue::Float(f) => f,
        }
    }

    /// The value as `i64`: integers reinterpret their 64 bits, floats convert as a cast to
    /// `int64` does (truncate toward zero, saturate outside the range, NaN -> 0).
    pub fn as_i64(&self) -> i64 {
        match *self {
            ConstValue::Bool(b) => b as i64,
            ConstValue::Int(i) => i,
            ConstValue::UInt(u) => u as i64,
            ConstValue::Float(f) => f as i64,
        }
    }

    /// The value as `u64` bits (two's complement for negative integers).
    pub fn as_u64(&self) -> u64 {
        match *self {
            ConstValue::UInt(u) => u,
            ConstValue::Float(f) if f >= 0.0 => f as u64,
            other => other.as_i64() as u64,
        }
    }

    /// Truthiness: non-zero (NaN counts as non-zero).
    pub fn as_bool(&self) -> bool {
        match *self {
            ConstValue::Bool(b) => b,
            ConstValue::Int(i) => i != 0,
            ConstValue::UInt(u) => u != 0,
            ConstValue::Float(f) => f != 0.0,
        }
    }

    /// Whether the value is zero (of any kind; `-0.0` counts).
    pub fn is_zero(&self) -> bool {
        !self.as_bool()
    }

    /// Converts to the value a `dt` element holds (see the module docs for the rules). The result
    /// variant is canonical for `dt`: `Bool` for bool, `UInt` for unsigned, `Int` for signed and
    /// index, `Float` for floats.
    ///
    /// # Panics
    /// If `dt` is `void` or a pointer.
    pub fn cast(self, dt: DType) -> ConstValue {
        assert!(
            !dt.is_ptr() && dt.kind() != Scalar::Void,
            "ConstValue::cast: can't cast to {dt:?}"
        );
        let s = dt.kind();
        if dt.is_bool() {
            return ConstValue::Bool(self.as_bool());
        }
        if dt.is_int() {
            let bits = s.bitsize();
            let raw: u64 = match self {
                ConstValue::Float(f) if f.is_finite() && f.abs() < 9.223_372_036_854_776e18 => {
                    f.trunc() as i64 as u64
                }
                ConstValue::Float(f) if dt.is_unsigned() && f >= 0.0 => f as u64,
                other => other.as_i64() as u64,
            };
            return if dt.is_unsigned() {
                ConstValue::UInt(if bits == 64 {
                    raw
                } else {
                    raw & ((1u64 << bits) - 1)
                })
            } else {
                let shift = 64 - bits;
                ConstValue::Int(((raw << shift) as i64) >> shift)
            };
        }
        // Floats. Integers convert straight to the target width where Rust can (one rounding).
        let v = match (s, self) {
            (Scalar::Float64, _) => self.as_f64(),
            (Scalar::Float32, ConstValue::Int(i)) => i as f32 as f64,
            (Scalar::Float32, ConstValue::UInt(u)) => u as f32 as f64,
            (Scalar::Float32, _) => self.as_f64() as f32 as f64,
            (Scalar::Float16, _) => f64_to_f16(self.as_f64()).to_f64(),
            // tinygrad rounds to f32 first, then to bf16 (ties to even).
            (Scalar::BFloat16, _) => bf16::from_f32(self.as_f64() as f32).to_f64(),
            (Scalar::Fp8E4M3, _) => fp8_round(self.as_f64(), Fp8Format::E4M3),
            (Scalar::Fp8E5M2, _) => fp8_round(self.as_f64(), Fp8Format::E5M2),
            _ => unreachable!("{dt:?} is a float dtype"),
        };
        ConstValue::Float(v)
    }

    /// The little-endian bytes of this value stored as one `dt` element (after [`Self::cast`]):
    /// `dt.itemsize()` bytes for a scalar dtype (`bool` is one byte, `index` eight). For a vector
    /// dtype this is one lane, `dt.scalar().itemsize()` bytes.
    pub fn to_le_bytes(self, dt: DType) -> Vec<u8> {
        let v = self.cast(dt);
        match dt.kind() {
            Scalar::Bool => vec![v.as_bool() as u8],
            Scalar::Int8 | Scalar::UInt8 => vec![v.as_u64() as u8],
            Scalar::Int16 | Scalar::UInt16 => (v.as_u64() as u16).to_le_bytes().to_vec(),
            Scalar::Int32 | Scalar::UInt32 => (v.as_u64() as u32).to_le_bytes().to_vec(),
            Scalar::Int64 | Scalar::UInt64 | Scalar::Index => v.as_u64().to_le_bytes().to_vec(),
            Scalar::Float16 => f64_to_f16(v.as_f64()).to_le_bytes().to_vec(),
            Scalar::BFloat16 => bf16::from_f64(v.as_f64()).to_le_bytes().to_vec(),
            Scalar::Float32 => (v.as_f64() as f32).to_le_bytes().to_vec(),
            Scalar::Float64 => v.as_f64().to_le_bytes().to_vec(),
            Scalar::Fp8E4M3 => vec![f64_to_fp8(v.as_f64(), Fp8Format::E4M3)],
            Scalar::Fp8E5M2 => vec![f64_to_fp8(v.as_f64(), Fp8Format::E5M2)],
            Scalar::Void => unreachable!("cast rejected void"),
        }
    }

    /// Reads one `dt` element from little-endian bytes.
    ///
    /// # Panics
    /// If `bytes.len() != dt.itemsize()` or `dt` is void/pointer/vector.
    pub fn from_le_bytes(dt: DType, bytes: &[u8]) -> ConstValue {
        assert!(
            dt.count() == 1 && !dt.is_ptr() && dt.kind() != Scalar::Void,
            "ConstValue::from_le_bytes: {dt:?} is not a scalar element dtype"
        );
        assert_eq!(
            bytes.len(),
            dt.itemsize(),
            "ConstValue::from_le_bytes: {dt} needs {} bytes, got {}",
            dt.itemsize(),
            bytes.len()
        );
        let mut b8 = [0u8; 8];
        b8[..bytes.len()].copy_from_slice(bytes);
        let raw = u64::from_le_bytes(b8);
        match dt.kind() {
            Scalar::Bool => ConstValue::Bool(raw != 0),
            Scalar::UInt8 | Scalar::UInt16 | Scalar::UInt32 | Scalar::UInt64 => {
                ConstValue::UInt(raw)
            }
            Scalar::Int8 => ConstValue::Int(raw as u8 as i8 as i64),
            Scalar::Int16 => ConstValue::Int(raw as u16 as i16 as i64),
            Scalar::Int32 => ConstValue::Int(raw as u32 as i32 as i64),
            Scalar::Int64 | Scalar::Index => ConstValue::Int(raw as i64),
            Scalar::Float16 => ConstValue::Float(f16::from_bits(raw as u16).to_f64()),
            Scalar::BFloat16 => ConstValue::Float(bf16::from_bits(raw as u16).to_f64()),
            Scalar::Float32 => ConstValue::Float(f32::from_bits(raw as u32) as f64),
            Scalar::Float64 => ConstValue::Float(f64::from_bits(raw)),
            Scalar::Fp8E4M3 => ConstValue::Float(fp8_to_f64(raw as u8, Fp8Format::E4M3)),
            Scalar::Fp8E5M2 => ConstValue::Float(fp8_to_f64(raw as u8, Fp8Format::E5M2)),
            Scalar::Void => unreachable!("checked above"),
        }
    }
}

/// Rounds an `f64` to the nearest `f16`, ties to even, in one step (as Python's
/// `struct.pack('e', x)`, which tinygrad's `float_to_fp16` uses); overflow gives infinity with the
/// sign of `x`, NaN stays NaN.
///
/// `half`'s `f16::from_f64` is not used: it either goes through `f32` (double rounding) or drops
/// the low 32 mantissa bits before rounding, so inputs just above a halfway point (such as
/// `1 + 2^-11 + 2^-40`) round down instead of up.
fn f64_to_f16(x: f64) -> f16 {
    let bits = x.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    if x.is_nan() {
        // A quiet NaN keeping the sign and the top payload bits.
        return f16::from_bits(sign | 0x7e00 | ((bits >> 42) & 0x1ff) as u16);
    }
    if x.is_infinite() {
        return f16::from_bits(sign | 0x7c00);
    }
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Zero or an f64 subnormal (below 2^-1022): rounds to a signed zero.
        return f16::from_bits(sign);
    }
    let exp = biased - 1023;
    // The 53-bit significand; the value is `sig * 2^(exp - 52)`.
    let sig = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    // Keep 11 significant bits for a normal result; fewer below 2^-14, where f16's quantum is a
    // fixed 2^-24.
    let shift = if exp >= -14 {
        42
    } else {
        42 + (-14 - exp) as u32
    };
    if shift > 53 {
        // Below half the smallest subnormal (2^-25): rounds to zero.
        return f16::from_bits(sign);
    }
    let half = 1u64 << (shift - 1);
    let rem = sig & ((half << 1) - 1);
    let mut q = sig >> shift;
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    // Normal: exponent field `exp + 15` plus the mantissa `q - 2^10`, written as one addition so
    // a rounding carry bumps the exponent. Subnormal: `q` itself (`q == 2^10` is the smallest
    // normal).
    let mag = if exp >= -14 {
        (((exp + 14) as u64) << 10) + q
    } else {
        q
    };
    if mag >= 0x7c00 {
        return f16::from_bits(sign | 0x7c00);
    }
    f16::from_bits(sign | mag as u16)
}

fn fp8_round(x: f64, f: Fp8Format) -> f64 {
    fp8_to_f64(f64_to_fp8(x, f), f)
}

impl PartialEq for ConstValue {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for ConstValue {}

impl Hash for ConstValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Display for ConstValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConstValue::Bool(b) => write!(f, "{b}"),
            ConstValue::Int(i) => write!(f, "{i}"),
            ConstValue::UInt(u) => write!(f, "{u}"),
            ConstValue::Float(x) if x.is_nan() => f.write_str("nan"),
            ConstValue::Float(x) if x.is_infinite() => {
                f.write_str(if x > 0.0 { "inf" } else { "-inf" })
            }
            ConstValue::Float(x) if x == x.trunc() && x.abs() < 1e16 => write!(f, "{x:.1}"),
            ConstValue::Float(x) => write!(f, "{x}"),
        }
    }
}

macro_rules! from_native {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for ConstValue {
            fn from(x: $t) -> Self { ConstValue::$v(x as $c) }
        }
    )*};
}

from_native!(i8 => Int as i64, i16 => Int as i64, i32 => Int as i64, i64 => Int as i64,
    isize => Int as i64, u8 => UInt as u64, u16 => UInt as u64, u32 => UInt as u64,
    u64 => UInt as u64, usize => UInt as u64, f32 => Float as f64, f64 => Float as f64);

impl From<bool> for ConstValue {
    fn from(x: bool) -> Self {
        ConstValue::Bool(x)
    }
}

impl From<f16> for ConstValue {
    fn from(x: f16) -> Self {
        ConstValue::Float(x.to_f64())
    }
}

impl From<bf16> for ConstValue {
    fn from(x: bf16) -> Self {
        ConstValue::Float(x.to_f64())
    }
}
