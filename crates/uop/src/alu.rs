//! [`exec_alu`]: constant evaluation of every ALU op for every dtype.
//!
//! This is the reference semantics of the IR: constant folding uses it, and so does the `REF`
//! interpreter device. It is total (never panics) and exact:
//! - **Integers** (`index`, signed, unsigned) wrap to the dtype's width (two's complement; `index`
//!   is 64 bits). `IDiv`/`Mod` truncate toward zero (C semantics: the remainder has the sign of
//!   the dividend). Division by zero is defined: `x // 0 == 0` and `x % 0 == 0`. `FDiv` and `Recip`
//!   on integers are truncating divisions too (`recip(x) = 1 // x`).
//! - **Shifts**: the amount is read as unsigned; amounts at or above the width give `0` (`Shl`,
//!   and `Shr` of a non-negative value) or `-1` (`Shr` of a negative signed value). `Shr` is
//!   arithmetic for signed dtypes and logical for unsigned ones.
//! - **Floats**: computed in `f64`, then rounded to the dtype (so `float32` results are rounded
//!   to `float32`, `MulAcc` rounds once after `x*y+z` in `f64`); fp8 results are rounded to
//!   `float32` first (fp8 arithmetic is `float32` arithmetic, as every backend runs it). IEEE special values as C:
//!   `log2(0) = -inf`, `log2(<0) = nan`, `sqrt(<0) = nan`, `recip(±0) = ±inf`, `sin(±inf) = nan`,
//!   `pow` is C's `pow`. `Max` propagates NaN. `IDiv` on floats is `trunc(x / y)`, `Mod` is C's
//!   `fmod`. `And`/`Or`/`Xor` on floats act on the bit patterns; `Shl`/`Shr` on floats multiply
//!   / divide by `2^y`.
//! - **Bools** compute as the integers 0/1 and convert back (non-zero is true): `Add`/`Max` act
//!   as `or`, `Mul` as `and`, `Sub`/`Xor` as `xor`. `Neg` on bool is logical not.
//! - **Integer `Pow`**: exact repeated multiplication with wrapping; a negative exponent gives
//!   `1 // x^-e` (so `0` unless `x` is `±1`). Other transcendental ops (`Exp2`, `Log2`, `Sin`,
//!   `Sqrt`) on integers compute in `f64` and convert back (truncating).
//! - **Comparisons** produce `bool`; operands compare by value (floats as IEEE: NaN compares
//!   unequal and unordered).
//! - `Where(c, t, f)` is `c ? t : f`; `MulAcc(x, y, z)` is `x*y + z`.
//! - `Threefry(x, key)` is tinygrad's Threefry-2x32 (20 rounds) on a `uint64` counter and key.
//!
//! Corner cases made total: a missing operand reads as 0; a non-ALU op returns its first operand
//! (or 0); a `void`/pointer dtype computes in its element type, `void` giving 0. Vector dtypes
//! compute per element with the scalar type.

use tinygrad_dtype::{ConstValue, DType, Scalar};

use crate::Ops;

/// Evaluates ALU op `op` producing dtype `dtype` on constant operands `src` (see the module
/// docs for the exact semantics). Never panics.
pub fn exec_alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
    let dt = dtype.scalar();
    if dt.kind() == Scalar::Void {
        return ConstValue::Int(0);
    }
    let a = |i: usize| src.get(i).copied().unwrap_or(ConstValue::Int(0));
    if op.is_comparison() {
        return ConstValue::Bool(compare(op, a(0), a(1)));
    }
    match op {
        Ops::Where => return a(if a(0).as_bool() { 1 } else { 2 }).cast(dt),
        Ops::Threefry => {
            return ConstValue::UInt(threefry2x32(a(0).as_u64(), a(1).as_u64())).cast(dt);
        }
        op if !op.is_alu() => return a(0).cast(dt),
        _ => {}
    }
    if dt.is_float() {
        let f = |i: usize| a(i).cast(dt).as_f64();
        let r = float_alu(op, dt, f(0), f(1), f(2));
        // fp8 arithmetic is float32 arithmetic rounded to fp8 (what every backend runs)
        let r = if dt.is_fp8() {
            ConstValue::Float(r).cast(DType::FLOAT32).as_f64()
        } else {
            r
        };
        return ConstValue::Float(r).cast(dt);
    }
    if dt.is_bool() && op == Ops::Neg {
        return ConstValue::Bool(!a(0).as_bool());
    }
    // Integers and bools: operands as the dtype's values (bools as 0/1).
    let work = if dt.is_bool() { DType::INT64 } else { dt };
    let v = |i: usize| a(i).cast(dt).cast(work);
    int_alu(op, work, v(0), v(1), v(2)).cast(dt)
}

fn compare(op: Ops, x: ConstValue, y: ConstValue) -> bool {
    use std::cmp::Ordering;
    let ord = match (x, y) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => {
            x.as_f64().partial_cmp(&y.as_f64())
        }
        _ => Some(as_i128(x).cmp(&as_i128(y))),
    };
    match op {
        Ops::CmpLt => ord == Some(Ordering::Less),
        Ops::CmpEq => ord == Some(Ordering::Equal),
        _ => ord != Some(Ordering::Equal),
    }
}

/// The exact integer value of a non-float constant.
fn as_i128(c: ConstValue) -> i128 {
    match c {
        ConstValue::UInt(u) => u as i128,
        c => c.as_i64() as i128,
    }
}

