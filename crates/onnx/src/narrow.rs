//! ONNX element types the tensor library has no dtype for — the sub-byte integers (`INT4`,
//! `UINT4`, `INT2`, `UINT2`) and the float formats `FLOAT8E4M3FNUZ`, `FLOAT8E5M2FNUZ`,
//! `FLOAT4E2M1` and `FLOAT8E8M0` — held unpacked in a wider *container* dtype that represents
//! each of their values exactly: `INT8`/`UINT8` for the integers, `FLOAT32` for the floats.
//!
//! A value of such a type travels through the graph as its container tensor with a [`Narrow`]
//! tag beside it (the model keeps the tags by value name). Only the ops that ONNX defines on
//! these types see them — `Cast`, `CastLike`, `QuantizeLinear`, `DequantizeLinear` and the
//! movement ops, which keep the tag — and every other op refuses a tagged input, so container
//! arithmetic can never pass for the narrow type's.
//!
//! The conversions *to* a narrow type follow ONNX's `Cast` rules: round to nearest even for the
//! float formats, saturating by default (`saturate=0`: out of range is NaN, the FNUZ formats
//! having no infinity); `FLOAT4E2M1`, with neither NaN nor infinity, always saturates (NaN
//! becomes -0, as in onnx's reference through ml_dtypes); `FLOAT8E8M0` keeps the exponent,
//! rounded as `round_mode` says. Integers wrap to the narrow width (two's complement); a float
//! truncates toward zero and, out of the type's range (undefined in ONNX), becomes 0 as onnx's
//! reference gives.

use tinygrad_tensor::{DType, Tensor};

use crate::proto::tensor_proto::DataType;

/// An ONNX element type held in a wider container dtype (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Narrow {
    /// 4-bit signed integer, -8..=7, in `INT8`.
    Int4,
    /// 4-bit unsigned integer, 0..=15, in `UINT8`.
    Uint4,
    /// 2-bit signed integer, -2..=1, in `INT8`.
    Int2,
    /// 2-bit unsigned integer, 0..=3, in `UINT8`.
    Uint2,
    /// 8-bit float, 4 exponent bits (bias 8), 3 mantissa bits, no infinity or -0, in `FLOAT32`.
    Float8E4M3Fnuz,
    /// 8-bit float, 5 exponent bits (bias 16), 2 mantissa bits, no infinity or -0, in `FLOAT32`.
    Float8E5M2Fnuz,
    /// 4-bit float, 2 exponent bits, 1 mantissa bit (0, 0.5, 1, 1.5, 2, 3, 4, 6), in `FLOAT32`.
    Float4E2M1,
    /// 8-bit power of two, 2^(e-127) (0xFF is NaN), in `FLOAT32`.
    Float8E8M0,
}

/// How a float becomes a `FLOAT8E8M0` exponent (`Cast`'s `round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundMode {
    /// Any fraction rounds the exponent up (the default).
    Up,
    /// The fraction is dropped.
    Down,
    /// Round to nearest, ties up.
    Nearest,
}

impl Narrow {
    /// The narrow type of ONNX element type `elem`, if it is one.
    pub fn of(elem: i32) -> Option<Narrow> {
        Some(match DataType::try_from(elem).ok()? {
            DataType::Int4 => Narrow::Int4,
            DataType::Uint4 => Narrow::Uint4,
            DataType::Int2 => Narrow::Int2,
            DataType::Uint2 => Narrow::Uint2,
            DataType::Float8e4m3fnuz => Narrow::Float8E4M3Fnuz,
            DataType::Float8e5m2fnuz => Narrow::Float8E5M2Fnuz,
            DataType::Float4e2m1 => Narrow::Float4E2M1,
            DataType::Float8e8m0 => Narrow::Float8E8M0,
            _ => return None,
        })
    }

    /// The dtype that holds its values.
    pub fn container(self) -> DType {
        match self {
            Narrow::Int4 | Narrow::Int2 => DType::INT8,
            Narrow::Uint4 | Narrow::Uint2 => DType::UINT8,
            _ => DType::FLOAT32,
        }
    }

