//! Emulated dtypes: `float16` and `bfloat16` on targets without half-precision arithmetic, and
//! the fp8 formats (`fp8e4m3`, `fp8e5m2`) on targets without fp8.
//!
//! Half and fp8 values stay 16/8-bit in memory and in registers (loads, stores, `Where` move
//! bits); every computation happens in `float32`: an ALU op on them becomes
//! `cast(op(cast(a, f32), ...))`, a reduction accumulates in `float32`, and casts between them
//! and anything but `float32` go through `float32` (so a `float64 -> fp8` cast rounds twice;
//! the second rounding only differs from a direct one for values within 2^-24 of an fp8
//! midpoint; finite values beyond float32's range are clamped first, so they saturate). A renderer then only needs half <-> `float32` conversions; fp8 needs none:
//! [`emulate_fp8`] also turns its conversions into integer arithmetic on the bits
//! ([`fp8_bits_to_f32`], [`f32_to_fp8_bits`]: exact, round to nearest even, saturating finite
//! overflow as `tinygrad_dtype::fp8` does) and every remaining fp8 value into a `uint8`.

use std::sync::LazyLock;

use tinygrad_dtype::fp8::{Fp8Format, f64_to_fp8};
use tinygrad_dtype::{ConstValue, DType};
use tinygrad_uop::{Arg, IntoUOp, Ops, PatternMatcher, UOp, UPat, rules};

fn is_half(dt: DType) -> bool {
    matches!(dt.scalar(), DType::FLOAT16 | DType::BFLOAT16)
}

fn is_fp8(dt: DType) -> bool {
    dt.is_fp8()
}

fn to_f32(u: &UOp) -> UOp {
    UOp::new(
        Ops::Cast,
        DType::FLOAT32.vec(u.dtype().count()),
        vec![u.clone()],
        Arg::None,
    )
}

fn cast_to(u: UOp, dt: DType) -> UOp {
    UOp::new(Ops::Cast, dt, vec![u], Arg::None)
}

/// An ALU op (not `Where`, which only moves bits) computed on an emulated dtype (`is_half`:
/// whether a dtype is one): compute in float32.
fn alu_in_f32(x: &UOp, is_half: fn(DType) -> bool) -> Option<UOp> {
    let op = x.op();
    if !op.is_alu() || op == Ops::Where || !x.src().iter().any(|s| is_half(s.dtype())) {
        return None;
    }
    let src: Vec<UOp> = x
        .src()
        .iter()
        .map(|s| {
            if is_half(s.dtype()) {
                to_f32(s)
            } else {
                s.clone()
            }
        })
        .collect();
    let out_dt = if is_half(x.dtype()) {
        DType::FLOAT32.vec(x.dtype().count())
    } else {
        x.dtype()
    };
    let r = UOp::new(op, out_dt, src, Arg::None);
    Some(if is_half(x.dtype()) {
        cast_to(r, x.dtype())
    } else {
        r
    })
}

/// A cast between an emulated dtype and something other than float32 goes through float32.
fn cast_via_f32(x: &UOp, is_half: fn(DType) -> bool) -> Option<UOp> {
    let (from, to) = (x.s(0).dtype().scalar(), x.dtype().scalar());
    let half_from = is_half(from) && to != DType::FLOAT32;
    let half_to = is_half(to) && from != DType::FLOAT32;
    if !(half_from || half_to) || from == to {
        return None;
    }
    let mut v = x.s(0).clone();
    if is_fp8(to) && from == DType::FLOAT64 {
        // a finite float64 beyond float32's range saturates in fp8 (float32 would make it inf,
        // which fp8 keeps as inf or NaN): clamp it to float32's largest first
        let lim = f64::from(f32::MAX);
        let big = lim.into_uop(v.dtype()).lt(&v) & v.lt(f64::INFINITY);
        let v1 = big.where_(lim, &v);
        let small = v1.lt(-lim) & f64::NEG_INFINITY.into_uop(v.dtype()).lt(&v1);
        v = small.where_(-lim, &v1);
    }
    Some(cast_to(to_f32(&v), x.dtype()))
}

/// A reduction over an emulated dtype accumulates in float32.
fn reduce_in_f32(x: &UOp, is_half: fn(DType) -> bool) -> Option<UOp> {
    if !is_half(x.dtype()) {
        return None;
    }
    let mut src = vec![to_f32(x.s(0))];
    src.extend_from_slice(&x.src()[1..]);
    Some(cast_to(
        UOp::new(Ops::Reduce, DType::FLOAT32, src, x.arg().clone()),
        x.dtype(),
    ))
}

