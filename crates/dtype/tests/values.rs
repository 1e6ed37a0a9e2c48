//! Constant casting and byte conversion: integer wrapping, f16/bf16/fp8 rounding, byte round trips.
//!
//! Expected float values are derived from the format definitions in the comments (and, for f16,
//! cross-checked against numpy's `np.float16(x)` and Python's `struct.pack('e', x)`, which round
//! correctly from double).

use tinygrad_dtype::fp8::{Fp8Format, f64_to_fp8, fp8_to_f64};
use tinygrad_dtype::{ConstValue, DType};

fn p2(e: i32) -> f64 {
    2f64.powi(e)
}

fn cast(v: impl Into<ConstValue>, dt: DType) -> ConstValue {
    v.into().cast(dt)
}

/// `x` cast to the float dtype `dt`, as f64.
fn castf(x: f64, dt: DType) -> f64 {
    match ConstValue::Float(x).cast(dt) {
        ConstValue::Float(f) => f,
        other => panic!("{dt} cast gave {other:?}"),
    }
}

/// Same value, bit for bit (so `-0.0 != 0.0`), with any NaN equal to any NaN.
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[track_caller]
fn assert_same(got: f64, want: f64) {
    assert!(
        same(got, want),
        "got {got:e} ({:#x}), want {want:e}",
        got.to_bits()
    );
}

/// `(largest finite, smallest positive subnormal)` of each float dtype.
fn float_extremes(dt: DType) -> (f64, f64) {
    match dt {
        // f16: (2 - 2^-10) * 2^15, and 2^-10 * 2^-14.
        DType::FLOAT16 => (65504.0, p2(-24)),
        // bf16: (2 - 2^-7) * 2^127 (bits 0x7f7f), and 2^-7 * 2^-126.
        DType::BFLOAT16 => ((2.0 - p2(-7)) * p2(127), p2(-133)),
        DType::FLOAT32 => (f32::MAX as f64, p2(-149)),
        DType::FLOAT64 => (f64::MAX, f64::from_bits(1)),
        // e4m3: exponent field 15 with mantissa 0b110 (0b111 is NaN): 1.75 * 2^(15-7) = 448;
        // smallest subnormal 2^-3 * 2^(1-7) = 2^-9.
        DType::FP8E4M3 => (448.0, p2(-9)),
        // e5m2: exponent field 30 (31 is inf/NaN), mantissa 0b11: 1.75 * 2^(30-15) = 57344;
        // smallest subnormal 2^-2 * 2^(1-15) = 2^-16.
        DType::FP8E5M2 => (57344.0, p2(-16)),
        _ => panic!("{dt} is not a float"),
    }
}

fn has_inf(dt: DType) -> bool {
    dt.is_float() && dt != DType::FP8E4M3
}

fn all_with_index() -> Vec<DType> {
    let mut v = DType::ALL.to_vec();
    v.push(DType::INDEX);
    v
}

fn samples(dt: DType) -> Vec<ConstValue> {
    use ConstValue::*;
    let mut v = vec![
        dt.min(),
        dt.max(),
        Bool(false),
        Bool(true),
        Int(0),
        Int(1),
        Int(-1),
        Int(100),
        Int(-100),
        Int(300),
        Int(70000),
        Int(i64::MIN),
        Int(i64::MAX),
        UInt(u64::MAX),
        UInt(1 << 63),
        Float(0.0),
        Float(-0.0),
        Float(1.5),
        Float(-2.25),
        Float(0.1),
        Float(3.9),
        Float(-3.9),
        Float(1e30),
        Float(-1e-30),
        Float(f64::NAN),
        Float(-f64::NAN),
        Float(f64::INFINITY),
        Float(f64::NEG_INFINITY),
    ];
    if dt.is_float() {
        let (max, tiny) = float_extremes(dt);
        v.extend([Float(max), Float(-max), Float(tiny), Float(-tiny)]);
    }
    v
}

#[test]
fn byte_round_trip_every_dtype() {
    for dt in all_with_index() {
        for s in samples(dt) {
            let c = s.cast(dt);
            let bytes = s.to_le_bytes(dt);
            assert_eq!(bytes.len(), dt.itemsize(), "{dt} {s:?}");
            let back = ConstValue::from_le_bytes(dt, &bytes);
            // ConstValue equality is by bits with NaN == NaN, so -0.0 and NaN are checked exactly.
            assert_eq!(back, c, "{dt}: {s:?} -> {bytes:02x?}");
            // The cast result is already a `dt` value: casting again and re-encoding change nothing.
            assert_eq!(c.cast(dt), c, "{dt}: cast of {s:?} is not idempotent");
            // (NaN payloads and signs need not survive: e4m3 decodes both NaN patterns to NaN.)
            if !c.as_f64().is_nan() {
                assert_eq!(back.to_le_bytes(dt), bytes, "{dt}: {s:?}");
            }
        }
    }
}

