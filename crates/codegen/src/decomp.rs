//! Transcendental functions decomposed into simple ALU ops, for backends without a libm
//! (the Cranelift JIT, PTX, WGSL).
//!
//! [`xexp2`], [`xlog2`] and [`xsin`] build UOp graphs that only use `Add Mul FDiv Where CmpLt
//! CmpNe CmpEq Cast Bitcast Shl Shr And Or Xor Round IDiv Mod`, never `Exp2`, `Log2`, `Sin`
//! or `Pow` (`FDiv` appears once, in `log2`; `IDiv` and `Mod` only on small integers; no float
//! `Max`, whose NaN handling costs ~8 instructions per vector on x86). [`decomp_rules`]
//! rewrites those three ops into these graphs.
//! `float32` and `float64` are computed in their own precision; `float16` and `bfloat16` are
//! computed in `float32` and cast back. Vector dtypes work lane-wise (every constant and integer
//! dtype takes the input's vector width).
//!
//! The graphs are written so that no step is undefined behaviour in C: float -> int casts only
//! see in-range values, shift amounts are below the bit width, signed integers never overflow
//! (and are only shifted when non-negative). Bit manipulation uses unsigned integers of the float's width.
//! The `float32` graphs need no 64-bit type; the `float64` ones use `uint64`/`int64`. They do not
//! need FMA and are exact under plain IEEE round-to-nearest arithmetic; they rely on the backend
//! not reassociating float operations (the compensated sums below) and not flushing denormals
//! (with flushing, denormal inputs/results come out as zero but nothing else changes).
//!
//! Accuracy (max error in ulps against the exact result, measured by this crate's `decomp` test
//! with a strict IEEE evaluator and offline with mpmath for `float64`), over the whole domain
//! including denormal inputs and results:
//!
//! | function | float32 | float64 |
//! |----------|---------|---------|
//! | `exp2`   | 0.84    | 0.60    |
//! | `log2`   | 0.75    | 0.75    |
//! | `sin`    | 0.76    | 0.74    |
//!
//! `float16` and `bfloat16` results are within 0.51 ulp for every input (correctly rounded except
//! for rare double roundings, float32 then the half type).
//!
//! # exp2
//! The argument is clamped to `[-160, 160]` (`[-1100, 1100]` for `float64`) with compares and
//! selects (a NaN passes through both), far enough out that the result still overflows to
//! `inf` or underflows to `0` naturally. Then `x = k + f` with `k = Round(x)` (ties to even)
//! and `f = x - k` in `[-1/2, 1/2]`, both exact; `k` as an integer comes from the bits of
//! `k + 1.5 * 2^mbits`.
//! `2^f = 1 + c*f + f^2*Q(f)` with a near-minimax polynomial `Q` (degree 5 / 10) and the sum
//! `1 + c*f` compensated (its rounding error added back with the small terms), so only the last
//! addition rounds at the result's scale. For `float64`, `c*f` is itself exact: `c = ln2` and
//! `f` are split into short heads (low mantissa bits cleared with `And`). `float32` skips that
//! split: it saves 6 of about 30 operations, which is what `exp` costs in a softmax, for 0.84
//! instead of 0.76 ulp (0.75 when the target contracts into FMAs). `2^k` is applied as two
//! factors `2^h * 2^(k - h)` with `h = floor(k/2)`, each built from exponent bits, so the product
//! only rounds once even when the result is denormal. A NaN argument makes the polynomial, so
//! the product, NaN.
//!
//! # log2
//! Denormals are scaled by `2^64` first. The exponent and a mantissa `m` in `[sqrt(1/2),
//! sqrt(2))` come from the bits (adding the bit distance from `sqrt(1/2)` to 1 before splitting
//! moves the exponent boundary to `sqrt(1/2)`). With `f = m - 1` (exact), `s = f / (2 + f)`:
//! `ln(1 + f) = f - f^2/2 + s*(f^2/2 + R(s^2))`, with `R` a near-minimax polynomial (degree 4 / 7
//! in `s^2`). The leading part `f - f^2/2` is split into a short head (low mantissa bits cleared
//! with `And`) whose product with a short head of `1/ln 2` is exact, and the exponent is added
//! with its rounding error recovered (the fdlibm scheme; it needs no FMA, and stays within its
//! bound when the target contracts into FMAs). Special values:
//! `log2(±0) = -inf`, `log2(x < 0) = NaN`, `log2(inf) = inf`, `log2(NaN) = NaN`.
//!
//! # sin
//! Range reduction is **Payne-Hanek over the whole float range** (`|x|` up to `f32::MAX` /
//! `f64::MAX`, no Cody-Waite stage), done in exact integer arithmetic: the integer mantissa of
//! `|x|` is multiplied by a 96-bit (`float32`) / 192-bit (`float64`) window of the bits of `2/pi`
//! selected by the exponent (a `Where` chain over a constant table of 240 / 1248 bits), giving
//! the quadrant and the fraction of `|x| * 2/pi` to 70 / 137 bits below the mantissa's last bit
//! (more than the worst-case cancellation near multiples of `pi/2` needs). The fraction, rounded
//! to the nearest quadrant, is multiplied by `pi/4` in fixed point and converted to a float pair
//! `r + r_lo`. Multi-word arithmetic uses 16-bit limbs in `uint32` for `float32` and 32-bit limbs
//! in `uint64` for `float64`. `|x| < 0.78` skips the reduction (`r = |x|`). Then a sine or cosine
//! polynomial of `r` in `[-pi/4, pi/4]` (degree 9 or 10 / 13 or 14), picked by the quadrant,
//! corrected for `r_lo`, and the sign applied with `Xor` on the sign bit, so `sin(-0.0) = -0.0`.
//! `sin(±inf) = sin(NaN) = NaN`. A graph is about 500 (`float32`) / 760 (`float64`) nodes, most
//! of them the table selection; `exp2` and `log2` are under 100.
//!
//! The constants (polynomial coefficients by Chebyshev fits in 60-digit arithmetic, the bits of
//! `2/pi` and `pi/4`) were computed with mpmath for this module; the float32 `exp2` polynomial,
//! whose float64 fit is ample for its precision, by `scripts/fit_exp2_f32.py` (numpy).

