//! Casts, bitcasts and ALU ops (float, integer with guarded division and modulo, bool).

use tinygrad_dtype::{ConstValue, DType, Scalar};
use tinygrad_uop::{Ops, UOp};

use super::Ctx;
use super::regs::{Class, arith, bits, class_of, is_half, lit_f, literal};

impl Ctx {
    /// Re-canonicalizes a narrow integer held in a 32-bit register.
    fn canon(&mut self, r: &str, dt: DType) {
        match dt.kind() {
            Scalar::Int8 => self.line(&format!("cvt.s32.s8 {r}, {r};")),
            Scalar::Int16 => self.line(&format!("cvt.s32.s16 {r}, {r};")),
            Scalar::UInt8 => self.line(&format!("and.b32 {r}, {r}, 255;")),
            Scalar::UInt16 => self.line(&format!("and.b32 {r}, {r}, 65535;")),
            _ => {}
        }
    }

    /// `d = cast<to>(a: from)` (see the module docs for the semantics).
    pub(super) fn cast(&mut self, d: &str, a: &str, from: DType, to: DType) -> Result<(), String> {
        let (fc, tc) = (class_of(from)?, class_of(to)?);
        if from == to {
            self.line(&format!("mov.{} {d}, {a};", tc.mov()));
            return Ok(());
        }
        if to.is_bool() {
            if is_half(from) {
                let f = self.new_reg(Class::F32);
                self.cast(&f, a, from, DType::FLOAT32)?;
                return self.cast(d, &f, DType::FLOAT32, to);
            }
            if from.is_float() {
                let t = arith(from)?;
                let z = lit_f(from, 0.0);
                self.line(&format!("setp.neu.{t} {d}, {a}, {z};"));
            } else {
                self.line(&format!("setp.ne.{} {d}, {a}, 0;", bits(fc)));
            }
            return Ok(());
        }
        if from.is_bool() {
            let (one, zero) = (
                literal(ConstValue::Int(1), to)?,
                literal(ConstValue::Int(0), to)?,
            );
            self.line(&format!("selp.{} {d}, {one}, {zero}, {a};", tc.mov()));
            return Ok(());
        }
        // Halves convert to and from float32 only; anything else goes through float32.
        if is_half(from) || is_half(to) {
            return match (from.kind(), to.kind()) {
                (Scalar::Float16, Scalar::Float32) => {
                    self.line(&format!("cvt.f32.f16 {d}, {a};"));
                    Ok(())
                }
                (Scalar::Float32, Scalar::Float16) => {
                    self.line(&format!("cvt.rn.f16.f32 {d}, {a};"));
                    Ok(())
                }
                (Scalar::Float32, Scalar::BFloat16) => {
                    self.line(&format!("cvt.rn.bf16.f32 {d}, {a};"));
                    Ok(())
                }
                (Scalar::BFloat16, Scalar::Float32) => {
                    let t = self.new_reg(Class::B32);
                    self.line(&format!("cvt.u32.u16 {t}, {a};"));
                    self.line(&format!("shl.b32 {t}, {t}, 16;"));
                    self.line(&format!("mov.b32 {d}, {t};"));
                    Ok(())
                }
                _ => {
                    let f = self.new_reg(Class::F32);
                    self.cast(&f, a, from, DType::FLOAT32)?;
                    self.cast(d, &f, DType::FLOAT32, to)
                }
            };
        }
        let (fa, ta) = (arith(from)?, arith(to)?);
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                let rnd = if fc == Class::F64 { ".rn" } else { "" };
                self.line(&format!("cvt{rnd}.{ta}.{fa} {d}, {a};"));
            }
            (false, true) => self.line(&format!("cvt.rn.{ta}.{fa} {d}, {a};")),
            (true, false) => {
                // Truncate, saturating to int64 (uint64 for values >= 2^63 cast to an unsigned
                // type), then wrap to the target width.
                let wide = if tc == Class::B64 {
                    d.to_string()
                } else {
                    self.new_reg(Class::B64)
                };
                if to.is_unsigned() {
                    let (s, u) = (self.new_reg(Class::B64), self.new_reg(Class::B64));
                    let p = self.new_reg(Class::Pred);
                    self.line(&format!("cvt.rzi.s64.{fa} {s}, {a};"));
                    self.line(&format!("cvt.rzi.u64.{fa} {u}, {a};"));
                    let lim = lit_f(from, 9_223_372_036_854_775_808.0);
                    self.line(&format!("setp.ge.{fa} {p}, {a}, {lim};"));
                    self.line(&format!("selp.b64 {wide}, {u}, {s}, {p};"));
                } else {
                    self.line(&format!("cvt.rzi.s64.{fa} {wide}, {a};"));
                }
                if tc != Class::B64 {
                    self.line(&format!("cvt.u32.u64 {d}, {wide};"));
                    self.canon(d, to);
                }
            }
            (false, false) => match (fc, tc) {
                (Class::B64, Class::B64) => self.line(&format!("mov.b64 {d}, {a};")),
                (Class::B64, _) => {
                    self.line(&format!("cvt.u32.u64 {d}, {a};"));
                    self.canon(d, to);
                }
                (_, Class::B64) => {
                    let ext = if from.is_unsigned() { "u" } else { "s" };
                    self.line(&format!("cvt.{ext}64.{ext}32 {d}, {a};"));
                }
                _ => {
                    self.line(&format!("mov.b32 {d}, {a};"));
                    self.canon(d, to);
                }
            },
        }
        Ok(())
    }

    pub(super) fn bitcast(&mut self, u: &UOp) -> Result<(), String> {
        let (from, to) = (u.s(0).dtype(), u.dtype());
        if from.itemsize() != to.itemsize() || from.is_bool() || to.is_bool() {
            return Err(format!("bitcast {from} -> {to}"));
        }
        let a = self.r(u.s(0))?;
        let d = self.def(u)?;
        let (fc, tc) = (class_of(from)?, class_of(to)?);
        match (fc, tc) {
            (Class::B32, Class::B16) => self.line(&format!("cvt.u16.u32 {d}, {a};")),
            (Class::B16, Class::B32) => {
                let ext = if to.is_unsigned() { "u" } else { "s" };
                self.line(&format!("cvt.{ext}32.{ext}16 {d}, {a};"));
            }
            _ => {
                self.line(&format!("mov.{} {d}, {a};", tc.mov()));
                if tc == Class::B32 {
                    self.canon(&d, to);
                }
            }
        }
        Ok(())
    }

    pub(super) fn alu(&mut self, u: &UOp) -> Result<(), String> {
        let op = u.op();
        let dt = if op.is_comparison() {
            u.s(0).dtype()
        } else {
            u.dtype()
        };
        let mut s: Vec<String> = Vec::with_capacity(u.src().len());
        for x in u.src() {
            s.push(self.r(x)?);
        }
        if op == Ops::Where {
            let d = self.def(u)?;
            let (c, t, f) = (&s[0], &s[1], &s[2]);
            if dt.is_bool() {
                self.line(&format!("@{c} mov.pred {d}, {t};"));
                self.line(&format!("@!{c} mov.pred {d}, {f};"));
            } else {
                let mov = class_of(dt)?.mov();
                self.line(&format!("selp.{mov} {d}, {t}, {f}, {c};"));
            }
            return Ok(());
        }
        if dt.is_bool() {
            return self.bool_alu(u, &s);
        }
        if dt.is_float() {
            return self.float_alu(u, dt, &s);
        }
        self.int_alu(u, dt, &s)
    }

    fn bool_alu(&mut self, u: &UOp, s: &[String]) -> Result<(), String> {
        let d = self.def(u)?;
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        match u.op() {
            Ops::Add | Ops::Or | Ops::Max => self.line(&format!("or.pred {d}, {a}, {b};")),
            Ops::Mul | Ops::And | Ops::IDiv | Ops::FDiv => {
                self.line(&format!("and.pred {d}, {a}, {b};"));
            }
            Ops::Sub | Ops::Xor | Ops::CmpNe => self.line(&format!("xor.pred {d}, {a}, {b};")),
            Ops::CmpEq => {
                self.line(&format!("xor.pred {d}, {a}, {b};"));
                self.line(&format!("not.pred {d}, {d};"));
            }
            Ops::CmpLt => {
                self.line(&format!("not.pred {d}, {a};"));
                self.line(&format!("and.pred {d}, {d}, {b};"));
            }
            Ops::Neg => self.line(&format!("not.pred {d}, {a};")),
            Ops::Mod => self.line(&format!("mov.pred {d}, 0;")),
            Ops::Trunc | Ops::Round => self.line(&format!("mov.pred {d}, {a};")),
            Ops::MulAcc => {
                self.line(&format!("and.pred {d}, {a}, {b};"));
                self.line(&format!("or.pred {d}, {d}, {};", s[2]));
            }
            op => return Err(format!("{op} on bool is not supported")),
        }
        Ok(())
    }

    fn float_alu(&mut self, u: &UOp, dt: DType, s: &[String]) -> Result<(), String> {
        let op = u.op();
        if is_half(dt) {
            return Err(format!(
                "{op} on {dt} must be computed in float32 (emulate pass)"
            ));
        }
        let t = arith(dt)?;
        let bt = bits(class_of(dt)?);
        let d = self.def(u)?;
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        match op {
            Ops::Add => self.line(&format!("add.rn.{t} {d}, {a}, {b};")),
            Ops::Sub => self.line(&format!("sub.rn.{t} {d}, {a}, {b};")),
            Ops::Mul => self.line(&format!("mul.rn.{t} {d}, {a}, {b};")),
            Ops::FDiv => self.line(&format!("div.rn.{t} {d}, {a}, {b};")),
            Ops::IDiv => {
                self.line(&format!("div.rn.{t} {d}, {a}, {b};"));
                self.line(&format!("cvt.rzi.{t}.{t} {d}, {d};"));
            }
            Ops::Neg => self.line(&format!("neg.{t} {d}, {a};")),
            Ops::Recip => self.line(&format!("rcp.rn.{t} {d}, {a};")),
            Ops::Sqrt => self.line(&format!("sqrt.rn.{t} {d}, {a};")),
            Ops::Trunc => self.line(&format!("cvt.rzi.{t}.{t} {d}, {a};")),
            Ops::Round => self.line(&format!("cvt.rni.{t}.{t} {d}, {a};")),
            Ops::Max => {
                // NaN propagates (PTX `max` would return the other operand).
                let p = self.new_reg(Class::Pred);
                self.line(&format!("setp.nan.{t} {p}, {a}, {b};"));
                self.line(&format!("max.{t} {d}, {a}, {b};"));
                self.line(&format!("@{p} add.rn.{t} {d}, {a}, {b};"));
            }
            Ops::MulAcc => self.line(&format!("fma.rn.{t} {d}, {a}, {b}, {};", s[2])),
            Ops::CmpLt => self.line(&format!("setp.lt.{t} {d}, {a}, {b};")),
            Ops::CmpNe => self.line(&format!("setp.neu.{t} {d}, {a}, {b};")),
            Ops::CmpEq => self.line(&format!("setp.eq.{t} {d}, {a}, {b};")),
            Ops::And => self.line(&format!("and.{bt} {d}, {a}, {b};")),
            Ops::Or => self.line(&format!("or.{bt} {d}, {a}, {b};")),
            Ops::Xor => self.line(&format!("xor.{bt} {d}, {a}, {b};")),
            op => {
                return Err(format!(
                    "{op} on {dt} must be decomposed before PTX rendering"
                ));
            }
        }
        Ok(())
    }

    fn int_alu(&mut self, u: &UOp, dt: DType, s: &[String]) -> Result<(), String> {
        let op = u.op();
        let t = arith(dt)?;
        let c = class_of(dt)?;
        let bt = bits(c);
        let w = if c == Class::B64 { "64" } else { "32" };
        let (a, b) = (s[0].clone(), s.get(1).unwrap_or(&s[0]).clone());
        if matches!(op, Ops::IDiv | Ops::FDiv | Ops::Mod) {
            let d = self.def(u)?;
            return self.divmod(op, &d, &a, &b, u.s(1), dt);
        }
        if matches!(op, Ops::Shl | Ops::Shr) {
            // The amount as the value's dtype (exec_alu's reading), then as u32 clamped: PTX
            // clamps amounts above the width, which gives exactly exec_alu's results.
            let amt_dt = u.s(1).dtype();
            let mut amt = b.clone();
            if amt_dt != dt {
                let r = self.new_reg(c);
                self.cast(&r, &b, amt_dt, dt)?;
                amt = r;
            }
            if c == Class::B64 {
                let m = self.new_reg(Class::B64);
                let r = self.new_reg(Class::B32);
                self.line(&format!("min.u64 {m}, {amt}, 64;"));
                self.line(&format!("cvt.u32.u64 {r}, {m};"));
                amt = r;
            }
            let d = self.def(u)?;
            if op == Ops::Shl {
                self.line(&format!("shl.{bt} {d}, {a}, {amt};"));
            } else {
                self.line(&format!("shr.{t} {d}, {a}, {amt};"));
            }
            self.canon(&d, dt);
            return Ok(());
        }
        let d = self.def(u)?;
        match op {
            Ops::Add => self.line(&format!("add.{t} {d}, {a}, {b};")),
            Ops::Sub => self.line(&format!("sub.{t} {d}, {a}, {b};")),
            Ops::Mul => self.line(&format!("mul.lo.{t} {d}, {a}, {b};")),
            Ops::Neg => self.line(&format!("neg.s{w} {d}, {a};")),
            Ops::MulAcc => self.line(&format!("mad.lo.{t} {d}, {a}, {b}, {};", s[2])),
            Ops::Max => self.line(&format!("max.{t} {d}, {a}, {b};")),
            Ops::And => self.line(&format!("and.{bt} {d}, {a}, {b};")),
            Ops::Or => self.line(&format!("or.{bt} {d}, {a}, {b};")),
            Ops::Xor => self.line(&format!("xor.{bt} {d}, {a}, {b};")),
            Ops::Trunc | Ops::Round => self.line(&format!("mov.{bt} {d}, {a};")),
            Ops::CmpLt => self.line(&format!("setp.lt.{t} {d}, {a}, {b};")),
            Ops::CmpNe => self.line(&format!("setp.ne.{t} {d}, {a}, {b};")),
            Ops::CmpEq => self.line(&format!("setp.eq.{t} {d}, {a}, {b};")),
            Ops::Recip => {
                // 1 // x: x for x in {-1, 0, 1} (0 // 0 is 0), else 0.
                let p = self.new_reg(Class::Pred);
                if dt.is_unsigned() {
                    self.line(&format!("setp.le.u{w} {p}, {a}, 1;"));
                } else {
                    self.line(&format!("add.s{w} {d}, {a}, 1;"));
                    self.line(&format!("setp.le.u{w} {p}, {d}, 2;"));
                }
                self.line(&format!("selp.{bt} {d}, {a}, 0, {p};"));
            }
            op => {
                return Err(format!("{op} on {dt} is not supported by the PTX renderer"));
            }
        }
        if !op.is_comparison() {
            self.canon(&d, dt);
        }
        Ok(())
    }

    /// Total integer division/remainder: `x/0 = x%0 = 0`, `MIN/-1` wraps (`-x`), never UB.
    fn divmod(
        &mut self,
        op: Ops,
        d: &str,
        a: &str,
        b: &str,
        bu: &UOp,
        dt: DType,
    ) -> Result<(), String> {
        let t = arith(dt)?;
        let c = class_of(dt)?;
        let bt = bits(c);
        let w = if c == Class::B64 { "64" } else { "32" };
        let instr = if op == Ops::Mod { "rem" } else { "div" };
        let signed = !dt.is_unsigned();
        if let Some(k) = bu.as_const() {
            let k = k.cast(dt);
            if k.is_zero() {
                self.line(&format!("mov.{bt} {d}, 0;"));
            } else if signed && k.as_i64() == -1 {
                if op == Ops::Mod {
                    self.line(&format!("mov.{bt} {d}, 0;"));
                } else {
                    self.line(&format!("neg.s{w} {d}, {a};"));
                    self.canon(d, dt);
                }
            } else {
                self.line(&format!("{instr}.{t} {d}, {a}, {b};"));
            }
            return Ok(());
        }
        let pz = self.new_reg(Class::Pred);
        let safe = self.new_reg(c);
        self.line(&format!("setp.eq.{t} {pz}, {b}, 0;"));
        if signed {
            let pm = self.new_reg(Class::Pred);
            let bad = self.new_reg(Class::Pred);
            self.line(&format!("setp.eq.{t} {pm}, {b}, -1;"));
            self.line(&format!("or.pred {bad}, {pz}, {pm};"));
            self.line(&format!("selp.{bt} {safe}, 1, {b}, {bad};"));
            self.line(&format!("{instr}.{t} {d}, {a}, {safe};"));
            if op == Ops::Mod {
                self.line(&format!("@{pm} mov.{bt} {d}, 0;"));
            } else {
                self.line(&format!("@{pm} neg.s{w} {d}, {a};"));
            }
        } else {
            self.line(&format!("selp.{bt} {safe}, 1, {b}, {pz};"));
            self.line(&format!("{instr}.{t} {d}, {a}, {safe};"));
        }
        self.line(&format!("@{pz} mov.{bt} {d}, 0;"));
        self.canon(d, dt);
        Ok(())
    }
}