#[test]
fn byte_round_trip_keeps_extremes() {
    for dt in DType::ALL {
        if dt.is_float() {
            let (max, tiny) = float_extremes(dt);
            for x in [max, -max, tiny, -tiny, 0.0, -0.0] {
                assert_same(castf(x, dt), x);
                let back = ConstValue::from_le_bytes(dt, &ConstValue::Float(x).to_le_bytes(dt));
                assert_same(back.as_f64(), x);
            }
            let nan = ConstValue::from_le_bytes(dt, &ConstValue::Float(f64::NAN).to_le_bytes(dt));
            assert!(nan.as_f64().is_nan(), "{dt}");
            for inf in [f64::INFINITY, f64::NEG_INFINITY] {
                let back = ConstValue::from_le_bytes(dt, &ConstValue::Float(inf).to_le_bytes(dt));
                if has_inf(dt) {
                    assert_same(back.as_f64(), inf);
                } else {
                    assert!(
                        back.as_f64().is_nan(),
                        "{dt}: inf has no encoding, becomes NaN"
                    );
                }
            }
        } else {
            for c in [dt.min(), dt.max()] {
                assert_eq!(ConstValue::from_le_bytes(dt, &c.to_le_bytes(dt)), c, "{dt}");
            }
        }
    }
}

#[test]
fn known_byte_encodings() {
    let enc = |v: ConstValue, dt: DType| v.to_le_bytes(dt);
    assert_eq!(enc(true.into(), DType::BOOL), [1]);
    assert_eq!(enc(5.into(), DType::BOOL), [1]);
    assert_eq!(enc((-2).into(), DType::INT16), [0xfe, 0xff]);
    assert_eq!(
        enc(0x1234_5678.into(), DType::UINT32),
        [0x78, 0x56, 0x34, 0x12]
    );
    assert_eq!(enc((-1).into(), DType::INT64), [0xff; 8]);
    assert_eq!(enc((-1).into(), DType::INDEX), [0xff; 8]);
    assert_eq!(enc(1.0.into(), DType::FLOAT16), [0x00, 0x3c]);
    assert_eq!(enc((-2.0).into(), DType::FLOAT16), [0x00, 0xc0]);
    assert_eq!(enc(65504.0.into(), DType::FLOAT16), [0xff, 0x7b]);
    assert_eq!(enc(1.0.into(), DType::BFLOAT16), [0x80, 0x3f]);
    assert_eq!(enc((-0.0).into(), DType::BFLOAT16), [0x00, 0x80]);
    assert_eq!(enc(1.0.into(), DType::FLOAT32), [0x00, 0x00, 0x80, 0x3f]);
    assert_eq!(enc(1.0.into(), DType::FLOAT64), 1.0f64.to_le_bytes());
    // e4m3 1.0: exponent field 7 (bias 7) -> 0b0_0111_000; 448 -> 0b0_1111_110.
    assert_eq!(enc(1.0.into(), DType::FP8E4M3), [0x38]);
    assert_eq!(enc(448.0.into(), DType::FP8E4M3), [0x7e]);
    assert_eq!(enc((-448.0).into(), DType::FP8E4M3), [0xfe]);
    // e5m2 1.0: exponent field 15 (bias 15) -> 0b0_01111_00; 57344 -> 0b0_11110_11; inf 0b0_11111_00.
    assert_eq!(enc(1.0.into(), DType::FP8E5M2), [0x3c]);
    assert_eq!(enc(57344.0.into(), DType::FP8E5M2), [0x7b]);
    assert_eq!(enc(f64::INFINITY.into(), DType::FP8E5M2), [0x7c]);
    assert_eq!(enc(f64::NEG_INFINITY.into(), DType::FP8E5M2), [0xfc]);
}