    /// ONNX's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Narrow::Int4 => "INT4",
            Narrow::Uint4 => "UINT4",
            Narrow::Int2 => "INT2",
            Narrow::Uint2 => "UINT2",
            Narrow::Float8E4M3Fnuz => "FLOAT8E4M3FNUZ",
            Narrow::Float8E5M2Fnuz => "FLOAT8E5M2FNUZ",
            Narrow::Float4E2M1 => "FLOAT4E2M1",
            Narrow::Float8E8M0 => "FLOAT8E8M0",
        }
    }

    /// Bits per element in a file (packed low bits first).
    pub fn bits(self) -> usize {
        match self {
            Narrow::Int4 | Narrow::Uint4 | Narrow::Float4E2M1 => 4,
            Narrow::Int2 | Narrow::Uint2 => 2,
            _ => 8,
        }
    }

    /// The integer range, for the integer types.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            Narrow::Int4 => Some((-8, 7)),
            Narrow::Uint4 => Some((0, 15)),
            Narrow::Int2 => Some((-2, 1)),
            Narrow::Uint2 => Some((0, 3)),
            _ => None,
        }
    }

    /// The value of the `bits()`-wide code `code`.
    pub fn decode(self, code: u8) -> f32 {
        let bits = self.bits() as u32;
        let code = if bits == 8 {
            code
        } else {
            code & ((1u8 << bits) - 1)
        };
        match self {
            Narrow::Int4 | Narrow::Int2 => {
                let shift = 8 - bits;
                f32::from(((code << shift) as i8) >> shift)
            }
            Narrow::Uint4 | Narrow::Uint2 => f32::from(code),
            Narrow::Float8E4M3Fnuz => minifloat(code, 4, 3, 8, true),
            Narrow::Float8E5M2Fnuz => minifloat(code, 5, 2, 16, true),
            Narrow::Float4E2M1 => minifloat(code, 2, 1, 1, false),
            Narrow::Float8E8M0 => match code {
                0xFF => f32::NAN,
                0 => f32::from_bits(1 << 22), // 2^-127, a subnormal f32
                e => f32::from_bits(u32::from(e) << 23),
            },
        }
    }

    /// `n` elements packed in `bytes` (a file's raw data), as the container dtype's
    /// little-endian bytes; `None` when `bytes` has another length than `n` elements need.
    pub fn unpack(self, bytes: &[u8], n: usize) -> Option<Vec<u8>> {
        let per_byte = 8 / self.bits();
        if bytes.len() != n.div_ceil(per_byte) {
            return None;
        }
        let code = |i: usize| bytes[i / per_byte] >> (self.bits() * (i % per_byte));
        let mut out = Vec::with_capacity(n * self.container().itemsize());
        for i in 0..n {
            let v = self.decode(code(i));
            match self.container() {
                d if d == DType::FLOAT32 => out.extend(v.to_le_bytes()),
                d if d == DType::INT8 => out.push(v as i8 as u8),
                _ => out.push(v as u8),
            }
        }
        Some(out)
    }

    /// Whether `v` (a container value) is a value of this type.
    pub fn holds(self, v: f64) -> bool {
        if let Some((lo, hi)) = self.int_range() {
            return v.fract() == 0.0 && (lo as f64..=hi as f64).contains(&v);
        }
        if v.is_nan() {
            return self != Narrow::Float4E2M1;
        }
        // every value of these formats is an f32; rounding to the format must leave it
        let f = v as f32;
        f64::from(f) == v && self.round_float(f, false, RoundMode::Nearest).to_bits() == f.to_bits()
            || (f == 0.0 && matches!(self, Narrow::Float8E4M3Fnuz | Narrow::Float8E5M2Fnuz))
    }

    /// A float rounded to this float type (the value, as an f32), by `Cast`'s rules.
    pub fn round_float(self, x: f32, saturate: bool, mode: RoundMode) -> f32 {
        match self {
            Narrow::Float8E8M0 => e8m0(x, saturate, mode),
            Narrow::Float4E2M1 => nearest_even(self, x, true).unwrap_or(-0.0),
            _ => nearest_even(self, x, saturate).unwrap_or(f32::NAN),
        }
    }

    /// An integer type's value of integer `v`: the low bits, two's complement.
    pub fn wrap_int(self, v: i64) -> i64 {
        let bits = self.bits() as u32;
        let low = v & ((1i64 << bits) - 1);
        match self {
            Narrow::Int4 | Narrow::Int2 if low >= 1 << (bits - 1) => low - (1 << bits),
            _ => low,
        }
    }

    /// An integer type's value of float `x`: truncated toward zero; 0 out of range or NaN.
    pub fn int_of_float(self, x: f64) -> i64 {
        let (lo, hi) = self.int_range().unwrap_or((0, 0));
        let t = x.trunc();
        if t >= lo as f64 && t <= hi as f64 {
            t as i64
        } else {
            0
        }
    }
}