use std::sync::LazyLock;

use tinygrad_uop::{Arg, DType, Ops, PatternMatcher, UOp, UPat, rules};

/// The float dtypes [`decomp_rules`] rewrites.
const FLOATS: [DType; 4] = [
    DType::FLOAT16,
    DType::BFLOAT16,
    DType::FLOAT32,
    DType::FLOAT64,
];

/// Per-precision facts about the float format being computed in.
#[derive(Clone, Copy)]
struct Fmt {
    /// The float dtype (with the input's vector width).
    f: DType,
    /// The unsigned integer of the same width.
    u: DType,
    /// The signed integer of the same width.
    i: DType,
    /// Explicit mantissa bits (23 / 52).
    mbits: u32,
    /// Exponent bias (127 / 1023).
    bias: i64,
    /// Whether this is `float64`.
    is64: bool,
}

impl Fmt {
    fn of(x: &UOp) -> Fmt {
        let dt = x.dtype();
        let n = dt.count();
        if dt.scalar() == DType::FLOAT64 {
            Fmt {
                f: dt,
                u: DType::UINT64.vec(n),
                i: DType::INT64.vec(n),
                mbits: 52,
                bias: 1023,
                is64: true,
            }
        } else {
            assert!(
                dt.scalar() == DType::FLOAT32,
                "decomp: computing in {dt}, expected float32 or float64"
            );
            Fmt {
                f: dt,
                u: DType::UINT32.vec(n),
                i: DType::INT32.vec(n),
                mbits: 23,
                bias: 127,
                is64: false,
            }
        }
    }

    /// Total bit width (32 / 64).
    fn bits(&self) -> u32 {
        if self.is64 { 64 } else { 32 }
    }

    /// A float constant.
    fn fc(&self, v: f64) -> UOp {
        UOp::cnst(self.f, v)
    }

    /// `v` reinterpreted as unsigned bits.
    fn as_bits(&self, v: &UOp) -> UOp {
        bitcast(v, self.u)
    }

    /// Unsigned bits reinterpreted as a float.
    fn float_of(&self, v: &UOp) -> UOp {
        bitcast(v, self.f)
    }
}