#[test]
fn every_8_and_16_bit_pattern_round_trips() {
    for dt in [DType::INT8, DType::UINT8, DType::FP8E4M3, DType::FP8E5M2] {
        for b in 0..=255u8 {
            let v = ConstValue::from_le_bytes(dt, &[b]);
            let again = v.to_le_bytes(dt);
            if v.as_f64().is_nan() {
                let back = ConstValue::from_le_bytes(dt, &again);
                assert!(back.as_f64().is_nan(), "{dt} {b:#04x}");
            } else {
                assert_eq!(again, [b], "{dt} {b:#04x} = {v}");
            }
        }
    }
    for dt in [DType::INT16, DType::UINT16, DType::FLOAT16, DType::BFLOAT16] {
        for bits in 0..=u16::MAX {
            let v = ConstValue::from_le_bytes(dt, &bits.to_le_bytes());
            let again = v.to_le_bytes(dt);
            if v.as_f64().is_nan() {
                let back = ConstValue::from_le_bytes(dt, &again);
                assert!(back.as_f64().is_nan(), "{dt} {bits:#06x}");
            } else {
                assert_eq!(again, bits.to_le_bytes(), "{dt} {bits:#06x} = {v}");
            }
        }
    }
    assert_eq!(
        ConstValue::from_le_bytes(DType::BOOL, &[0]),
        ConstValue::Bool(false)
    );
    assert_eq!(
        ConstValue::from_le_bytes(DType::BOOL, &[1]),
        ConstValue::Bool(true)
    );
}

#[test]
#[should_panic(expected = "needs 4 bytes")]
fn from_le_bytes_checks_length() {
    ConstValue::from_le_bytes(DType::FLOAT32, &[0, 0]);
}

// ---------------------------------------------------------------------------------------------
// Integer casts: wrap to the width (two's complement), floats truncate toward zero first.

#[test]
fn integer_wrapping_casts() {
    assert_eq!(cast(300, DType::UINT8), ConstValue::UInt(44));
    assert_eq!(cast(-1, DType::UINT32), ConstValue::UInt(4_294_967_295));
    assert_eq!(cast(-1, DType::UINT64), ConstValue::UInt(u64::MAX));
    assert_eq!(cast(128, DType::INT8), ConstValue::Int(-128));
    assert_eq!(cast(255, DType::INT8), ConstValue::Int(-1));
    assert_eq!(cast(65535, DType::INT16), ConstValue::Int(-1));
    assert_eq!(cast(65536, DType::UINT16), ConstValue::UInt(0));
    assert_eq!(cast(1i64 << 31, DType::INT32), ConstValue::Int(-(1 << 31)));
    assert_eq!(cast(u64::MAX, DType::INT64), ConstValue::Int(-1));
    assert_eq!(cast(u64::MAX, DType::INT32), ConstValue::Int(-1));
    assert_eq!(cast(u64::MAX, DType::INDEX), ConstValue::Int(-1));
    assert_eq!(cast(i64::MIN, DType::INDEX), ConstValue::Int(i64::MIN));
    assert_eq!(cast(true, DType::INT8), ConstValue::Int(1));
    assert_eq!(cast(false, DType::UINT64), ConstValue::UInt(0));
}

#[test]
fn float_to_integer_casts_truncate_toward_zero() {
    assert_eq!(cast(3.9, DType::INT32), ConstValue::Int(3));
    assert_eq!(cast(-3.9, DType::INT32), ConstValue::Int(-3));
    assert_eq!(cast(-0.5, DType::INT32), ConstValue::Int(0));
    assert_eq!(cast(255.9, DType::UINT8), ConstValue::UInt(255));
    assert_eq!(cast(256.0, DType::UINT8), ConstValue::UInt(0));
    assert_eq!(cast(300.7, DType::UINT8), ConstValue::UInt(44));
    assert_eq!(cast(-1.0, DType::UINT32), ConstValue::UInt(4_294_967_295));
    assert_eq!(cast(-3.9, DType::UINT8), ConstValue::UInt(253));
    assert_eq!(cast(128.5, DType::INT8), ConstValue::Int(-128));
    assert_eq!(
        cast(1e19, DType::UINT64),
        ConstValue::UInt(10_000_000_000_000_000_000)
    );
    assert_eq!(cast(-p2(63), DType::INT64), ConstValue::Int(i64::MIN));
}

