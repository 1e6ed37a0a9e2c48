//! Casts (`float16`/`bfloat16` included) and ALU ops: shifts, and integer division and modulo
//! (by constants through magic reciprocals, by zero giving 0).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};
use tinygrad_dtype::{DType, Scalar};
use tinygrad_uop::{Ops, UOp};

use super::{Ctx, clif_type, lane_flags, zero_of};

impl<'a> Ctx<'a> {
    pub(super) fn cast(&mut self, u: &UOp) -> Result<Value, String> {
        let from = u.s(0).dtype();
        let to = u.dtype();
        let x = self.val(u.s(0))?;
        let (fty, tty) = (clif_type(from)?, clif_type(to)?);
        let half = |d: DType| matches!(d.scalar(), DType::FLOAT16 | DType::BFLOAT16);
        if half(from) || half(to) {
            return self.half_cast(from, to, x);
        }
        if from.is_bool() && from.count() > 1 {
            debug_assert!(
                matches!(to.kind(), Scalar::Float32 | Scalar::Int32),
                "vector bool casts are to float32/int32 (opt::vector_native)"
            );
            // Lane masks (0 or all ones) to 0/1: the bits of one, masked (mnist non-GEMM
            // kernels ~230 -> ~152 ms; see docs/performance.md).
            let one = if to.is_float() {
                let f = self.i().f32const(1.0);
                let v = self.i().splat(types::F32X4, f);
                self.i().bitcast(types::I32X4, lane_flags(), v)
            } else {
                let i = self.i().iconst(types::I32, 1);
                self.i().splat(types::I32X4, i)
            };
            let bits = self.i().band(x, one);
            return Ok(if to.is_float() {
                self.i().bitcast(types::F32X4, lane_flags(), bits)
            } else {
                bits
            });
        }
        if to.is_bool() {
            return Ok(if from.is_float() {
                let z = zero_of(&mut self.b, fty);
                self.i().fcmp(FloatCC::NotEqual, x, z)
            } else {
                self.i().icmp_imm_s(IntCC::NotEqual, x, 0)
            });
        }
        if from.is_float() && to.is_float() {
            return Ok(match (fty.bits(), tty.bits()) {
                (a, b) if a < b => self.i().fpromote(tty, x),
                (a, b) if a > b => self.i().fdemote(tty, x),
                _ => x,
            });
        }
        if from.is_float() {
            // truncate toward zero in i64 (saturating), then wrap to the target width
            let wide = if to.kind() == Scalar::UInt64 {
                let as_s = self.i().fcvt_to_sint_sat(types::I64, x);
                let as_u = self.i().fcvt_to_uint_sat(types::I64, x);
                let lim = if fty == types::F32 {
                    self.i().f32const(9.223_372e18)
                } else {
                    self.i().f64const(9.223_372_036_854_776e18)
                };
                let big = self.i().fcmp(FloatCC::GreaterThanOrEqual, x, lim);
                self.i().select(big, as_u, as_s)
            } else {
                self.i().fcvt_to_sint_sat(types::I64, x)
            };
            return Ok(if tty == types::I64 {
                wide
            } else {
                self.i().ireduce(tty, wide)
            });
        }
        // from int/bool
        let signed = from.is_int() && !from.is_unsigned();
        if to.is_float() {
            return Ok(if signed {
                self.i().fcvt_from_sint(tty, x)
            } else {
                self.i().fcvt_from_uint(tty, x)
            });
        }
        Ok(match fty.bits().cmp(&tty.bits()) {
            std::cmp::Ordering::Less if signed => self.i().sextend(tty, x),
            std::cmp::Ordering::Less => self.i().uextend(tty, x),
            std::cmp::Ordering::Greater => self.i().ireduce(tty, x),
            std::cmp::Ordering::Equal => x,
        })
    }