fn bitcast(x: &UOp, dt: DType) -> UOp {
    UOp::new(Ops::Bitcast, dt, vec![x.clone()], Arg::None)
}

/// `a - b` for a UOp `b` (built as `a + b*-1`, which rounds exactly like a subtraction).
fn sub(a: &UOp, b: &UOp) -> UOp {
    a.sub(b)
}

/// `c0 + x*(c1 + x*(c2 + ...))` (Horner, coefficients lowest degree first).
fn poly(x: &UOp, coeffs: &[f64]) -> UOp {
    let (last, rest) = coeffs.split_last().expect("poly: no coefficients");
    let mut acc = x.const_like(*last);
    for &c in rest.iter().rev() {
        acc = &acc * x + c;
    }
    acc
}

/// Runs `f` in float32 for float16/bfloat16 inputs (casting back), directly otherwise.
fn in_f32_or_f64(x: &UOp, name: &str, f: impl Fn(&UOp) -> UOp) -> UOp {
    let dt = x.dtype();
    match dt.scalar() {
        DType::FLOAT32 | DType::FLOAT64 => f(x),
        DType::FLOAT16 | DType::BFLOAT16 => f(&x.cast(DType::FLOAT32.vec(dt.count()))).cast(dt),
        _ => panic!("{name}: expected a float16, bfloat16, float32 or float64 input, got {dt}"),
    }
}

// ---------------------------------------------------------------------------------------------
// exp2

/// `(2^s - 1) / s` on `[-1/2, 1/2]`, lowest degree first, for float32: near-minimax for the
/// error of `s * q(s)`, 0.03 ulp of `2^s` after rounding the coefficients to float32
/// (`scripts/fit_exp2_f32.py`).
const EXP2_Q_F32: [f64; 7] = [
    0.6931471824645996,
    0.24022650718688965,
    0.05550410971045494,
    0.009618036448955536,
    0.0013333430979400873,
    0.00015467111370526254,
    1.5314939446398057e-05,
];

/// `(2^s - 1 - s*ln2) / s^2` on `[-1/2, 1/2]`, lowest degree first, for float64 (error
/// 3.7e-17).
const EXP2_F64: [f64; 11] = [
    0.24022650695910072,
    0.0555041086648216,
    0.009618129107628479,
    0.0013333558146416936,
    0.00015403530393375914,
    1.525273382983612e-05,
    1.3215486802903931e-06,
    1.0178062445845774e-07,
    7.054899956372649e-09,
    4.4549605981865186e-10,
    2.572508057683636e-11,
];

/// `2^x` as a graph of simple ALU ops (see the [module docs](self)): within 0.85 ulp,
/// `exp2(-inf) = 0`, `exp2(inf) = inf`, `exp2(NaN) = NaN`, overflow to `inf`, gradual underflow
/// to `0`.
///
/// # Panics
/// If `x` is not a float16, bfloat16, float32 or float64 value.
pub fn xexp2(x: &UOp) -> UOp {
    in_f32_or_f64(x, "xexp2", |x| {
        if Fmt::of(x).is64 {
            exp2_f64(x)
        } else {
            exp2_f32(x)
        }
    })
}

/// `x` clamped to `[-lim, lim]` with compares and selects, far enough out that `2^x` still
/// overflows to `inf` or underflows to `0`. A NaN fails both compares and passes through.
/// (A float `Max` is NaN aware, which costs ~8 instructions per vector on x86 where a compare
/// and a select take 2.)
fn clamp_exp2_arg(x: &UOp, ft: Fmt) -> UOp {
    let lim = if ft.is64 { 1100.0 } else { 160.0 };
    let (lo, hi) = (ft.fc(-lim), ft.fc(lim));
    let xc = x.lt(&lo).where_(&lo, x);
    hi.lt(&xc).where_(&hi, &xc)
}