#[test]
fn float_to_integer_out_of_range_saturates() {
    // Documented deviation from Python (whose int() is unbounded before wrapping): floats outside
    // the i64 range saturate and NaN becomes 0, like a saturating float -> int conversion.
    assert_eq!(cast(1e30, DType::INT64), ConstValue::Int(i64::MAX));
    assert_eq!(cast(-1e30, DType::INT64), ConstValue::Int(i64::MIN));
    assert_eq!(cast(1e30, DType::UINT64), ConstValue::UInt(u64::MAX));
    assert_eq!(
        cast(f64::INFINITY, DType::UINT64),
        ConstValue::UInt(u64::MAX)
    );
    assert_eq!(cast(f64::NAN, DType::INT32), ConstValue::Int(0));
    assert_eq!(cast(f64::NAN, DType::UINT8), ConstValue::UInt(0));
}

#[test]
fn bool_casts() {
    assert_eq!(cast(2, DType::BOOL), ConstValue::Bool(true));
    assert_eq!(cast(0u8, DType::BOOL), ConstValue::Bool(false));
    assert_eq!(cast(-0.0, DType::BOOL), ConstValue::Bool(false));
    assert_eq!(cast(0.1, DType::BOOL), ConstValue::Bool(true));
    // Python's bool(float('nan')) is True.
    assert_eq!(cast(f64::NAN, DType::BOOL), ConstValue::Bool(true));
    assert_eq!(cast(true, DType::FLOAT16), ConstValue::Float(1.0));
}

// ---------------------------------------------------------------------------------------------
// float16: IEEE binary16, round to nearest even directly from f64, overflow to infinity.

#[test]
fn f16_edge_cases() {
    let h = |x: f64| castf(x, DType::FLOAT16);
    assert_eq!(h(65504.0), 65504.0); // (2 - 2^-10) * 2^15, the largest finite
    assert_eq!(h(65519.0), 65504.0); // below the midpoint 65520
    assert_eq!(h(65519.99), 65504.0);
    assert_eq!(h(65520.0), f64::INFINITY); // the midpoint ties to the "even" 0x7c00 = inf
    assert_eq!(h(-65520.0), f64::NEG_INFINITY);
    assert_eq!(h(1e10), f64::INFINITY);
    assert_eq!(h(p2(-24)), p2(-24)); // smallest subnormal, 2^-10 * 2^-14
    assert_same(h(p2(-25)), 0.0); // half of it: ties to even (zero)
    assert_same(h(-p2(-25)), -0.0);
    assert_eq!(h(p2(-25) + p2(-60)), p2(-24)); // just above half rounds up
    assert_eq!(h(1.5 * p2(-24)), p2(-23)); // tie between 1 and 2 quanta -> 2
    assert_eq!(h(2.5 * p2(-24)), p2(-23)); // tie between 2 and 3 quanta -> 2
    assert_eq!(h(p2(-14)), p2(-14)); // smallest normal
    assert_eq!(h(p2(-14) - p2(-25)), p2(-14)); // tie between the largest subnormal and 2^-14
    // Above 2048 the spacing is 2: 2049 ties down to 2048 (mantissa even), 2051 up to 2052.
    assert_eq!(h(2049.0), 2048.0);
    assert_eq!(h(2051.0), 2052.0);
    assert_eq!(h(2050.0), 2050.0);
    // Bits below f32 precision still decide a near-tie (the bug `half`'s from_f64 has).
    assert_eq!(h(2049.0 + p2(-30)), 2050.0);
    assert_eq!(h(1.0 + p2(-11) + p2(-40)), 1.0 + p2(-10));
    assert_eq!(h(1.0 + p2(-11) - p2(-40)), 1.0);
    assert_eq!(h(0.1), 0.0999755859375); // numpy: float(np.float16(0.1))
    assert_eq!(h(1.0 / 3.0), 0.333251953125); // numpy: float(np.float16(1/3))
    assert_same(h(-0.0), -0.0);
    assert_same(h(p2(-1074)), 0.0); // an f64 subnormal
    assert!(h(f64::NAN).is_nan());
    assert!(h(-f64::NAN).is_nan());
    assert_eq!(h(f64::INFINITY), f64::INFINITY);
    assert_eq!(h(f64::NEG_INFINITY), f64::NEG_INFINITY);
    // Integers: 2049 -> 2048 as above; 70000 overflows.
    assert_eq!(cast(2049, DType::FLOAT16), ConstValue::Float(2048.0));
    assert_eq!(
        cast(70000, DType::FLOAT16),
        ConstValue::Float(f64::INFINITY)
    );
    assert_eq!(
        cast(u64::MAX, DType::FLOAT16),
        ConstValue::Float(f64::INFINITY)
    );
}