/// The rewrite rules (for `graph_rewrite` on a kernel AST).
pub fn emulate_half_rules() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Cast).named("x") => |x| cast_via_f32(x, is_half),
            UPat::op(Ops::Reduce).named("x") => |x| reduce_in_f32(x, is_half),
            UPat::any().named("x") => |x| alu_in_f32(x, is_half),
        ])
    });
    &PM
}

// ---------------------------------------------------------------------------------------------
// fp8

/// Applies the fp8 emulation to a kernel AST: arithmetic in float32 (as for halves), then the
/// conversions as integer arithmetic, then every fp8 value (buffers, loads, stores, constants,
/// selects) as the `uint8` of its bits.
pub fn emulate_fp8(ast: &UOp) -> UOp {
    static F32: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Cast).named("x") => |x| cast_via_f32(x, is_fp8),
            UPat::op(Ops::Reduce).named("x") => |x| reduce_in_f32(x, is_fp8),
            UPat::any().named("x") => |x| alu_in_f32(x, is_fp8),
        ])
    });
    static CONVERT: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::op(Ops::Cast).named("x") => |x| fp8_cast_as_bits(x),
        ])
    });
    static RETYPE: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(rules![
            UPat::any().named("x") => |x| fp8_as_uint8(x),
        ])
    });
    if !ast.toposort().iter().any(|u| is_fp8(u.dtype())) {
        return ast.clone();
    }
    let ast = tinygrad_uop::graph_rewrite(ast, &F32, &mut (), false);
    let ast = tinygrad_uop::graph_rewrite(&ast, &CONVERT, &mut (), false);
    tinygrad_uop::graph_rewrite(&ast, &RETYPE, &mut (), false)
}

fn fp8_format(dt: DType) -> Fp8Format {
    if dt.scalar() == DType::FP8E4M3 {
        Fp8Format::E4M3
    } else {
        Fp8Format::E5M2
    }
}

fn bitcast(x: &UOp, dt: DType) -> UOp {
    UOp::new(Ops::Bitcast, dt, vec![x.clone()], Arg::None)
}

/// `Cast(f32 -> fp8)` and `Cast(fp8 -> f32)` (the only fp8 casts after the float32 pass) as
/// conversions of the bits, with a `Bitcast` between the fp8 value and its `uint8` (removed
/// when fp8 becomes `uint8`).
fn fp8_cast_as_bits(x: &UOp) -> Option<UOp> {
    let (from, to) = (x.s(0).dtype(), x.dtype());
    let n = to.count();
    if is_fp8(to) && from.scalar() == DType::FLOAT32 {
        let bits = f32_to_fp8_bits(x.s(0), fp8_format(to));
        Some(bitcast(&bits, to))
    } else if is_fp8(from) && to.scalar() == DType::FLOAT32 {
        let bits = bitcast(x.s(0), DType::UINT8.vec(n));
        Some(fp8_bits_to_f32(&bits, fp8_format(from)))
    } else {
        None
    }
}

/// An fp8-typed node as the same node on `uint8` (pointers and vector widths kept; constants
/// as their bit patterns); a `Bitcast` that became `uint8 -> uint8` disappears.
fn fp8_as_uint8(x: &UOp) -> Option<UOp> {
    if x.op() == Ops::Bitcast && x.dtype() == x.s(0).dtype() {
        return Some(x.s(0).clone());
    }
    let dt = x.dtype();
    if !is_fp8(dt) {
        return None;
    }
    let base = DType::UINT8.vec(dt.count());
    let new_dt = match dt.addr_space() {
        Some(addr) => base.ptr(addr),
        None => base,
    };
    if x.op() == Ops::Bitcast && x.s(0).dtype() == new_dt {
        return Some(x.s(0).clone());
    }
    let arg = match x.arg().as_const() {
        Some(c) if x.op() == Ops::Const => Arg::Const(ConstValue::UInt(u64::from(f64_to_fp8(
            c.as_f64(),
            fp8_format(dt),
        )))),
        _ => x.arg().clone(),
    };
    Some(UOp::new(x.op(), new_dt, x.src().to_vec(), arg))
}