/// float32: `2^x` in about 25 operations (the float64 scheme without its exact head of `f*ln2`;
/// 0.84 ulp, 0.75 with FMA contraction, against 0.76 for ~31 operations with the head).
// softmax's exp kernel 15.2 -> 11.9 ms without the head (see docs/performance.md)
fn exp2_f32(x: &UOp) -> UOp {
    let ft = Fmt::of(x);
    let xc = clamp_exp2_arg(x, ft);
    // x = k + f with k = round(x) (ties to even) and f in [-1/2, 1/2], both exact. (`Round`
    // is one instruction everywhere; the `(x + 1.5*2^mbits) - 1.5*2^mbits` rounding trick is
    // folded to x by shader compilers that reassociate floats.)
    let k = xc.unary(Ops::Round);
    let f = sub(&xc, &k);
    // u = 1 + f*c0 + f^2*r(f) with the sum 1 + f*c0 compensated (its rounding error is added
    // back with the small terms), so the last addition is the only rounding at the result's
    // scale that is not recovered.
    let (c0, r) = (EXP2_Q_F32[0], poly(&f, &EXP2_Q_F32[1..]));
    let a = &f * c0;
    let one = ft.fc(1.0);
    let s = &one + &a;
    let u = &s + ((sub(&one, &s) + &a) + ((&f * &f) * r));
    // A NaN argument makes `f`, so `u`, NaN; the scale built from its bits is some float, and
    // the product stays NaN.
    times_pow2(&u, &k, ft)
}

/// float64: `2^f = 1 + f*ln2 + f^2*Q(f)` with the head of `f*ln2` exact (short heads of `f` and
/// `ln2`) and its sum with 1 compensated, so only the last addition rounds at the result's
/// scale (0.60 ulp).
fn exp2_f64(x: &UOp) -> UOp {
    let ft = Fmt::of(x);
    let xc = clamp_exp2_arg(x, ft);
    let k = xc.unary(Ops::Round);
    let f = sub(&xc, &k);
    let (ln2_hi, ln2_lo, hi_mask) = (
        0.693147175014019,
        5.5459262969660605e-09,
        0xffff_ffff_f800_0000u64,
    );
    let f_hi = ft.float_of(&(ft.as_bits(&f) & hi_mask));
    let f_lo = sub(&f, &f_hi);
    let a = &f_hi * ln2_hi;
    let b = ((&f_lo * ln2_hi) + (&f * ln2_lo)) + ((&f * &f) * poly(&f, &EXP2_F64));
    let one = ft.fc(1.0);
    let s = &one + &a;
    let u = &s + ((sub(&one, &s) + &a) + b);
    times_pow2(&u, &k, ft)
}

/// `u * 2^k` for an integral float `k` in the clamped range, as two normal powers of two
/// `2^h * 2^(k-h)`, `h = floor(k/2)`: exact until the last product, which rounds once even when
/// the result is denormal. `k` as an integer without a float->int conversion (which CPUs lack
/// on vectors): `k + 1.5*2^mbits` holds `k` in its low mantissa bits. Twice the exponent bias
/// is added, so that halving by a shift gives `h`'s biased exponent directly: `kb = k + 2*bias`,
/// `hb = kb >> 1 = h + bias`, `kb - hb = (k - h) + bias`, both in `[1, 2*bias]` for the clamped
/// range. The arithmetic is unsigned (wrapping), so a NaN `k`'s bits are no overflow either.
fn times_pow2(u: &UOp, k: &UOp, ft: Fmt) -> UOp {
    let magic = 1.5 * 2f64.powi(ft.mbits as i32);
    let magic_bits = if ft.is64 {
        magic.to_bits()
    } else {
        u64::from((magic as f32).to_bits())
    };
    let mask = if ft.is64 {
        u64::MAX
    } else {
        u64::from(u32::MAX)
    };
    let offset = (2 * ft.bias as u64).wrapping_sub(magic_bits) & mask;
    let kb = ft.as_bits(&(k + magic)) + offset;
    let hb = &kb >> 1u64;
    let pow2 = |biased: &UOp| ft.float_of(&(biased << u64::from(ft.mbits)));
    (u * pow2(&hb)) * pow2(&sub(&kb, &hb))
}

// ---------------------------------------------------------------------------------------------
// log2

/// `[ln((1+s)/(1-s)) - 2s] / s^3` as a polynomial in `z = s^2`, `z` in `[0, 0.0295]`
/// (`|s| <= (sqrt 2 - 1)/(sqrt 2 + 1)`), lowest degree first (float32: error 2.2e-8).
const LOG_F32: [f64; 4] = [
    0.6666666865348816,
    0.4000012278556824,
    0.2855082154273987,
    0.2333046793937683,
];