/// The value of f16 bits, from the format definition (1 sign, 5 exponent bits with bias 15, 10
/// mantissa bits), for positive finite patterns; `0x7c00` stands for 2^16, the next power of two.
fn f16_value(bits: u16) -> f64 {
    let (e, m) = ((bits >> 10) as i32, (bits & 0x3ff) as f64);
    if e == 0 {
        m * p2(-24)
    } else {
        (1.0 + m / 1024.0) * p2(e - 15)
    }
}

#[test]
fn f16_every_value_and_midpoint() {
    for bits in 0..0x7c00u16 {
        let lo = f16_value(bits);
        let hi = f16_value(bits + 1);
        let hi_cast = if bits + 1 == 0x7c00 {
            f64::INFINITY
        } else {
            hi
        };
        assert_eq!(castf(lo, DType::FLOAT16), lo, "{bits:#06x}");
        assert_same(castf(-lo, DType::FLOAT16), -lo);
        let mid = (lo + hi) / 2.0;
        let even = if bits % 2 == 0 { lo } else { hi_cast };
        assert_eq!(
            castf(mid, DType::FLOAT16),
            even,
            "midpoint above {bits:#06x}"
        );
        assert_eq!(castf(mid.next_down(), DType::FLOAT16), lo, "{bits:#06x}");
        assert_eq!(castf(mid.next_up(), DType::FLOAT16), hi_cast, "{bits:#06x}");
        assert_eq!(
            castf(-mid.next_up(), DType::FLOAT16),
            -hi_cast,
            "{bits:#06x}"
        );
    }
}

#[test]
fn float32_casts() {
    let f = |x: f64| castf(x, DType::FLOAT32);
    assert_eq!(f(16_777_217.0), 16_777_216.0); // 2^24 + 1 ties to even
    assert_eq!(f(16_777_219.0), 16_777_220.0);
    assert_eq!(f(0.1), 0.1f32 as f64);
    assert_eq!(f(1e39), f64::INFINITY);
    assert_same(f(-1e-50), -0.0);
    assert_eq!(
        cast(16_777_217, DType::FLOAT32),
        ConstValue::Float(16_777_216.0)
    );
    // Integers convert straight to f32 (one rounding): 2^60 + 2^36 + 1 is above the midpoint
    // 2^60 + 2^36, so it rounds up even though via f64 it would first land on the midpoint.
    let x: i64 = (1 << 60) + (1 << 36) + 1;
    assert_eq!(cast(x, DType::FLOAT32), ConstValue::Float(p2(60) + p2(37)));
    assert_eq!(cast(u64::MAX, DType::FLOAT32), ConstValue::Float(p2(64)));
    assert_eq!(cast(u64::MAX, DType::FLOAT64), ConstValue::Float(p2(64)));
}

// ---------------------------------------------------------------------------------------------
// bfloat16: tinygrad rounds f64 -> f32 first, then f32 -> bf16 to nearest even.

#[test]
fn bf16_edge_cases() {
    let b = |x: f64| castf(x, DType::BFLOAT16);
    // 8 significant bits, so the spacing just above 1 is 2^-7.
    // 1 + 2^-8 is the midpoint of 1 (mantissa 0, even) and 1 + 2^-7 (mantissa 1): -> 1.
    assert_eq!(b(1.0 + p2(-8)), 1.0);
    // 1 + 3 * 2^-8 is the midpoint of 1 + 2^-7 (mantissa 1) and 1 + 2^-6 (mantissa 2): -> 1 + 2^-6.
    assert_eq!(b(1.0 + 3.0 * p2(-8)), 1.0 + p2(-6));
    assert_eq!(b(1.0 + p2(-8) + p2(-20)), 1.0 + p2(-7)); // above the midpoint, within f32
    // Double rounding, as tinygrad: 1 + 2^-8 + 2^-30 first rounds to the f32 1 + 2^-8 (the
    // midpoint), which then ties to even.
    assert_eq!(b(1.0 + p2(-8) + p2(-30)), 1.0);
    assert_eq!(b(257.0), 256.0); // 257 = 256 + 1, midpoint of 256 and 258
    assert_eq!(b(259.0), 260.0); // midpoint of 258 (mantissa odd) and 260
    assert_eq!(cast(259, DType::BFLOAT16), ConstValue::Float(260.0));
    // Largest finite (2 - 2^-7) * 2^127; the midpoint to 2^128 ties to the even pattern, inf.
    let max = (2.0 - p2(-7)) * p2(127);
    assert_eq!(b(max), max);
    assert_eq!(b((2.0 - p2(-8)) * p2(127)), f64::INFINITY);
    assert_eq!(b((2.0 - p2(-8) - p2(-20)) * p2(127)), max);
    assert_eq!(b(f32::MAX as f64), f64::INFINITY);
    assert_eq!(b(1e39), f64::INFINITY); // beyond f32 already
    assert_eq!(b(-1e39), f64::NEG_INFINITY);
    // Subnormals: smallest 2^-133; half of it ties to zero; 1.5x ties to 2 quanta.
    assert_eq!(b(p2(-133)), p2(-133));
    assert_same(b(p2(-134)), 0.0);
    assert_eq!(b(1.5 * p2(-133)), p2(-132));
    assert_eq!(b(0.1), 0.10009765625); // 0x3dcd
    assert_same(b(-0.0), -0.0);
    assert!(b(f64::NAN).is_nan());
    assert_eq!(b(f64::INFINITY), f64::INFINITY);
}