fn float_alu(op: Ops, dt: DType, x: f64, y: f64, z: f64) -> f64 {
    match op {
        Ops::Add => x + y,
        Ops::Sub => x - y,
        Ops::Mul => x * y,
        Ops::FDiv => x / y,
        Ops::IDiv => (x / y).trunc(),
        Ops::Mod => x % y,
        Ops::Max => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else if x >= y {
                x
            } else {
                y
            }
        }
        Ops::Neg => -x,
        Ops::Exp2 => x.exp2(),
        Ops::Log2 => x.log2(),
        Ops::Sin => x.sin(),
        Ops::Sqrt => x.sqrt(),
        Ops::Recip => 1.0 / x,
        Ops::Trunc => x.trunc(),
        Ops::Round => x.round_ties_even(),
        Ops::Pow => x.powf(y),
        Ops::MulAcc => x * y + z,
        Ops::Shl => x * y.exp2(),
        Ops::Shr => x / y.exp2(),
        Ops::And | Ops::Or | Ops::Xor => {
            let bits = |v: f64| {
                let b = ConstValue::Float(v).to_le_bytes(dt);
                let mut b8 = [0u8; 8];
                b8[..b.len()].copy_from_slice(&b);
                u64::from_le_bytes(b8)
            };
            let (bx, by) = (bits(x), bits(y));
            let r = match op {
                Ops::And => bx & by,
                Ops::Or => bx | by,
                _ => bx ^ by,
            };
            let n = dt.itemsize();
            ConstValue::from_le_bytes(dt, &r.to_le_bytes()[..n]).as_f64()
        }
        _ => x,
    }
}

/// Integer ALU in dtype `dt` (an integer dtype); operands are canonical values of `dt`.
fn int_alu(op: Ops, dt: DType, x: ConstValue, y: ConstValue, z: ConstValue) -> ConstValue {
    let bits = dt.kind().bitsize();
    let unsigned = dt.is_unsigned();
    // Raw 64-bit patterns: exact modulo 2^64, truncated to the width by the final cast.
    let (ux, uy, uz) = (x.as_u64(), y.as_u64(), z.as_u64());
    let (sx, sy) = (x.as_i64(), y.as_i64());
    let raw = |v: u64| ConstValue::UInt(v);
    let signed = |v: i64| ConstValue::Int(v);
    match op {
        Ops::Add => raw(ux.wrapping_add(uy)),
        Ops::Sub => raw(ux.wrapping_sub(uy)),
        Ops::Mul => raw(ux.wrapping_mul(uy)),
        Ops::Neg => raw(ux.wrapping_neg()),
        Ops::MulAcc => raw(ux.wrapping_mul(uy).wrapping_add(uz)),
        Ops::IDiv | Ops::FDiv => {
            if unsigned {
                raw(ux.checked_div(uy).unwrap_or(0))
            } else if sy == 0 {
                signed(0)
            } else {
                signed(sx.wrapping_div(sy))
            }
        }
        Ops::Mod => {
            if unsigned {
                raw(ux.checked_rem(uy).unwrap_or(0))
            } else if sy == 0 {
                signed(0)
            } else {
                signed(sx.wrapping_rem(sy))
            }
        }
        Ops::Recip => {
            if unsigned {
                raw(if ux == 1 { 1 } else { 0 })
            } else {
                signed(if sx == 1 || sx == -1 { sx } else { 0 })
            }
        }
        Ops::Max => {
            if unsigned {
                raw(ux.max(uy))
            } else {
                signed(sx.max(sy))
            }
        }
        Ops::And => raw(ux & uy),
        Ops::Or => raw(ux | uy),
        Ops::Xor => raw(ux ^ uy),
        Ops::Shl => raw(if uy >= bits as u64 { 0 } else { ux << uy }),
        Ops::Shr => {
            if unsigned {
                raw(if uy >= bits as u64 { 0 } else { ux >> uy })
            } else {
                signed(sx >> uy.min(63))
            }
        }
        Ops::Trunc | Ops::Round => x,
        Ops::Pow => {
            if !unsigned && sy < 0 {
                // x^-e = 1 // x^e
                signed(match sx {
                    1 => 1,
                    -1 => {
                        if sy % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                })
            } else {
                raw(pow_mod_2_64(ux, uy))
            }
        }
        Ops::Exp2 | Ops::Log2 | Ops::Sin | Ops::Sqrt => {
            let f = if unsigned { ux as f64 } else { sx as f64 };
            ConstValue::Float(float_alu(op, DType::FLOAT64, f, 0.0, 0.0))
        }
        _ => x,
    }
}

/// `base^exp` modulo 2^64, by repeated squaring.
fn pow_mod_2_64(mut base: u64, mut exp: u64) -> u64 {
    let mut acc = 1u64;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    acc
}

/// tinygrad's Threefry-2x32 with 20 rounds: `x` is the counter (low word first), `key` the key,
/// both split into two 32-bit words; the result packs the two output words (second word high).
pub fn threefry2x32(x: u64, key: u64) -> u64 {
    const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let (x0, x1) = (x as u32, (x >> 32) as u32);
    let (k0, k1) = (key as u32, (key >> 32) as u32);
    let ks = [k1, k0 ^ k1 ^ 0x1BD1_1BDA, k0];
    let mut a = x0.wrapping_add(ks[2]);
    let mut b = x1.wrapping_add(ks[0]);
    for i in 0..5 {
        for r in ROTATIONS[i % 2] {
            a = a.wrapping_add(b);
            b = a ^ b.rotate_left(r);
        }
        a = a.wrapping_add(ks[i % 3]);
        b = b.wrapping_add(ks[(i + 1) % 3]).wrapping_add(i as u32 + 1);
    }
    ((b as u64) << 32) | a as u64
}