/// The same for float64 (error 3.2e-16, multiplied by `s^2 <= 0.0295` in the result).
const LOG_F64: [f64; 7] = [
    0.666666666666667,
    0.39999999999899505,
    0.28571428625975487,
    0.2222221113479508,
    0.18182889125261723,
    0.15331721600556042,
    0.14616449685043406,
];

/// `log2(x)` as a graph of simple ALU ops (see the [module docs](self)): within 0.8 ulp,
/// denormals included; `log2(±0) = -inf`, `log2(x < 0) = NaN`, `log2(inf) = inf`, `log2(NaN) = NaN`.
///
/// # Panics
/// If `x` is not a float16, bfloat16, float32 or float64 value.
pub fn xlog2(x: &UOp) -> UOp {
    in_f32_or_f64(x, "xlog2", log2_impl)
}

fn log2_impl(x: &UOp) -> UOp {
    let ft = Fmt::of(x);
    let min_normal = if ft.is64 {
        f64::MIN_POSITIVE
    } else {
        f32::MIN_POSITIVE as f64
    };
    let sqrt_half_bits: u64 = if ft.is64 {
        0x3fe6_a09e_667f_3bcd
    } else {
        0x3f35_04f3
    };
    // 1/ln2 = ivln2_hi + ivln2_lo, the head short enough (12 / 32 bits) that its product with
    // `hi` below (low mantissa bits cleared by `hi_mask`: 12 / 21 bits left) is exact.
    let (ivln2_hi, ivln2_lo, hi_mask) = if ft.is64 {
        (
            1.4426950407214463,
            1.6751713164886512e-10,
            0xffff_ffff_0000_0000u64,
        )
    } else {
        (1.4423828125, 0.00031222839606925845, 0xffff_f000)
    };
    let coeffs: &[f64] = if ft.is64 { &LOG_F64 } else { &LOG_F32 };
    let one_bits = (ft.bias as u64) << ft.mbits;
    let mant_mask = (1u64 << ft.mbits) - 1;
    // Denormals: scale into the normal range.
    let den = x.lt(min_normal);
    let a = den.where_(x * 2f64.powi(64), x);
    // a = m * 2^e with m in [sqrt(1/2), sqrt(2)).
    let ix = ft.as_bits(&a) + (one_bits - sqrt_half_bits);
    let e = (&ix >> ft.mbits as u64).cast(ft.i) + (-ft.bias);
    let e = den.where_(&e + -64i64, &e).cast(ft.f);
    let m = ft.float_of(&((&ix & mant_mask) + sqrt_half_bits));
    // ln(m) = f - hfsq + s*(hfsq + R), f = m - 1 exact.
    let f = &m + -1.0;
    let hfsq = (&f * &f) * 0.5;
    let s = f.alu(Ops::FDiv, &[&f + 2.0]);
    let z = &s * &s;
    let r = &z * poly(&z, coeffs);
    // Head `hi` of f - hfsq with its low bits cleared, so hi * ivln2_hi is exact.
    let hi = ft.float_of(&(ft.as_bits(&sub(&f, &hfsq)) & hi_mask));
    let lo = sub(&sub(&f, &hi), &hfsq) + (&s * (&hfsq + &r));
    let val_hi = &hi * ivln2_hi;
    let val_lo = ((&lo + &hi) * ivln2_lo) + (&lo * ivln2_hi);
    // e + val_hi with its rounding error recovered (|e| >= |val_hi| whenever e != 0).
    let w = &e + &val_hi;
    let val_lo = val_lo + (sub(&e, &w) + &val_hi);
    let res = val_lo + w;
    let res = x.eq_(f64::INFINITY).where_(ft.fc(f64::INFINITY), res);
    let res = x.eq_(0.0).where_(ft.fc(f64::NEG_INFINITY), res);
    let res = x.lt(0.0).where_(ft.fc(f64::NAN), res);
    x.ne(x).where_(ft.fc(f64::NAN), res)
}

// ---------------------------------------------------------------------------------------------
// sin