/// A minifloat code's value: `e` exponent bits with `bias`, `m` mantissa bits; `fnuz`: 0x80 is
/// NaN and there is no -0 or infinity (the other formats here have neither NaN nor infinity).
fn minifloat(code: u8, e: u32, m: u32, bias: i32, fnuz: bool) -> f32 {
    let width = 1 + e + m;
    let sign = (code >> (width - 1)) & 1;
    if fnuz && code == 0x80 {
        return f32::NAN;
    }
    let exp = i32::from((code >> m) & ((1 << e) - 1) as u8);
    let man = f32::from(code & ((1 << m) - 1) as u8) / (1u32 << m) as f32;
    let mag = if exp == 0 {
        man * 2f32.powi(1 - bias)
    } else {
        (1.0 + man) * 2f32.powi(exp - bias)
    };
    if sign == 1 { -mag } else { mag }
}

/// The largest code of a positive finite value of a minifloat type.
fn max_code(t: Narrow) -> u8 {
    match t {
        Narrow::Float4E2M1 => 0x7,
        _ => 0x7F,
    }
}

/// `x` rounded to the nearest value of minifloat type `t`, ties to the even code; beyond the
/// largest value it saturates to it, or is `None` (NaN) without `saturate`. NaN is `None`.
fn nearest_even(t: Narrow, x: f32, saturate: bool) -> Option<f32> {
    if x.is_nan() {
        return None;
    }
    let fnuz = matches!(t, Narrow::Float8E4M3Fnuz | Narrow::Float8E5M2Fnuz);
    let neg = x.is_sign_negative();
    let a = f64::from(x.abs());
    let top = max_code(t);
    let max = f64::from(t.decode(top));
    let step = max - f64::from(t.decode(top - 1));
    // the largest code is odd: its midpoint with the next (absent) value rounds up, past it
    let mag = if a >= max + step / 2.0 {
        if saturate {
            max
        } else {
            return None;
        }
    } else if a >= max {
        max
    } else {
        // the codes' values rise with the code: find the neighbours of `a`
        let (mut lo, mut hi) = (0u8, top);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if f64::from(t.decode(mid)) <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let (vl, vh) = (f64::from(t.decode(lo)), f64::from(t.decode(hi)));
        let pick_hi = if a - vl == vh - a {
            hi % 2 == 0
        } else {
            vh - a < a - vl
        };
        if a <= vl {
            vl
        } else if pick_hi {
            vh
        } else {
            vl
        }
    };
    let v = mag as f32;
    Some(if neg && !(fnuz && v == 0.0) { -v } else { v })
}

/// `x` as a `FLOAT8E8M0` value: its f32 exponent (sign ignored), rounded as `mode` says;
/// NaN stays NaN, infinity saturates to 2^127 or is NaN without `saturate`.
fn e8m0(x: f32, saturate: bool, mode: RoundMode) -> f32 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xFF;
    if x.is_nan() || (x.is_infinite() && !saturate) {
        return f32::NAN;
    }
    if x.is_infinite() {
        return Narrow::Float8E8M0.decode(0xFE);
    }
    let frac = bits & 0x7F_FFFF;
    let up = match mode {
        RoundMode::Up => frac != 0,
        RoundMode::Down => false,
        RoundMode::Nearest => {
            let (g, r, s) = (
                frac & 0x40_0000 != 0,
                frac & 0x20_0000 != 0,
                frac & 0x1F_FFFF != 0,
            );
            g && (r || s || exp > 0)
        }
    };
    let e = if up && !(saturate && exp == 0xFE) {
        exp + 1
    } else {
        exp
    };
    Narrow::Float8E8M0.decode(e as u8)
}