    /// Conversions between a half type and `float32` (the only ones left after emulate.rs), as
    /// integer bit manipulation with round-to-nearest-even, like the hardware instructions.
    fn half_cast(&mut self, from: DType, to: DType, x: Value) -> Result<Value, String> {
        let (i32t, f32t) = (types::I32, types::F32);
        match (from.scalar(), to.scalar()) {
            (DType::BFLOAT16, DType::FLOAT32) => {
                let w = self.i().uextend(i32t, x);
                let w = self.i().ishl_imm_u(w, 16);
                Ok(self.i().bitcast(f32t, MemFlagsData::new(), w))
            }
            (DType::FLOAT32, DType::BFLOAT16) => {
                let u = self.i().bitcast(i32t, MemFlagsData::new(), x);
                let lsb = self.i().ushr_imm_u(u, 16);
                let lsb = self.i().band_imm_s(lsb, 1);
                let r = self.i().iadd_imm_s(u, 0x7fff);
                let r = self.i().iadd(r, lsb);
                let r = self.i().ushr_imm_u(r, 16);
                let q = self.i().ushr_imm_u(u, 16);
                let q = self.i().bor_imm_s(q, 0x40); // NaN stays a (quiet) NaN
                let is_nan = self.i().fcmp(FloatCC::Unordered, x, x);
                let r = self.i().select(is_nan, q, r);
                Ok(self.i().ireduce(types::I16, r))
            }
            (DType::FLOAT16, DType::FLOAT32) => {
                let h = self.i().uextend(i32t, x);
                let sign = self.i().band_imm_s(h, 0x8000);
                let sign = self.i().ishl_imm_u(sign, 16);
                let em = self.i().band_imm_s(h, 0x7fff);
                // normal: rebias the exponent
                let normal = self.i().ishl_imm_u(em, 13);
                let normal = self.i().iadd_imm_s(normal, (127 - 15) << 23);
                // inf / NaN: all-ones exponent, mantissa kept
                let mant = self.i().band_imm_s(em, 0x3ff);
                let mant = self.i().ishl_imm_u(mant, 13);
                let infnan = self.i().bor_imm_s(mant, 0x7f80_0000);
                // subnormal (and zero): em * 2^-24 exactly
                let fem = self.i().fcvt_from_uint(f32t, em);
                let scale = self.i().f32const(2f32.powi(-24));
                let sub = self.i().fmul(fem, scale);
                let sub = self.i().bitcast(i32t, MemFlagsData::new(), sub);
                let is_sub = self.i().icmp_imm_s(IntCC::UnsignedLessThan, em, 0x400);
                let is_inf = self
                    .i()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, em, 0x7c00);
                let r = self.i().select(is_sub, sub, normal);
                let r = self.i().select(is_inf, infnan, r);
                let r = self.i().bor(r, sign);
                Ok(self.i().bitcast(f32t, MemFlagsData::new(), r))
            }
            (DType::FLOAT32, DType::FLOAT16) => {
                let u = self.i().bitcast(i32t, MemFlagsData::new(), x);
                let sign = self.i().ushr_imm_u(u, 16);
                let sign = self.i().band_imm_s(sign, 0x8000);
                let a = self.i().band_imm_s(u, 0x7fff_ffff);
                // normal: rebias, round to nearest even on the 13 dropped bits
                let odd = self.i().ushr_imm_u(a, 13);
                let odd = self.i().band_imm_s(odd, 1);
                let n = self.i().iadd_imm_s(a, ((15 - 127) << 23) + 0xfff);
                let n = self.i().iadd(n, odd);
                let normal = self.i().ushr_imm_u(n, 13);
                // subnormal: adding 0.5 aligns the bits; the FPU rounds to nearest even
                let af = self.i().bitcast(f32t, MemFlagsData::new(), a);
                let half = self.i().f32const(0.5);
                let s = self.i().fadd(af, half);
                let s = self.i().bitcast(i32t, MemFlagsData::new(), s);
                let sub = self.i().iadd_imm_s(s, -0x3f00_0000);
                let is_sub = self.i().icmp_imm_s(IntCC::UnsignedLessThan, a, 0x3880_0000);
                let overflow =
                    self.i()
                        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, a, 0x477f_f000);
                let is_nan = self
                    .i()
                    .icmp_imm_s(IntCC::UnsignedGreaterThan, a, 0x7f80_0000);
                let inf = self.i().iconst(i32t, 0x7c00);
                let nan = self.i().iconst(i32t, 0x7e00);
                let r = self.i().select(is_sub, sub, normal);
                let r = self.i().select(overflow, inf, r);
                let r = self.i().select(is_nan, nan, r);
                let r = self.i().bor(r, sign);
                Ok(self.i().ireduce(types::I16, r))
            }
            (f, t) => Err(format!(
                "cast {f:?} -> {t:?} must go through float32 (emulate pass)"
            )),
        }
    }

    pub(super) fn alu(&mut self, u: &UOp) -> Result<Value, String> {
        let op = u.op();
        let srcs: Vec<Value> = u
            .src()
            .iter()
            .map(|s| self.val(s))
            .collect::<Result<_, _>>()?;
        let in_dt = u.s(0).dtype();
        let float = in_dt.is_float();
        let unsigned = in_dt.is_unsigned() || in_dt.is_bool();
        let ty = clif_type(in_dt)?;
        let (a, b) = (srcs[0], srcs.get(1).copied().unwrap_or(srcs[0]));
        Ok(match op {
            Ops::Add if float => self.i().fadd(a, b),
            Ops::Add => self.i().iadd(a, b),
            Ops::Sub if float => self.i().fsub(a, b),
            Ops::Sub => self.i().isub(a, b),
            Ops::Mul if float => self.i().fmul(a, b),
            Ops::Mul => self.i().imul(a, b),
            Ops::Neg if float => self.i().fneg(a),
            Ops::Neg => self.i().ineg(a),
            Ops::FDiv => self.i().fdiv(a, b),
            Ops::Recip => {
                let one = if ty.lane_type() == types::F32 {
                    self.i().f32const(1.0)
                } else {
                    self.i().f64const(1.0)
                };
                let one = if ty.is_vector() {
                    self.i().splat(ty, one)
                } else {
                    one
                };
                self.i().fdiv(one, a)
            }
            Ops::Sqrt => self.i().sqrt(a),
            Ops::Trunc if float => self.i().trunc(a),
            Ops::Round if float => self.i().nearest(a),
            Ops::Trunc | Ops::Round => a,
            Ops::Max if float => self.i().fmax(a, b),
            Ops::Max if unsigned => self.i().umax(a, b),
            Ops::Max => self.i().smax(a, b),
            Ops::IDiv | Ops::Mod if float => return Err(format!("{op} on float")),
            Ops::IDiv | Ops::Mod => match const_divisor(u) {
                Some(c) => {
                    // a u64's bounds may not fit vmax's i64: assume the worst there
                    let xmax = if unsigned && ty.bits() == 64 {
                        u64::MAX
                    } else {
                        u.s(0).vmax().max(0) as u64
                    };
                    self.divmod_const(op, a, c, xmax, ty)
                }
                None => self.divmod(op, a, b, ty, unsigned),
            },
            Ops::CmpLt if float => self.i().fcmp(FloatCC::LessThan, a, b),
            Ops::CmpLt if unsigned => self.i().icmp(IntCC::UnsignedLessThan, a, b),
            Ops::CmpLt => self.i().icmp(IntCC::SignedLessThan, a, b),
            Ops::CmpNe if float => self.i().fcmp(FloatCC::NotEqual, a, b),
            Ops::CmpNe => self.i().icmp(IntCC::NotEqual, a, b),
            Ops::CmpEq if float => self.i().fcmp(FloatCC::Equal, a, b),
            Ops::CmpEq => self.i().icmp(IntCC::Equal, a, b),
            Ops::And => self.i().band(a, b),
            Ops::Or => self.i().bor(a, b),
            Ops::Xor => self.i().bxor(a, b),
            Ops::Shl | Ops::Shr => self.shift(u, a, b, unsigned),
            Ops::Where if u.dtype().count() > 1 => {
                // lane mask select: the mask as the values' type, then a bitwise select
                let vty = clif_type(u.dtype())?;
                let mask = if vty == types::I32X4 {
                    srcs[0]
                } else {
                    self.i().bitcast(vty, lane_flags(), srcs[0])
                };
                self.i().bitselect(mask, srcs[1], srcs[2])
            }
            // A float `select` is lowered to a branch around a move on x86 (mispredicted half
            // the time on data like `relu`'s); through the integer registers it is a `cmov`
            // (mnist second conv pack 305 -> 165 ms; see docs/performance.md).
            Ops::Where
                if matches!(self.b.func.dfg.value_type(srcs[1]), types::F32 | types::F64) =>
            {
                let fty = self.b.func.dfg.value_type(srcs[1]);
                let ity = if fty == types::F32 {
                    types::I32
                } else {
                    types::I64
                };
                let flags = MemFlagsData::new();
                let a = self.i().bitcast(ity, flags, srcs[1]);
                let b = self.i().bitcast(ity, flags, srcs[2]);
                let r = self.i().select(srcs[0], a, b);
                self.i().bitcast(fty, flags, r)
            }
            Ops::Where => self.i().select(srcs[0], srcs[1], srcs[2]),
            Ops::MulAcc if float => self.i().fma(srcs[0], srcs[1], srcs[2]),
            Ops::MulAcc => {
                let m = self.i().imul(srcs[0], srcs[1]);
                self.i().iadd(m, srcs[2])
            }
            op => {
                return Err(format!(
                    "{op} must be decomposed before Cranelift rendering"
                ));
            }
        })
    }

    /// `a << b` or `a >> b` with the IR's semantics for any amount: read as unsigned, amounts at
    /// or above the width give 0 (or -1 for `>>` of a negative signed value). Cranelift's shifts
    /// take the amount modulo the width, so a non-constant or too large amount is guarded.
    fn shift(&mut self, u: &UOp, a: Value, b: Value, unsigned: bool) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let lane = ty.lane_type();
        let bits = i64::from(ty.lane_bits());
        let shr = u.op() == Ops::Shr;
        // the amount is read in the shifted value's dtype (as `exec_alu` does): narrowed or
        // widened to its lane type
        let value_dt = u.s(0).dtype().scalar();
        let amount = u
            .s(1)
            .as_const()
            .map(|c| c.cast(value_dt).as_u64() & (u64::MAX >> (64 - bits)));
        let bty = self.b.func.dfg.value_type(b);
        let b = if bty.is_vector() {
            b
        } else if bty.bits() > lane.bits() {
            self.i().ireduce(lane, b)
        } else if bty.bits() < lane.bits() {
            self.i().uextend(lane, b)
        } else {
            b
        };
        if amount.is_some_and(|c| c < bits as u64) {
            return match (shr, unsigned) {
                (false, _) => self.i().ishl(a, b),
                (true, true) => self.i().ushr(a, b),
                (true, false) => self.i().sshr(a, b),
            };
        }
        if shr && !unsigned {
            // an arithmetic shift by min(amount, width - 1) fills with the sign
            let lim = self.i().iconst(lane, bits - 1);
            let amt = self.i().umin(b, lim);
            return self.i().sshr(a, amt);
        }
        let shifted = if shr {
            self.i().ushr(a, b)
        } else {
            self.i().ishl(a, b)
        };
        let in_range = self.i().icmp_imm_s(IntCC::UnsignedLessThan, b, bits);
        let zero = self.i().iconst(ty.lane_type(), 0);
        let zero = if ty.is_vector() {
            self.i().splat(ty, zero)
        } else {
            zero
        };
        self.i().select(in_range, shifted, zero)
    }

    /// `x // c` or `x % c` for a numerator known to be non-negative and a constant `c > 0` (see
    /// [`const_divisor`]): a shift or mask for powers of two, else a multiply by a "magic"
    /// reciprocal and a shift when that is exact for every `x <= xmax` (a hardware division
    /// costs 20-40 cycles, and index arithmetic divides in inner loops), else a plain division
    /// (no guards needed: `c` is neither 0 nor -1).
    fn divmod_const(&mut self, op: Ops, a: Value, c: u64, xmax: u64, ty: Type) -> Value {
        let bits = ty.bits();
        let is_div = op == Ops::IDiv;
        if c.is_power_of_two() {
            return if is_div {
                self.i().ushr_imm_u(a, c.trailing_zeros() as i64)
            } else {
                self.i().band_imm_s(a, (c - 1) as i64)
            };
        }
        let q = match magic_reciprocal(c, xmax, bits) {
            Some((m, s)) => {
                let m = self.i().iconst(ty, m as i64);
                let p = self.i().imul(a, m);
                self.i().ushr_imm_u(p, s as i64)
            }
            None => {
                let cv = self.i().iconst(ty, c as i64);
                if !is_div {
                    return self.i().urem(a, cv);
                }
                self.i().udiv(a, cv)
            }
        };
        if is_div {
            return q;
        }
        let qc = self.i().imul_imm_s(q, c as i64);
        self.i().isub(a, qc)
    }

    /// Total integer division/remainder: `x/0 = x%0 = 0`, `MIN/-1` wraps, never traps.
    fn divmod(&mut self, op: Ops, a: Value, b: Value, ty: Type, unsigned: bool) -> Value {
        let zero = self.i().iconst(ty, 0);
        let one = self.i().iconst(ty, 1);
        let is_zero = self.i().icmp_imm_s(IntCC::Equal, b, 0);
        if unsigned {
            let safe = self.i().select(is_zero, one, b);
            let r = if op == Ops::IDiv {
                self.i().udiv(a, safe)
            } else {
                self.i().urem(a, safe)
            };
            return self.i().select(is_zero, zero, r);
        }
        let is_m1 = self.i().icmp_imm_s(IntCC::Equal, b, -1);
        let bad = self.i().bor(is_zero, is_m1);
        let safe = self.i().select(bad, one, b);
        let r = if op == Ops::IDiv {
            self.i().sdiv(a, safe)
        } else {
            self.i().srem(a, safe)
        };
        let m1_res = if op == Ops::IDiv {
            self.i().ineg(a)
        } else {
            zero
        };
        let r = self.i().select(is_m1, m1_res, r);
        self.i().select(is_zero, zero, r)
    }
}