/// The value of bf16 bits (1 sign, 8 exponent bits with bias 127, 7 mantissa bits), positive
/// finite patterns; `0x7f80` stands for 2^128.
fn bf16_value(bits: u16) -> f64 {
    let (e, m) = ((bits >> 7) as i32, (bits & 0x7f) as f64);
    if e == 0 {
        m * p2(-133)
    } else {
        (1.0 + m / 128.0) * p2(e - 127)
    }
}

#[test]
fn bf16_every_value_and_midpoint() {
    for bits in 0..0x7f80u16 {
        let lo = bf16_value(bits);
        let hi = bf16_value(bits + 1);
        let hi_cast = if bits + 1 == 0x7f80 {
            f64::INFINITY
        } else {
            hi
        };
        assert_eq!(castf(lo, DType::BFLOAT16), lo, "{bits:#06x}");
        let mid = (lo + hi) / 2.0; // exact in f32 too (9 significant bits)
        let even = if bits % 2 == 0 { lo } else { hi_cast };
        assert_eq!(
            castf(mid, DType::BFLOAT16),
            even,
            "midpoint above {bits:#06x}"
        );
        // One f32 step off the midpoint decides; one f64 step does not (it rounds back to the
        // midpoint in f32 first).
        let (down32, up32) = (
            (mid as f32).next_down() as f64,
            (mid as f32).next_up() as f64,
        );
        assert_eq!(castf(down32, DType::BFLOAT16), lo, "{bits:#06x}");
        assert_eq!(castf(up32, DType::BFLOAT16), hi_cast, "{bits:#06x}");
        assert_eq!(castf(mid.next_up(), DType::BFLOAT16), even, "{bits:#06x}");
    }
}

// ---------------------------------------------------------------------------------------------
// fp8 (OCP): e4m3 (bias 7, no inf, S.1111.111 is NaN) and e5m2 (bias 15, IEEE-like).

const FORMATS: [(Fp8Format, DType); 2] = [
    (Fp8Format::E4M3, DType::FP8E4M3),
    (Fp8Format::E5M2, DType::FP8E5M2),
];

/// `(exponent bits, mantissa bits, bias)`.
fn layout(f: Fp8Format) -> (u32, u32, i32) {
    match f {
        Fp8Format::E4M3 => (4, 3, 7),
        Fp8Format::E5M2 => (5, 2, 15),
    }
}

/// An fp8 value straight from the OCP definition, independent of the crate's decoder.
fn fp8_reference(b: u8, f: Fp8Format) -> f64 {
    let (eb, mb, bias) = layout(f);
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b & 0x7f) >> mb) as i32;
    let m = (b & ((1 << mb) - 1)) as i32;
    let (emax, mmax) = ((1 << eb) - 1, (1 << mb) - 1);
    match f {
        Fp8Format::E4M3 if e == emax && m == mmax => return f64::NAN,
        Fp8Format::E5M2 if e == emax => {
            return if m == 0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        _ => {}
    }
    let frac = m as f64 / (1 << mb) as f64;
    sign * if e == 0 {
        frac * p2(1 - bias)
    } else {
        (1.0 + frac) * p2(e - bias)
    }
}