/// The bits of `2/pi * 2^-32` (32 zero bits, then `2/pi`) in 16-bit limbs, most significant
/// first: enough for every float32 exponent (a 96-bit window plus one limb to shift from).
const TWO_OVER_PI_16: [u64; 15] = [
    0x0000, 0x0000, 0x517c, 0xc1b7, 0x2722, 0x0a94, 0xfe13, 0xabe8, 0xfa9a, 0x6ee0, 0x6db1, 0x4acc,
    0x9e21, 0xc820, 0xff28,
];

/// The bits of `2/pi * 2^-64` in 32-bit limbs, most significant first: enough for every float64
/// exponent (a 192-bit window plus one limb to shift from).
const TWO_OVER_PI_32: [u64; 39] = [
    0x00000000, 0x00000000, 0x517cc1b7, 0x27220a94, 0xfe13abe8, 0xfa9a6ee0, 0x6db14acc, 0x9e21c820,
    0xff28b1d5, 0xef5de2b0, 0xdb92371d, 0x2126e970, 0x03249775, 0x04e8c90e, 0x7f0ef58e, 0x5894d39f,
    0x74411afa, 0x975da242, 0x74ce3813, 0x5a2fbf20, 0x9cc8eb1c, 0xc1a99cfa, 0x4e422fc5, 0xdefc941d,
    0x8ffc4bff, 0xef02cc07, 0xf79788c5, 0xad05368f, 0xb69b3f67, 0x93e584db, 0xa7a31fb3, 0x4f2ff516,
    0xba93dd63, 0xf5f2f8bd, 0x9e839cfb, 0xc5294975, 0x35fdafd8, 0x8fc6ae84, 0x2b019823,
];

/// `floor(pi/4 * 2^48)` in 16-bit limbs, most significant first.
const PIO4_16: [u64; 3] = [0xc90f, 0xdaa2, 0x2168];

/// `floor(pi/4 * 2^96)` in 32-bit limbs, most significant first.
const PIO4_32: [u64; 3] = [0xc90fdaa2, 0x2168c234, 0xc4c6628b];

/// `(sin r - r) / r^3` as a polynomial in `z = r^2`, `|r| <= pi/4`, lowest degree first
/// (float32: error 5e-9, multiplied by `z <= 0.62` in the result).
const SIN_F32: [f64; 4] = [
    -0.1666666716337204,
    0.008333331905305386,
    -0.00019840087043121457,
    2.7249925551586784e-06,
];

/// The same for float64 (error 3.2e-17).
const SIN_F64: [f64; 6] = [
    -0.16666666666666666,
    0.008333333333330948,
    -0.00019841269836758574,
    2.755731610255244e-06,
    -2.5051131845003624e-08,
    1.5918129294866608e-10,
];

/// `(cos r - 1 + r^2/2) / r^4` as a polynomial in `z = r^2`, `|r| <= pi/4` (float32: error
/// 1.2e-9).
const COS_F32: [f64; 4] = [
    0.0416666679084301,
    -0.00138888880610466,
    2.480059993104078e-05,
    -2.730095900460583e-07,
];

/// The same for float64 (error 2.3e-18).
const COS_F64: [f64; 6] = [
    0.041666666666666664,
    -0.0013888888888887398,
    2.480158729876569e-05,
    -2.7557317271729793e-07,
    2.08761462684032e-09,
    -1.1382632425521717e-11,
];

/// Unsigned multi-word integers: little-endian limbs of `l` bits, each held in the unsigned `dt`
/// of twice that width, so the product of two limbs fits.
struct Limbs {
    dt: DType,
    l: u32,
}

impl Limbs {
    fn mask(&self) -> u64 {
        (1u64 << self.l) - 1
    }

    fn c(&self, v: u64) -> UOp {
        UOp::cnst(self.dt, v)
    }

    /// `a * b mod 2^(n*l)`, as `n` limbs.
    fn mul(&self, a: &[UOp], b: &[UOp], n: usize) -> Vec<UOp> {
        let mut cols: Vec<Vec<UOp>> = vec![Vec::new(); n];
        for (i, ai) in a.iter().enumerate() {
            for (j, bj) in b.iter().enumerate() {
                let c = i + j;
                if c >= n || ai.as_int() == Some(0) || bj.as_int() == Some(0) {
                    continue;
                }
                let p = ai * bj;
                cols[c].push(&p & self.mask());
                if c + 1 < n {
                    cols[c + 1].push(&p >> self.l as u64);
                }
            }
        }
        let mut out = Vec::with_capacity(n);
        let mut carry: Option<UOp> = None;
        for mut col in cols {
            col.extend(carry.take());
            let sum = col
                .into_iter()
                .reduce(|a, b| a + b)
                .unwrap_or_else(|| self.c(0));
            out.push(&sum & self.mask());
            carry = Some(&sum >> self.l as u64);
        }
        out
    }

