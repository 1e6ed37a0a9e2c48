//! Expressions: casts, bitcasts and ALU ops (float, integer, bool), integer literals.

use tinygrad_dtype::{ConstValue, DType, Scalar};
use tinygrad_uop::{Ops, UOp};

use super::helpers::helper_deps;
use super::{Ctx, Ty, is_half};

impl Ctx {
    /// Re-canonicalizes a narrow integer held in a 32-bit register.
    fn canon(&self, e: String, dt: DType) -> String {
        match dt.kind() {
            Scalar::Int8 => format!("(({e} << 24u) >> 24u)"),
            Scalar::Int16 => format!("(({e} << 16u) >> 16u)"),
            Scalar::UInt8 => format!("({e} & 0xffu)"),
            Scalar::UInt16 => format!("({e} & 0xffffu)"),
            _ => e,
        }
    }

    fn helper(&mut self, name: &'static str) -> &'static str {
        self.helpers.insert(name);
        for dep in helper_deps(name) {
            self.helpers.insert(dep);
        }
        name
    }

    /// `cast<to>(a: from)` (see the module docs for the semantics).
    pub(super) fn cast(&mut self, a: &str, from: DType, to: DType) -> Result<String, String> {
        let (ft, tt) = (self.ty(from)?, self.ty(to)?);
        if from == to {
            return Ok(a.to_string());
        }
        if to.is_bool() {
            if is_half(from) {
                let f = self.cast(a, from, DType::FLOAT32)?;
                return self.cast(&f, DType::FLOAT32, to);
            }
            let z = self.literal(ConstValue::Int(0), from)?;
            // `!(a == 0)`: naga's float `!=` is ordered (false for NaN, which is truthy).
            return Ok(format!("(!({a} == {z}))"));
        }
        if from.is_bool() {
            let one = self.literal(ConstValue::Int(1), to)?;
            let zero = self.literal(ConstValue::Int(0), to)?;
            return Ok(format!("select({zero}, {one}, {a})"));
        }
        if is_half(from) || is_half(to) {
            return Ok(match (from.kind(), to.kind()) {
                (Scalar::Float16, Scalar::Float32) => {
                    format!("{}({a})", self.helper("f16_to_f32"))
                }
                (Scalar::Float32, Scalar::Float16) => {
                    format!("{}({a})", self.helper("f32_to_f16"))
                }
                (Scalar::BFloat16, Scalar::Float32) => format!("bitcast<f32>({a} << 16u)"),
                (Scalar::Float32, Scalar::BFloat16) => {
                    format!("{}({a})", self.helper("f32_to_bf16"))
                }
                _ => {
                    let f = self.cast(a, from, DType::FLOAT32)?;
                    let f = format!("({f})");
                    self.cast(&f, DType::FLOAT32, to)?
                }
            });
        }
        Ok(match (from.is_float(), to.is_float()) {
            (true, true) => format!("{}({a})", tt.name()),
            (false, true) => format!("{}({a})", tt.name()),
            (true, false) => {
                let sfx = if ft == Ty::F64 { "f64" } else { "f32" };
                match tt {
                    Ty::I64 => {
                        let h = self.helper(if ft == Ty::F64 {
                            "ftoi64_f64"
                        } else {
                            "ftoi64_f32"
                        });
                        format!("{h}({a})")
                    }
                    Ty::U64 => {
                        let h = self.helper(if ft == Ty::F64 {
                            "ftou64_f64"
                        } else {
                            "ftou64_f32"
                        });
                        format!("{h}({a})")
                    }
                    _ => {
                        let h = self.helper(if sfx == "f64" {
                            "ftoi_lo_f64"
                        } else {
                            "ftoi_lo_f32"
                        });
                        let lo = format!("{h}({a}, {})", to.is_unsigned());
                        if tt == Ty::I32 {
                            self.canon(format!("bitcast<i32>({lo})"), to)
                        } else {
                            self.canon(lo, to)
                        }
                    }
                }
            }
            (false, false) => {
                let e = match (ft, tt) {
                    (x, y) if x == y => a.to_string(),
                    (Ty::I32, Ty::U32) => format!("bitcast<u32>({a})"),
                    (Ty::U32, Ty::I32) => format!("bitcast<i32>({a})"),
                    (Ty::I64, Ty::I32) => format!("i32({a})"),
                    (Ty::U64, Ty::U32) => format!("u32({a})"),
                    (Ty::I64, Ty::U32) => format!("bitcast<u32>(i32({a}))"),
                    (Ty::U64, Ty::I32) => format!("bitcast<i32>(u32({a}))"),
                    (Ty::I32, Ty::I64) => format!("i64({a})"),
                    (Ty::U32, Ty::U64) => format!("u64({a})"),
                    (Ty::I32, Ty::U64) => format!("bitcast<u64>(i64({a}))"),
                    (Ty::U32, Ty::I64) => format!("bitcast<i64>(u64({a}))"),
                    (Ty::I64, Ty::U64) => format!("bitcast<u64>({a})"),
                    (Ty::U64, Ty::I64) => format!("bitcast<i64>({a})"),
                    (x, y) => return Err(format!("cast {} -> {}", x.name(), y.name())),
                };
                if matches!(tt, Ty::I32 | Ty::U32) {
                    self.canon(e, to)
                } else {
                    e
                }
            }
        })
    }

    pub(super) fn bitcast(&mut self, u: &UOp) -> Result<String, String> {
        let (from, to) = (u.s(0).dtype(), u.dtype());
        if from.itemsize() != to.itemsize() || from.is_bool() || to.is_bool() {
            return Err(format!("bitcast {from} -> {to}"));
        }
        let a = self.e(u.s(0))?;
        let (ft, tt) = (self.ty(from)?, self.ty(to)?);
        if ft == tt {
            // Same register type: only the canonical form may change (e.g. int16 <-> float16).
            return Ok(match (ft, from.itemsize()) {
                (Ty::I32, 2) | (Ty::I32, 1) | (Ty::U32, 2) | (Ty::U32, 1) => self.canon(a, to),
                _ => a,
            });
        }
        let e = format!("bitcast<{}>({a})", tt.name());
        Ok(match (ft, from.itemsize()) {
            // A sign-extended narrow value: keep its low bits only.
            (Ty::I32, 1) => self.canon(format!("(bitcast<u32>({a}) & 0xffu)"), to),
            (Ty::I32, 2) => {
                let low = format!("(bitcast<u32>({a}) & 0xffffu)");
                if tt == Ty::I32 {
                    self.canon(format!("bitcast<i32>({low})"), to)
                } else {
                    low
                }
            }
            (Ty::U32, 1 | 2) if tt == Ty::I32 => self.canon(e, to),
            _ => e,
        })
    }

    pub(super) fn alu(&mut self, u: &UOp) -> Result<String, String> {
        let op = u.op();
        let dt = if op.is_comparison() {
            u.s(0).dtype()
        } else {
            u.dtype()
        };
        let mut s: Vec<String> = Vec::with_capacity(u.src().len());
        for x in u.src() {
            s.push(self.e(x)?);
        }
        if op == Ops::Where {
            return Ok(format!("select({}, {}, {})", s[2], s[1], s[0]));
        }
        let ty = self.ty(dt)?;
        if ty == Ty::Bool {
            return bool_alu(op, &s);
        }
        if dt.is_float() {
            if is_half(dt) {
                return Err(format!(
                    "{op} on {dt} must be computed in float32 (emulate pass)"
                ));
            }
            return self.float_alu(op, ty, &s);
        }
        self.int_alu(u, dt, ty, &s)
    }

    fn float_alu(&mut self, op: Ops, ty: Ty, s: &[String]) -> Result<String, String> {
        let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
        let t = ty.name();
        let one = format!("1.0{}", ty.float_suffix());
        let bits = ty.bits().name();
        Ok(match op {
            Ops::Add => format!("({a} + {b})"),
            Ops::Sub => format!("({a} - {b})"),
            Ops::Mul => format!("({a} * {b})"),
            Ops::FDiv => format!("({a} / {b})"),
            Ops::IDiv => format!("trunc({a} / {b})"),
            Ops::Neg => format!("(-{a})"),
            Ops::Recip => format!("({one} / {a})"),
            Ops::Sqrt => format!("sqrt({a})"),
            Ops::Trunc => format!("trunc({a})"),
            // WGSL's round() rounds half to even
            Ops::Round => format!("round({a})"),
            Ops::Max => {
                let nan = self.helper(if ty == Ty::F64 {
                    "isnan_f64"
                } else {
                    "isnan_f32"
                });
                format!("select(max({a}, {b}), {a} + {b}, {nan}({a}) | {nan}({b}))")
            }
            Ops::MulAcc => format!("fma({a}, {b}, {})", s[2]),
            Ops::CmpLt => format!("({a} < {b})"),
            // Not `!=`: naga emits an ordered not-equal, false for NaN.
            Ops::CmpNe => format!("(!({a} == {b}))"),
            Ops::CmpEq => format!("({a} == {b})"),
            Ops::And | Ops::Or | Ops::Xor => {
                let o = match op {
                    Ops::And => "&",
                    Ops::Or => "|",
                    _ => "^",
                };
                format!("bitcast<{t}>(bitcast<{bits}>({a}) {o} bitcast<{bits}>({b}))")
            }
            op => {
                return Err(format!(
                    "{op} on {t} must be decomposed before WGSL rendering"
                ));
            }
        })
    }

    fn int_alu(&mut self, u: &UOp, dt: DType, ty: Ty, s: &[String]) -> Result<String, String> {
        let op = u.op();
        let (a, b) = (s[0].clone(), s.get(1).unwrap_or(&s[0]).clone());
        let zero = self.literal(ConstValue::Int(0), dt)?;
        let one = self.literal(ConstValue::Int(1), dt)?;
        let signed = !dt.is_unsigned();
        let width: u32 = if ty.is_64() { 64 } else { 32 };
        let e = match op {
            Ops::Add => format!("({a} + {b})"),
            Ops::Sub => format!("({a} - {b})"),
            Ops::Mul => format!("({a} * {b})"),
            Ops::MulAcc => format!("({a} * {b} + {})", s[2]),
            Ops::Neg if signed => format!("(-{a})"),
            Ops::Neg => format!("({zero} - {a})"),
            Ops::Max => format!("max({a}, {b})"),
            Ops::And => format!("({a} & {b})"),
            Ops::Or => format!("({a} | {b})"),
            Ops::Xor => format!("({a} ^ {b})"),
            Ops::Trunc | Ops::Round => a.clone(),
            Ops::CmpLt => return Ok(format!("({a} < {b})")),
            Ops::CmpNe => return Ok(format!("({a} != {b})")),
            Ops::CmpEq => return Ok(format!("({a} == {b})")),
            Ops::IDiv | Ops::FDiv | Ops::Mod => {
                // x / 0 = x % 0 = 0; WGSL already wraps MIN / -1 and gives MIN % -1 = 0.
                let o = if op == Ops::Mod { "%" } else { "/" };
                let safe = format!("select({b}, {one}, {b} == {zero})");
                format!("select({a} {o} {safe}, {zero}, {b} == {zero})")
            }
            Ops::Recip => {
                if signed {
                    let m1 = self.literal(ConstValue::Int(-1), dt)?;
                    format!("select({zero}, {a}, ({a} == {one}) | ({a} == {m1}))")
                } else {
                    format!("select({zero}, {one}, {a} == {one})")
                }
            }
            Ops::Shl | Ops::Shr => {
                // The amount as the value's dtype, read as unsigned (exec_alu's reading).
                let amt_dt = u.s(1).dtype();
                let amt = if amt_dt == dt {
                    b.clone()
                } else {
                    self.cast(&b, amt_dt, dt)?
                };
                let (amt, lim) = match ty {
                    Ty::I32 => (format!("bitcast<u32>({amt})"), format!("{width}u")),
                    Ty::U32 => (amt, format!("{width}u")),
                    Ty::I64 => (format!("bitcast<u64>({amt})"), format!("{width}lu")),
                    _ => (amt, format!("{width}lu")),
                };
                let am = self.fresh("sh");
                self.line(&format!("let {am}: {} = {amt};", ty.bits().name()));
                let small = format!(
                    "u32(min({am}, {lim} - {}))",
                    if ty.is_64() { "1lu" } else { "1u" }
                );
                if op == Ops::Shl {
                    format!("select({zero}, {a} << {small}, {am} < {lim})")
                } else if signed {
                    format!("({a} >> {small})")
                } else {
                    format!("select({zero}, {a} >> {small}, {am} < {lim})")
                }
            }
            op => {
                return Err(format!(
                    "{op} on {dt} is not supported by the WGSL renderer"
                ));
            }
        };
        Ok(if matches!(ty, Ty::I32 | Ty::U32) {
            self.canon(e, dt)
        } else {
            e
        })
    }
}

fn bool_alu(op: Ops, s: &[String]) -> Result<String, String> {
    let (a, b) = (&s[0], s.get(1).unwrap_or(&s[0]));
    Ok(match op {
        Ops::Add | Ops::Or | Ops::Max => format!("({a} | {b})"),
        Ops::Mul | Ops::And | Ops::IDiv | Ops::FDiv => format!("({a} & {b})"),
        Ops::Sub | Ops::Xor | Ops::CmpNe => format!("({a} != {b})"),
        Ops::CmpEq => format!("({a} == {b})"),
        Ops::CmpLt => format!("(!{a} & {b})"),
        Ops::Neg => format!("(!{a})"),
        Ops::Mod => "false".into(),
        Ops::Trunc | Ops::Round => a.clone(),
        Ops::MulAcc => format!("(({a} & {b}) | {})", s[2]),
        op => return Err(format!("{op} on bool is not supported")),
    })
}

/// An integer literal; `min` (the type's most negative value, which WGSL can't write as a
/// negated literal) becomes a bit pattern.
pub(super) fn int_lit(x: i64, suffix: &str, min: i64) -> String {
    if x == min {
        if suffix == "li" {
            "bitcast<i64>(0x8000000000000000lu)".into()
        } else {
            "bitcast<i32>(0x80000000u)".into()
        }
    } else if x < 0 {
        format!("({x}{suffix})")
    } else {
        format!("{x}{suffix}")
    }
}

pub(super) fn paren_neg(s: String) -> String {
    if s.starts_with('-') {
        format!("({s})")
    } else {
        s
    }
}
