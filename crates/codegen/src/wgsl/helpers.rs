//! The WGSL helper functions a shader may need: float -> integer conversions (64-bit
//! included) and `float16`/`bfloat16` conversions, with their dependencies.

/// The helpers a helper calls.
pub(super) fn helper_deps(name: &str) -> &'static [&'static str] {
    match name {
        "ftoi_lo_f32" | "ftoi64_f32" | "ftou64_f32" | "f32_to_f16" | "f32_to_bf16" => {
            &["isnan_f32"]
        }
        "ftoi_lo_f64" | "ftoi64_f64" | "ftou64_f64" => &["isnan_f64"],
        _ => &[],
    }
}

/// The WGSL source of a helper function.
pub(super) fn helper_source(name: &str) -> &'static str {
    match name {
        "isnan_f32" => {
            "fn isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n"
        }
        "isnan_f64" => {
            "fn isnan_f64(x: f64) -> bool { return (bitcast<u64>(x) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu; }\n"
        }
        "ftoi_lo_f32" => FTOI_LO_F32,
        "ftoi_lo_f64" => FTOI_LO_F64,
        "ftoi64_f32" => FTOI64_F32,
        "ftoi64_f64" => FTOI64_F64,
        "ftou64_f32" => FTOU64_F32,
        "ftou64_f64" => FTOU64_F64,
        "f16_to_f32" => F16_TO_F32,
        "f32_to_f16" => F32_TO_F16,
        "f32_to_bf16" => F32_TO_BF16,
        _ => "",
    }
}

/// The low 32 bits of `x` truncated and saturated to `int64` (`uint64` for values >= 2^63 when
/// `uns`); NaN gives 0.
const FTOI_LO_F32: &str = "fn ftoi_lo_f32(x: f32, uns: bool) -> u32 {
  if (isnan_f32(x)) { return 0u; }
  let t = trunc(x);
  if (abs(t) < 2147483648.0f) { return bitcast<u32>(i32(t)); }
  if (uns && t >= 18446744073709551616.0f) { return 0xffffffffu; }
  if (!uns && t >= 9223372036854775808.0f) { return 0xffffffffu; }
  if (t < -9223372036854775808.0f) { return 0u; }
  let hi = floor(t / 4294967296.0f);
  return u32(t - hi * 4294967296.0f);
}
";

const FTOI_LO_F64: &str = "fn ftoi_lo_f64(x: f64, uns: bool) -> u32 {
  if (isnan_f64(x)) { return 0u; }
  let t = trunc(x);
  if (abs(t) < 2147483648.0lf) { return bitcast<u32>(i32(t)); }
  if (uns && t >= 18446744073709551616.0lf) { return 0xffffffffu; }
  if (!uns && t >= 9223372036854775808.0lf) { return 0xffffffffu; }
  if (t < -9223372036854775808.0lf) { return 0u; }
  let hi = floor(t / 4294967296.0lf);
  return u32(t - hi * 4294967296.0lf);
}
";

const FTOI64_F32: &str = "fn ftoi64_f32(x: f32) -> i64 {
  if (isnan_f32(x)) { return 0li; }
  let t = trunc(x);
  if (t >= 9223372036854775808.0f) { return 9223372036854775807li; }
  if (t < -9223372036854775808.0f) { return bitcast<i64>(0x8000000000000000lu); }
  return i64(t);
}
";

const FTOI64_F64: &str = "fn ftoi64_f64(x: f64) -> i64 {
  if (isnan_f64(x)) { return 0li; }
  let t = trunc(x);
  if (t >= 9223372036854775808.0lf) { return 9223372036854775807li; }
  if (t < -9223372036854775808.0lf) { return bitcast<i64>(0x8000000000000000lu); }
  return i64(t);
}
";

const FTOU64_F32: &str = "fn ftou64_f32(x: f32) -> u64 {
  if (isnan_f32(x)) { return 0lu; }
  let t = trunc(x);
  if (t >= 18446744073709551616.0f) { return 18446744073709551615lu; }
  if (t >= 9223372036854775808.0f) { return u64(t); }
  if (t < -9223372036854775808.0f) { return 0x8000000000000000lu; }
  return bitcast<u64>(i64(t));
}
";

const FTOU64_F64: &str = "fn ftou64_f64(x: f64) -> u64 {
  if (isnan_f64(x)) { return 0lu; }
  let t = trunc(x);
  if (t >= 18446744073709551616.0lf) { return 18446744073709551615lu; }
  if (t >= 9223372036854775808.0lf) { return u64(t); }
  if (t < -9223372036854775808.0lf) { return 0x8000000000000000lu; }
  return bitcast<u64>(i64(t));
}
";

/// `float16` bits (low 16 bits of `h`) to `float32`, exactly (subnormals included).
const F16_TO_F32: &str = "fn f16_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return bitcast<f32>(sign | 0x7f800000u | (m << 13u)); }
  if (e != 0u) { return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u)); }
  let v = f32(m) * 5.9604644775390625e-8f;
  return select(v, -v, sign != 0u);
}
";

/// `float32` to `float16` bits, rounding to nearest even (overflow gives infinity, NaN stays
/// NaN).
const F32_TO_F16: &str = "fn f32_to_f16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  let sign = (x >> 16u) & 0x8000u;
  let a = x & 0x7fffffffu;
  if (isnan_f32(f)) { return sign | 0x7e00u | ((a >> 13u) & 0x3ffu); }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) {
    let r = a - 0x38000000u;
    return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
  }
  if (a <= 0x33000000u) { return sign; }
  let e = a >> 23u;
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = 126u - e;
  let q = m >> sh;
  let rem = m & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  var r = q;
  if (rem > half || (rem == half && (q & 1u) == 1u)) { r = r + 1u; }
  return sign | r;
}
";

/// `float32` to `bfloat16` bits, rounding to nearest even (NaN stays NaN).
const F32_TO_BF16: &str = "fn f32_to_bf16(f: f32) -> u32 {
  let x = bitcast<u32>(f);
  if (isnan_f32(f)) { return (x >> 16u) | 0x40u; }
  return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}
";