    /// `a - b mod 2^(n*l)` (as `a + !b + 1`).
    fn sub(&self, a: &[UOp], b: &[UOp]) -> Vec<UOp> {
        let mut carry = self.c(1);
        a.iter()
            .zip(b)
            .map(|(x, y)| {
                let s = x + (y ^ self.mask()) + &carry;
                carry = &s >> self.l as u64;
                &s & self.mask()
            })
            .collect()
    }
}

/// `table[idx]` for an integer UOp `idx` (0 past the end), as a `Where` chain.
fn select(idx: &UOp, table: &[u64], dt: DType) -> UOp {
    let mut acc = UOp::cnst(dt, 0u64);
    for (c, &v) in table.iter().enumerate() {
        if v != 0 {
            acc = idx.eq_(c as i64).where_(UOp::cnst(dt, v), acc);
        }
    }
    acc
}

/// `sin(x)` as a graph of simple ALU ops (see the [module docs](self)): within 0.8 ulp over the
/// whole float range (Payne-Hanek reduction for every `|x| >= 0.78`), `sin(-0.0) = -0.0`,
/// `sin(±inf) = sin(NaN) = NaN`.
///
/// # Panics
/// If `x` is not a float16, bfloat16, float32 or float64 value.
pub fn xsin(x: &UOp) -> UOp {
    in_f32_or_f64(x, "xsin", sin_impl)
}