/// The exact float32 value of fp8 bits (`bits`: `uint8`, any vector width).
///
/// # Panics
/// If `bits` is not `uint8`.
pub fn fp8_bits_to_f32(bits: &UOp, fmt: Fp8Format) -> UOp {
    assert_eq!(
        bits.dtype().scalar(),
        DType::UINT8,
        "fp8_bits_to_f32: expected uint8 bits, got {}",
        bits.dtype()
    );
    let n = bits.dtype().count();
    let (u32t, f32t) = (DType::UINT32.vec(n), DType::FLOAT32.vec(n));
    let (mbits, bias): (i64, i64) = match fmt {
        Fp8Format::E4M3 => (3, 7),
        Fp8Format::E5M2 => (2, 15),
    };
    let emax = (1i64 << (7 - mbits)) - 1;
    let b = bits.cast(u32t);
    let sign = (&b & 0x80i64) << 24i64;
    let e = (&b >> mbits) & emax;
    let m = &b & ((1i64 << mbits) - 1);
    // normal: exponent rebiased, mantissa moved to the top of float32's
    let normal = (((&e + (127 - bias)) << 23i64) | (&m << (23 - mbits))) | &sign;
    // denormal (e == 0, zero included): m * 2^(1 - bias - mbits), exact in float32
    let tiny = m.cast(f32t) * 2f64.powi((1 - bias - mbits) as i32);
    let denormal = bitcast(&tiny, u32t) | &sign;
    let finite = e.eq_(0i64).where_(&denormal, &normal);
    let nan = UOp::cnst(u32t, 0x7fc0_0000u32);
    let out = match fmt {
        // no infinities: 0x7f/0xff is NaN
        Fp8Format::E4M3 => (&b & 0x7fi64).eq_(0x7fi64).where_(&nan, &finite),
        // e == 31: infinity (m == 0) or NaN
        Fp8Format::E5M2 => {
            let inf = &sign | 0x7f80_0000i64;
            let special = m.eq_(0i64).where_(&inf, &nan);
            e.eq_(emax).where_(&special, &finite)
        }
    };
    bitcast(&out, f32t)
}

/// The fp8 bits (`uint8`) of a float32 value, rounded to nearest even, finite overflow
/// saturated to the largest finite value; NaN becomes NaN, infinity NaN in `e4m3` (which has
/// none) and infinity in `e5m2` (`tinygrad_dtype::fp8::f64_to_fp8`, the reference).
///
/// # Panics
/// If `x` is not `float32`.
pub fn f32_to_fp8_bits(x: &UOp, fmt: Fp8Format) -> UOp {
    assert_eq!(
        x.dtype().scalar(),
        DType::FLOAT32,
        "f32_to_fp8_bits: expected a float32 value, got {}",
        x.dtype()
    );
    let n = x.dtype().count();
    let (u32t, f32t) = (DType::UINT32.vec(n), DType::FLOAT32.vec(n));
    let (mbits, bias, max_norm, max_val, min_norm): (i64, i64, i64, f32, f32) = match fmt {
        Fp8Format::E4M3 => (3, 7, 0x7e, 448.0, 2f32.powi(-6)),
        Fp8Format::E5M2 => (2, 15, 0x7b, 57344.0, 2f32.powi(-14)),
    };
    let u = bitcast(x, u32t);
    let sign = (&u >> 24i64) & 0x80i64;
    let a = &u & 0x7fff_ffffi64;
    let ax = bitcast(&a, f32t);
    // normal: drop 23 - mbits mantissa bits, rounding to nearest even, and rebias (a carry
    // into the exponent is the right result; |x| <= max keeps it finite)
    let drop = 23 - mbits;
    let rounded = (&a + ((1i64 << (drop - 1)) - 1)) + ((&a >> drop) & 1i64);
    let normal = (rounded >> drop) + (-((127 - bias) << mbits));
    // denormal: |x| / 2^(1 - bias - mbits) rounded to an integer (2^mbits is the smallest
    // normal's encoding, also right)
    let scaled = &ax * 2f64.powi((bias + mbits - 1) as i32);
    let denormal = scaled.unary(Ops::Round).cast(u32t);
    let finite = ax.lt(min_norm).where_(&denormal, &normal);
    let finite = UOp::cnst(f32t, max_val)
        .lt(&ax)
        .where_(&UOp::cnst(u32t, max_norm), &finite);
    let (nan, inf) = match fmt {
        Fp8Format::E4M3 => (0x7fi64, 0x7fi64),
        Fp8Format::E5M2 => (0x7fi64, 0x7ci64),
    };
    // NaN fails every compare above; infinity compares above max (saturates): both fixed here
    // (NaN told by its bits: a shader compiler may fold `x != x`)
    let special = UOp::cnst(u32t, 0x7f80_0000u32)
        .lt(&a)
        .where_(&UOp::cnst(u32t, nan), &UOp::cnst(u32t, inf));
    let is_special = a.lt(0x7f80_0000i64).ne(true);
    let out = is_special.where_(&special, &finite) | &sign;
    out.cast(DType::UINT8.vec(n))
}