/// The largest finite positive pattern.
fn max_pattern(f: Fp8Format) -> u8 {
    match f {
        Fp8Format::E4M3 => 0x7e,
        Fp8Format::E5M2 => 0x7b,
    }
}

/// Round to nearest by exhaustive search over the finite values, ties to the even pattern,
/// saturating at the largest finite value (tinygrad's/CUDA's satfinite rounding).
fn fp8_oracle(x: f64, f: Fp8Format) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    // Saturation: everything past the largest finite value is nearest to it.
    let a = x.abs().min(fp8_reference(max_pattern(f), f));
    let mut best = 0u8;
    for p in 1..=max_pattern(f) {
        let (dp, db) = (
            (fp8_reference(p, f) - a).abs(),
            (fp8_reference(best, f) - a).abs(),
        );
        if dp < db || (dp == db && p % 2 == 0) {
            best = p;
        }
    }
    best | sign
}

#[test]
fn fp8_decode_every_pattern() {
    for (f, dt) in FORMATS {
        for b in 0..=255u8 {
            let want = fp8_reference(b, f);
            assert_same(fp8_to_f64(b, f), want);
            assert_same(ConstValue::from_le_bytes(dt, &[b]).as_f64(), want);
        }
    }
    // Hand-computed: e4m3 0x01 = 2^-3 * 2^-6, 0x08 = 2^(1-7), 0x3c = 1.5, 0x7e = 448.
    let e4 = |b| fp8_to_f64(b, Fp8Format::E4M3);
    assert_eq!(
        [e4(0x01), e4(0x08), e4(0x38), e4(0x3c), e4(0x7e)],
        [p2(-9), p2(-6), 1.0, 1.5, 448.0]
    );
    assert!(e4(0x7f).is_nan() && e4(0xff).is_nan());
    assert_eq!(e4(0x78), 256.0); // exponent field 15 is still finite in e4m3
    assert_same(e4(0x80), -0.0);
    // e5m2 0x01 = 2^-2 * 2^-14, 0x04 = 2^-14, 0x3c = 1.0, 0x7b = 57344, 0x7c = inf.
    let e5 = |b| fp8_to_f64(b, Fp8Format::E5M2);
    assert_eq!(
        [e5(0x01), e5(0x04), e5(0x3c), e5(0x3e), e5(0x7b)],
        [p2(-16), p2(-14), 1.0, 1.5, 57344.0]
    );
    assert_eq!((e5(0x7c), e5(0xfc)), (f64::INFINITY, f64::NEG_INFINITY));
    assert!(e5(0x7d).is_nan() && e5(0x7e).is_nan() && e5(0x7f).is_nan() && e5(0xff).is_nan());
}

#[test]
fn fp8_encode_every_pattern_round_trips() {
    for (f, dt) in FORMATS {
        for b in 0..=255u8 {
            let v = fp8_to_f64(b, f);
            let again = f64_to_fp8(v, f);
            if v.is_nan() {
                assert!(fp8_to_f64(again, f).is_nan(), "{f:?} {b:#04x}");
            } else {
                assert_eq!(again, b, "{f:?} {b:#04x} = {v}");
                assert_same(castf(v, dt), v);
            }
        }
    }
}

#[test]
fn fp8_saturation_and_specials() {
    let e4 = |x: f64| castf(x, DType::FP8E4M3);
    let e5 = |x: f64| castf(x, DType::FP8E5M2);
    assert_eq!(e4(448.0), 448.0);
    assert_eq!(e4(1e6), 448.0);
    assert_eq!(e4(-1e6), -448.0);
    assert_eq!(e4(464.0), 448.0); // midpoint to the (NaN) pattern 0x7f: stays at 448
    assert_eq!(e4(465.0), 448.0);
    assert!(e4(f64::INFINITY).is_nan()); // e4m3 has no infinity
    assert!(e4(f64::NEG_INFINITY).is_nan());
    assert_eq!(f64_to_fp8(f64::INFINITY, Fp8Format::E4M3), 0x7f);
    assert_eq!(f64_to_fp8(f64::NEG_INFINITY, Fp8Format::E4M3), 0xff);
    assert!(e4(f64::NAN).is_nan());
    assert_eq!(e5(57344.0), 57344.0);
    assert_eq!(e5(1e6), 57344.0);
    assert_eq!(e5(-1e6), -57344.0);
    assert_eq!(e5(60000.0), 57344.0);
    assert_eq!(e5(61440.0), 57344.0); // the midpoint to 2^16 saturates too (tinygrad/CUDA)
    assert_eq!(e5(f64::INFINITY), f64::INFINITY);
    assert_eq!(e5(f64::NEG_INFINITY), f64::NEG_INFINITY);
    assert!(e5(f64::NAN).is_nan());
    assert_eq!(f64_to_fp8(f64::NAN, Fp8Format::E5M2), 0x7f);
    assert_eq!(f64_to_fp8(-f64::NAN, Fp8Format::E5M2), 0xff);
}

