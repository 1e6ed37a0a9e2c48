//! Exact conversions between `f64` and the two OCP fp8 formats, with round-to-nearest-even and
//! saturation to the largest finite value on overflow (CUDA's `__NV_SATFINITE`, as tinygrad does).
//!
//! - `e4m3` ("fn" variant): bias 7, no infinities, `0x7f`/`0xff` are NaN, max finite 448.
//! - `e5m2`: bias 15, IEEE-like, infinities `0x7c`/`0xfc`, max finite 57344.

/// Which fp8 layout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fp8Format {
    /// 4 exponent bits, 3 mantissa bits.
    E4M3,
    /// 5 exponent bits, 2 mantissa bits.
    E5M2,
}

/// Constants of one format, as `f64` bit patterns where they are thresholds.
struct Cfg {
    bias: i64,
    /// Significand bits including the implicit one.
    sig_bits: u32,
    /// Inputs at or below this magnitude round to zero.
    min_denorm_half: u64,
    /// Inputs above this magnitude saturate to `max_norm`.
    ovf_threshold: u64,
    max_norm: u8,
    /// The smallest normal value.
    min_norm: u64,
}

const fn cfg(f: Fp8Format) -> Cfg {
    match f {
        Fp8Format::E4M3 => Cfg {
            bias: 7,
            sig_bits: 4,
            min_denorm_half: 0x3F50_0000_0000_0000,
            ovf_threshold: 0x407D_0000_0000_0000,
            max_norm: 0x7E,
            min_norm: 0x3F90_0000_0000_0000,
        },
        Fp8Format::E5M2 => Cfg {
            bias: 15,
            sig_bits: 3,
            min_denorm_half: 0x3EE0_0000_0000_0000,
            ovf_threshold: 0x40EE_0000_0000_0000 - 1,
            max_norm: 0x7B,
            min_norm: 0x3F10_0000_0000_0000,
        },
    }
}

/// Rounds `x` to the nearest fp8 value (ties to even), saturating finite overflow.
/// NaN maps to NaN; infinity maps to NaN in e4m3 (which has none) and to infinity in e5m2.
pub fn f64_to_fp8(x: f64, f: Fp8Format) -> u8 {
    let negative = x.is_sign_negative();
    if !x.is_finite() {
        return match f {
            Fp8Format::E4M3 => {
                if negative {
                    0xff
                } else {
                    0x7f
                }
            }
            Fp8Format::E5M2 => {
                (if negative { 0x80 } else { 0 }) | (if x.is_infinite() { 0x7c } else { 0x7f })
            }
        };
    }
    let c = cfg(f);
    let xbits = x.to_bits();
    let half_ulp: u64 = 1 << (52 - c.sig_bits);
    let sign = if negative { 0x80u8 } else { 0 };
    let exp = ((xbits >> 52) & 0x7ff) as i64 - 1023 + c.bias;
    let mant_mask = (1u64 << (c.sig_bits - 1)) - 1;
    let mut mantissa = (xbits >> (53 - c.sig_bits)) & mant_mask;
    let absx = xbits & 0x7fff_ffff_ffff_ffff;
    let res: u64 = if absx <= c.min_denorm_half {
        0
    } else if absx > c.ovf_threshold {
        c.max_norm as u64
    } else if absx >= c.min_norm {
        let mut r = ((exp as u64) << (c.sig_bits - 1)) | mantissa;
        let round_bits = xbits & ((half_ulp << 1) - 1);
        if round_bits > half_ulp || (round_bits == half_ulp && mantissa & 1 == 1) {
            r += 1;
        }
        r
    } else {
        // Subnormal result: shift the significand (with its implicit one) into place.
        let shift = (1 - exp) as u32;
        mantissa |= 1 << (c.sig_bits - 1);
        let mut r = mantissa >> shift;
        let half = half_ulp << shift;
        let round_bits = (xbits | (1 << 52)) & ((half << 1) - 1);
        if round_bits > half || (round_bits == half && r & 1 == 1) {
            r += 1;
        }
        r
    };
    res as u8 | sign
}

/// The exact value of an fp8 bit pattern.
pub fn fp8_to_f64(x: u8, f: Fp8Format) -> f64 {
    let negative = x & 0x80 != 0;
    if x & 0x7f == 0 {
        return if negative { -0.0 } else { 0.0 };
    }
    let c = cfg(f);
    let mant_bits = c.sig_bits - 1;
    let exp_bits = 8 - c.sig_bits;
    let exp_max = (1u8 << exp_bits) - 1;
    let mant_max = (1u8 << mant_bits) - 1;
    let exp = (x >> mant_bits) & exp_max;
    let mantissa = x & mant_max;
    if exp == exp_max {
        match f {
            Fp8Format::E5M2 => {
                let v = if mantissa != 0 {
                    f64::NAN
                } else {
                    f64::INFINITY
                };
                return if negative { -v } else { v };
            }
            Fp8Format::E4M3 if mantissa == mant_max => return f64::NAN,
            Fp8Format::E4M3 => {}
        }
    }
    let frac = mantissa as f64 / (mant_max as f64 + 1.0);
    let val = if exp == 0 {
        frac * 2f64.powi(1 - c.bias as i32)
    } else {
        (1.0 + frac) * 2f64.powi(exp as i32 - c.bias as i32)
    };
    if negative { -val } else { val }
}