fn sin_impl(x: &UOp) -> UOp {
    let ft = Fmt::of(x);
    #[allow(clippy::type_complexity)]
    let (lb, table, pio4, sin_c, cos_c): (u32, &[u64], &[u64], &[f64], &[f64]) = if ft.is64 {
        (32, &TWO_OVER_PI_32, &PIO4_32, &SIN_F64, &COS_F64)
    } else {
        (16, &TWO_OVER_PI_16, &PIO4_16, &SIN_F32, &COS_F32)
    };
    let lm = Limbs { dt: ft.u, l: lb };
    let lbi = lb as i64;
    // Window of 2/pi: `wn` limbs; the reduced fraction keeps 6*lb - 2 - (mbits + 1) bits.
    let wn = 6usize;
    let wb = wn as i64 * lbi;
    let pn = pio4.len() as i64;
    let sign_bit = 1u64 << (ft.bits() - 1);
    let bits = ft.as_bits(x);
    let abits = &bits & (sign_bit - 1);
    let ax = ft.float_of(&abits);

    // Payne-Hanek: |x| = mant * 2^E; the table bit of weight 2^-(E + 2*lb - 1) (the first
    // that can contribute to |x| * 2/pi mod 4) starts the window.
    let be = (&abits >> ft.mbits as u64).cast(DType::INT32.vec(ft.f.count()));
    let i0 = (be + (2 * lbi - 1 - ft.bias - ft.mbits as i64)).maximum(0i64);
    let j = i0.idiv(lbi);
    let s = i0.modulo(lbi);
    let shl = s.cast(ft.u);
    let shr = (s.neg() + lbi).cast(ft.u);
    let raw: Vec<UOp> = (0..=wn).map(|k| select(&j, &table[k..], ft.u)).collect();
    let window: Vec<UOp> = (0..wn)
        .rev()
        .map(|k| ((&raw[k] << &shl) | (&raw[k + 1] >> &shr)) & lm.mask())
        .collect();
    let mant = (&abits & ((1u64 << ft.mbits) - 1)) | (1u64 << ft.mbits);
    let m = [&mant & lm.mask(), &mant >> lbi as u64];
    // |x| * 2/pi mod 4 = p / 2^(wb - 2), plus a half to round to the nearest quadrant.
    let p = lm.mul(&m, &window, wn);
    let top = (&p[wn - 1] + (1u64 << (lb - 3))) & lm.mask();
    let q = &top >> (lb - 2) as u64;
    let below = (&top & (1u64 << (lb - 3))).eq_(0u64);
    // |fraction - quadrant| in units of 2^-(wb - 2): d - half, or half - d when below.
    let mut d = p.clone();
    d[wn - 1] = &top & ((1u64 << (lb - 2)) - 1);
    let mut above = d.clone();
    above[wn - 1] = &top & ((1u64 << (lb - 3)) - 1);
    let mut half = vec![lm.c(0); wn];
    half[wn - 1] = lm.c(1 << (lb - 3));
    let under = lm.sub(&half, &d);
    let mag: Vec<UOp> = above
        .iter()
        .zip(&under)
        .map(|(a, u)| below.where_(u, a))
        .collect();
    // r = mag * 2^-(wb - 2) * pi/2, with pi/4 in fixed point, as a float pair r + r_lo.
    let pio4_le: Vec<UOp> = pio4.iter().rev().map(|&v| lm.c(v)).collect();
    let prod = lm.mul(&mag, &pio4_le, wn + pio4.len());
    let min_exp = 1 - ft.bias;
    let terms: Vec<UOp> = prod
        .iter()
        .enumerate()
        .filter_map(|(k, limb)| {
            let e = k as i64 * lbi + 3 - wb - pn * lbi;
            // Limbs are exact in the float; skip those that could only land in denormals.
            (e + lbi >= min_exp).then(|| limb.cast(ft.f) * 2f64.powi(e as i32))
        })
        .collect();
    // Smallest first: only the last addition's rounding matters much.
    let r = terms
        .iter()
        .cloned()
        .reduce(|acc, t| acc + t)
        .expect("sin: no limbs converted");
    // The rounding error of r: the leading non-zero term t satisfies t <= r <= 2t, so t - r is
    // exact, and every later addition rounds relative to a value of the order of ulp(r).
    let r_lo = terms.iter().rev().fold(r.neg(), |acc, t| acc + t);
    let r = below.where_(r.neg(), &r);
    let r_lo = below.where_(r_lo.neg(), &r_lo);

    // |x| < pi/4 needs no reduction.
    let small = ax.lt(0.78);
    let r = small.where_(&ax, &r);
    let r_lo = small.where_(ft.fc(0.0), &r_lo);
    let q = small.where_(lm.c(0), &q);

    // sin or cos of r + r_lo by the quadrant:
    // sin(r + r_lo) ~ sin r + r_lo*(1 - r^2/2), cos(r + r_lo) ~ cos r - r*r_lo.
    let z = &r * &r;
    let one = ft.fc(1.0);
    let hz = &z * 0.5;
    let w = sub(&one, &hz);
    let sin_r = &r + (((&r * &z) * poly(&z, sin_c)) + (&r_lo * &w));
    let cos_tail = sub(&((&z * &z) * poly(&z, cos_c)), &(&r * &r_lo));
    let cos_r = &w + (sub(&sub(&one, &w), &hz) + cos_tail);
    let val = (&q & 1u64).ne(0u64).where_(cos_r, sin_r);
    // Sign: x's, flipped in quadrants 2 and 3.
    let sgn = (&bits & sign_bit) ^ ((&q & 2u64) << (ft.bits() - 2) as u64);
    let res = ft.float_of(&(ft.as_bits(&val) ^ sgn));
    let inf_bits = ((2 * ft.bias + 1) as u64) << ft.mbits;
    abits.lt(inf_bits).where_(res, ft.fc(f64::NAN))
}

// ---------------------------------------------------------------------------------------------
// rules

/// Rules rewriting `Exp2`, `Log2` and `Sin` of float16, bfloat16, float32 and float64 into
/// [`xexp2`], [`xlog2`] and [`xsin`], for [`graph_rewrite`](tinygrad_uop::graph_rewrite).
pub fn decomp_rules() -> &'static PatternMatcher {
    static RULES: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let un = |op: Ops| UPat::op(op).dtypes(&FLOATS).src(vec![UPat::var("x")]);
        PatternMatcher::new(rules![
            un(Ops::Exp2) => |x| xexp2(x),
            un(Ops::Log2) => |x| xlog2(x),
            un(Ops::Sin) => |x| xsin(x),
        ])
    });
    &RULES
}