/// `Cast` of `x` to narrow type `to` (host side: these conversions are rare and bit-level).
pub fn cast_to(
    x: &Tensor,
    to: Narrow,
    saturate: bool,
    mode: RoundMode,
    device: &str,
) -> Result<Tensor, String> {
    let shape = x.shape();
    if to.int_range().is_some() {
        let vals: Vec<i64> = if x.dtype().is_float() {
            x.cast(DType::FLOAT64)
                .try_to_vec::<f64>()
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|v| to.int_of_float(v))
                .collect()
        } else {
            x.cast(DType::INT64)
                .try_to_vec::<i64>()
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|v| to.wrap_int(v))
                .collect()
        };
        return Ok(Tensor::from_slice_on(&vals, &shape, device).cast(to.container()));
    }
    let vals: Vec<f32> = x
        .cast(DType::FLOAT32)
        .try_to_vec::<f32>()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|v| to.round_float(v, saturate, mode))
        .collect();
    Ok(Tensor::from_slice_on(&vals, &shape, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_formats_decode_to_their_ranges() {
        assert_eq!(Narrow::Float8E4M3Fnuz.decode(0x7F), 240.0);
        assert_eq!(Narrow::Float8E5M2Fnuz.decode(0x7F), 57344.0);
        assert!(Narrow::Float8E4M3Fnuz.decode(0x80).is_nan());
        assert_eq!(Narrow::Float8E4M3Fnuz.decode(0x01), 2f32.powi(-10));
        let f4: Vec<f32> = (0..8).map(|c| Narrow::Float4E2M1.decode(c)).collect();
        assert_eq!(f4, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(Narrow::Float4E2M1.decode(0xF), -6.0);
        assert_eq!(Narrow::Float8E8M0.decode(127), 1.0);
        assert_eq!(Narrow::Int4.decode(0xF), -1.0);
        assert_eq!(Narrow::Int2.decode(0b10), -2.0);
    }

    #[test]
    fn rounding_is_nearest_even_and_saturates() {
        let f4 = |x| Narrow::Float4E2M1.round_float(x, true, RoundMode::Up);
        // ties: 0.25 between 0 and 0.5 -> 0; 5 between 4 and 6 -> 4; 0.75 -> 1; 2.5 -> 2
        assert_eq!(
            [f4(0.25), f4(5.0), f4(0.75), f4(2.5), f4(1e6)],
            [0.0, 4.0, 1.0, 2.0, 6.0]
        );
        assert_eq!(f4(f32::NEG_INFINITY), -6.0);
        let e4 = |x, s| Narrow::Float8E4M3Fnuz.round_float(x, s, RoundMode::Up);
        assert_eq!(e4(0.478_925_47, true), 0.468_75);
        assert_eq!(e4(f32::INFINITY, true), 240.0);
        assert!(e4(f32::INFINITY, false).is_nan());
        assert_eq!(e4(247.0, false), 240.0);
        assert!(e4(248.0, false).is_nan());
        // no negative zero in FNUZ
        assert_eq!(e4(-1e-7, true).to_bits(), 0);
        let e8 = |x| Narrow::Float8E8M0.round_float(x, true, RoundMode::Up);
        assert_eq!([e8(1.1), e8(0.124), e8(4.0)], [2.0, 0.125, 4.0]);
    }

    #[test]
    fn integers_wrap_and_floats_out_of_range_are_zero() {
        assert_eq!(Narrow::Int4.wrap_int(8), -8);
        assert_eq!(Narrow::Int4.wrap_int(-9), 7);
        assert_eq!(Narrow::Uint2.wrap_int(5), 1);
        assert_eq!(Narrow::Int4.int_of_float(-9.0), 0);
        assert_eq!(Narrow::Int4.int_of_float(-7.9), -7);
        assert_eq!(Narrow::Uint4.int_of_float(15.0), 15);
    }

    #[test]
    fn unpacking_reads_low_bits_first_and_checks_the_length() {
        let out = Narrow::Int4.unpack(&[0x8F, 0x01], 3).unwrap();
        assert_eq!(out, [0xFF, 0xF8, 0x01]); // -1, -8, 1
        assert!(Narrow::Int4.unpack(&[0x8F], 3).is_none());
        let out = Narrow::Uint2.unpack(&[0b1110_0100], 4).unwrap();
        assert_eq!(out, [0, 1, 2, 3]);
    }
}