#[test]
fn fp8_subnormals_and_ties() {
    let e4 = |x: f64| castf(x, DType::FP8E4M3);
    let e5 = |x: f64| castf(x, DType::FP8E5M2);
    // Smallest subnormals; half of one ties to zero, 0.75 of one rounds up, 1.5 ties to 2.
    assert_eq!(e4(p2(-9)), p2(-9));
    assert_same(e4(p2(-10)), 0.0);
    assert_same(e4(-p2(-10)), -0.0);
    assert_eq!(e4(0.75 * p2(-9)), p2(-9));
    assert_eq!(e4(1.5 * p2(-9)), p2(-8));
    assert_eq!(e4(2.5 * p2(-9)), p2(-8));
    assert_eq!(e4(7.5 * p2(-9)), p2(-6)); // largest subnormal 7 * 2^-9, tie to 8 * 2^-9 = 2^-6
    assert_eq!(e5(p2(-16)), p2(-16));
    assert_same(e5(p2(-17)), 0.0);
    assert_eq!(e5(0.75 * p2(-16)), p2(-16));
    assert_eq!(e5(1.5 * p2(-16)), p2(-15));
    assert_same(e4(1e-30), 0.0);
    assert_same(e5(-1e-30), -0.0);
    // Normal midpoints: e4m3 spacing at 1 is 2^-3, e5m2 spacing is 2^-2.
    assert_eq!(e4(1.0625), 1.0); // between 1.0 (0x38, even) and 1.125 (0x39)
    assert_eq!(e4(1.1875), 1.25); // between 1.125 (0x39) and 1.25 (0x3a, even)
    assert_eq!(e4(1.0625 + p2(-40)), 1.125);
    assert_eq!(e5(1.125), 1.0); // between 1.0 (0x3c, even) and 1.25 (0x3d)
    assert_eq!(e5(1.375), 1.5); // between 1.25 (0x3d) and 1.5 (0x3e, even)
    assert_eq!(e5(1.125 + p2(-40)), 1.25);
    // [128, 256) has spacing 16: 248 is between 240 (0x77) and 256 (0x78, even).
    assert_eq!(e4(248.0), 256.0);
    assert_eq!(e4(232.0), 224.0); // between 224 (0x76, even) and 240 (0x77)
    // [256, 448] has spacing 32: 300 is nearer 288 (0x79) than 320.
    assert_eq!(cast(300, DType::FP8E4M3), ConstValue::Float(288.0));
}

/// A small deterministic generator (64-bit LCG, top bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }
}

#[test]
fn fp8_rounding_matches_exhaustive_search() {
    for (f, dt) in FORMATS {
        let mut inputs = vec![0.0, -0.0, 1e-300, 1e300, f64::MAX, f64::MIN_POSITIVE];
        // Every value, every midpoint between neighbours, and one f64 step either side of it.
        for b in 0..max_pattern(f) {
            let (lo, hi) = (fp8_reference(b, f), fp8_reference(b + 1, f));
            let mid = (lo + hi) / 2.0;
            inputs.extend([lo, mid, mid.next_down(), mid.next_up()]);
        }
        // Past the largest value, up to well beyond the next power of two.
        let max = fp8_reference(max_pattern(f), f);
        for k in 0..64 {
            inputs.push(max * (1.0 + k as f64 / 16.0));
        }
        // Random significands over the whole exponent range and beyond.
        let mut rng = Lcg(0x5eed_f8f8);
        for _ in 0..20_000 {
            let m = 1.0 + (rng.next() >> 1) as f64 * p2(-52);
            let e = (rng.next() % 48) as i32 - 28;
            inputs.push(m * p2(e));
        }
        for x in inputs {
            for x in [x, -x] {
                let want = fp8_oracle(x, f);
                assert_eq!(f64_to_fp8(x, f), want, "{f:?} {x:e}");
                assert_same(castf(x, dt), fp8_reference(want, f));
            }
        }
    }
}