/// The divisor of a scalar integer `IDiv`/`Mod` node `u` when it is a positive constant and the
/// numerator is provably non-negative, so truncating division is plain unsigned division.
fn const_divisor(u: &UOp) -> Option<u64> {
    let dt = u.dtype();
    if dt.count() != 1 || !dt.is_int() || u.s(0).dtype() != dt {
        return None;
    }
    let c = u.s(1).as_int()?;
    (c > 0 && u.s(0).vmin() >= 0).then_some(c as u64)
}

/// A multiplier `m` and shift `s` with `x / c == (x * m) >> s` for every `0 <= x <= xmax`,
/// computed without overflowing `bits`-bit arithmetic; `None` when no such pair exists.
///
/// With `m = ceil(2^s / c)` and `e = m*c - 2^s` (`0 <= e < c`), `x*m / 2^s = x/c + x*e/(c*2^s)`;
/// the error term stays below `1/c` (so the floor is unchanged) when `x*e < 2^s`.
// pool backward 800 -> 203 ms (see docs/performance.md)
pub(crate) fn magic_reciprocal(c: u64, xmax: u64, bits: u32) -> Option<(u64, u32)> {
    if c < 2 || bits > 64 {
        return None;
    }
    let limit = 1u128 << bits;
    for s in 0..bits {
        let p = 1u128 << s;
        let m = p.div_ceil(c as u128);
        let e = m * c as u128 - p;
        if (xmax as u128) * e < p && (xmax as u128) * m < limit && m < limit {
            return Some((m as u64, s));
        }
    }
    None
}
