//! Statements: each linearized op as WGSL (values, literals, loops plain, grouped and
//! grid-mapped, indexing, loads and stores).

use tinygrad_dtype::{ConstValue, DType, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::grid::group_fold;

use super::alu::{int_lit, paren_neg};
use super::{Access, Ctx, Loop, Ty, WORKGROUP_SIZE, is_half, per_word};

impl Ctx {
    pub(super) fn fresh(&mut self, prefix: &str) -> String {
        let n = self.next;
        self.next += 1;
        format!("{prefix}{n}")
    }

    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.body.push_str("  ");
        }
        self.body.push_str(s);
        self.body.push('\n');
    }

    pub(super) fn ty(&self, dt: DType) -> Result<Ty, String> {
        if dt.count() != 1 {
            return Err(format!(
                "vector dtype {dt} is not supported by the WGSL renderer"
            ));
        }
        if let Some(why) = self.r.refuses(dt) {
            return Err(why);
        }
        Ok(match dt.kind() {
            Scalar::Bool => Ty::Bool,
            Scalar::Int8 | Scalar::Int16 | Scalar::Int32 | Scalar::Index => Ty::I32,
            Scalar::UInt8
            | Scalar::UInt16
            | Scalar::UInt32
            | Scalar::Float16
            | Scalar::BFloat16 => Ty::U32,
            Scalar::Int64 => Ty::I64,
            Scalar::UInt64 => Ty::U64,
            Scalar::Float32 => Ty::F32,
            Scalar::Float64 => Ty::F64,
            other => {
                return Err(format!(
                    "dtype {other:?} is not supported by the WGSL renderer"
                ));
            }
        })
    }

    /// The array element type of buffer `slot`.
    pub(super) fn storage_elem(&self, slot: usize, dt: DType) -> Result<String, String> {
        if dt.kind() == Scalar::Void {
            return Ok("u32".into());
        }
        if per_word(dt) > 1 {
            return Ok(if self.atomic.contains(&slot) {
                "atomic<u32>".into()
            } else {
                "u32".into()
            });
        }
        Ok(self.ty(dt)?.name().into())
    }

    /// The expression of `u`'s value.
    pub(super) fn e(&self, u: &UOp) -> Result<String, String> {
        if u.op() == Ops::Const {
            let v = u.as_const().ok_or("Const without a value")?;
            return self.literal(v, u.dtype());
        }
        self.names
            .get(u)
            .cloned()
            .ok_or_else(|| format!("{} used before it is defined", u.op()))
    }

    /// Binds `expr` to a new `let` for `u`.
    fn def(&mut self, u: &UOp, expr: &str) -> Result<(), String> {
        let ty = self.ty(u.dtype())?;
        let name = self.fresh("v");
        self.line(&format!("let {name}: {} = {expr};", ty.name()));
        self.names.insert(u.clone(), name);
        Ok(())
    }

    /// The WGSL literal of constant `c` as a `dt` register value.
    pub(super) fn literal(&self, c: ConstValue, dt: DType) -> Result<String, String> {
        let v = c.cast(dt);
        Ok(match self.ty(dt)? {
            Ty::Bool => v.as_bool().to_string(),
            Ty::I32 => {
                let x = v.as_i64();
                let x = i32::try_from(x)
                    .map_err(|_| format!("{dt} constant {x} does not fit in 32 bits"))?;
                int_lit(i64::from(x), "i", i64::from(i32::MIN))
            }
            Ty::U32 if is_half(dt) => {
                let b = v.to_le_bytes(dt);
                format!("0x{:04x}u", u16::from_le_bytes([b[0], b[1]]))
            }
            Ty::U32 => format!("{}u", v.as_u64() as u32),
            Ty::I64 => int_lit(v.as_i64(), "li", i64::MIN),
            Ty::U64 => format!("{}lu", v.as_u64()),
            Ty::F32 => {
                let x = v.as_f64() as f32;
                if x.is_normal() || (x == 0.0 && x.is_sign_positive()) {
                    paren_neg(format!("{x:?}f"))
                } else {
                    format!("bitcast<f32>(0x{:08x}u)", x.to_bits())
                }
            }
            Ty::F64 => {
                let x = v.as_f64();
                if x.is_normal() || (x == 0.0 && x.is_sign_positive()) {
                    paren_neg(format!("{x:?}lf"))
                } else {
                    format!("bitcast<f64>(0x{:016x}lu)", x.to_bits())
                }
            }
        })
    }

    pub(super) fn emit(&mut self, i: usize, u: &UOp) -> Result<(), String> {
        match u.op() {
            Ops::Const | Ops::DefineGlobal | Ops::Sink | Ops::Noop => Ok(()),
            Ops::DefineVar => {
                let Arg::Var(name, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                let k = crate::program::var_index(&self.vars, name)?;
                let expr = self.cast(&format!("vars[{k}]"), DType::INT32, u.dtype())?;
                self.def(u, &expr)
            }
            Ops::DefineReg => {
                let ty = self.ty(u.dtype().base())?;
                let name = self.fresh("acc");
                self.line(&format!("var {name}: {};", ty.name()));
                self.accs.insert(u.clone(), name);
                Ok(())
            }
            Ops::Range if self.grid_at.contains(&i) => self.open_grid(i, u),
            Ops::Range if self.group.as_ref().is_some_and(|g| g.range == i) => self.open_grouped(u),
            Ops::Range => self.open_loop(u),
            Ops::End => self.close_loop(),
            Ops::Index => self.index(u),
            Ops::Load => self.load(u),
            Ops::Store => self.store(u),
            Ops::Cast => {
                let a = self.e(u.s(0))?;
                let expr = self.cast(&a, u.s(0).dtype(), u.dtype())?;
                self.def(u, &expr)
            }
            Ops::Bitcast => {
                let expr = self.bitcast(u)?;
                self.def(u, &expr)
            }
            op if op.is_alu() => {
                let expr = self.alu(u)?;
                self.def(u, &expr)
            }
            op => Err(format!("{op} is not supported by the WGSL renderer yet")),
        }
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        if self.ty(r.dtype())? != Ty::I32 {
            return Err(format!("a loop over {} is not supported", r.dtype()));
        }
        let size = self.e(r.s(0))?;
        let name = self.fresh("r");
        self.line(&format!(
            "for (var {name}: i32 = 0i; {name} < {size}; {name} = {name} + 1i) {{"
        ));
        self.depth += 1;
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Plain);
        Ok(())
    }

    /// The grouped reduction loop: invocation `lid.x` of the workgroup runs every
    /// [`WORKGROUP_SIZE`]th iteration from its own.
    fn open_grouped(&mut self, r: &UOp) -> Result<(), String> {
        if self.ty(r.dtype())? != Ty::I32 {
            return Err(format!("a loop over {} is not supported", r.dtype()));
        }
        let size = self.e(r.s(0))?;
        let name = self.fresh("r");
        self.line(&format!(
            "for (var {name}: i32 = i32(lid.x); {name} < {size}; {name} = {name} + {WORKGROUP_SIZE}i) {{"
        ));
        self.depth += 1;
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Grouped);
        Ok(())
    }

    /// After the grouped loop: each accumulator's partials go through a workgroup array, and
    /// every invocation folds them in the same order (the barrier after it keeps the next
    /// output's partials from overwriting them early).
    fn combine_group(&mut self) -> Result<(), String> {
        let accs = self
            .group
            .as_ref()
            .map(|g| g.accs.clone())
            .unwrap_or_default();
        let mut arrays = Vec::new();
        for (k, (reg, _)) in accs.iter().enumerate() {
            let ty = self.ty(reg.dtype().base())?;
            if !matches!(ty, Ty::F32 | Ty::I32 | Ty::U32) {
                return Err(format!("a grouped {} accumulator", ty.name()));
            }
            let acc = self.accs.get(reg).cloned().ok_or("unknown accumulator")?;
            let sh = format!("part{k}");
            self.line(&format!("{sh}[lid.x] = {acc};"));
            self.shared.push((sh.clone(), ty));
            arrays.push(sh);
        }
        self.line("workgroupBarrier();");
        for (k, ((reg, op), sh)) in accs.iter().zip(&arrays).enumerate() {
            let acc = self.accs[reg].clone();
            let dt = reg.dtype().base();
            let (a, b, folded) = group_fold(*op, dt, k);
            self.names.insert(a, acc.clone());
            self.names.insert(b, format!("{sh}[i]"));
            let expr = self.alu(&folded)?;
            self.line(&format!("{acc} = {sh}[0];"));
            self.line(&format!(
                "for (var i: u32 = 1u; i < {WORKGROUP_SIZE}u; i = i + 1u) {{"
            ));
            self.line(&format!("  {acc} = {expr};"));
            self.line("}");
        }
        self.line("workgroupBarrier();");
        Ok(())
    }

    /// A grid-mapped range: the first opens the grid-stride loop; each computes its index from
    /// the flat element index `g`.
    fn open_grid(&mut self, i: usize, r: &UOp) -> Result<(), String> {
        let pos = self
            .plan
            .ranges
            .iter()
            .position(|&(j, _)| j == i)
            .ok_or("grid range not in the plan")?;
        let outer = pos == 0;
        if outer {
            let total = self.plan.total;
            if self.group.is_some() {
                // one output per workgroup (uniform across it: the barriers need that)
                self.line(&format!(
                    "for (var g: u32 = wid.x; g < {total}u; g = g + nwg.x) {{"
                ));
            } else {
                self.line(&format!(
                    "for (var g: u32 = gid.x; g < {total}u; g = g + nwg.x * {WORKGROUP_SIZE}u) {{"
                ));
            }
            self.depth += 1;
        }
        let inner: u64 = self.plan.ranges[pos + 1..]
            .iter()
            .map(|&(_, s)| s)
            .product();
        let size = self.plan.ranges[pos].1;
        let mut expr = "g".to_string();
        if inner != 1 {
            expr = format!("({expr} / {inner}u)");
        }
        if !outer {
            expr = format!("({expr} % {size}u)");
        }
        let name = self.fresh("r");
        self.line(&format!("let {name}: i32 = i32({expr});"));
        self.names.insert(r.clone(), name);
        self.loops.push(Loop::Grid { outer });
        Ok(())
    }

    fn close_loop(&mut self) -> Result<(), String> {
        match self.loops.pop().ok_or("End without Range")? {
            Loop::Grid { outer: false } => {}
            Loop::Plain | Loop::Grid { outer: true } => {
                self.depth -= 1;
                self.line("}");
            }
            Loop::Grouped => {
                self.depth -= 1;
                self.line("}");
                self.combine_group()?;
            }
        }
        Ok(())
    }

    fn index(&mut self, u: &UOp) -> Result<(), String> {
        let base = u.s(0);
        if let Some(acc) = self.accs.get(base).cloned() {
            if u.s(1).as_int() != Some(0) {
                return Err("registers are indexed only at 0".into());
            }
            self.accs.insert(u.clone(), acc);
            return Ok(());
        }
        if base.op() != Ops::DefineGlobal {
            return Err(format!("Index into {} is not supported yet", base.op()));
        }
        let slot = base.arg().as_int().ok_or("DefineGlobal needs a slot")? as usize;
        let idx_u = u.s(1);
        let mut idx = self.e(idx_u)?;
        match self.ty(idx_u.dtype())? {
            Ty::I32 => {}
            Ty::U32 | Ty::I64 | Ty::U64 => idx = format!("i32({idx})"),
            t => return Err(format!("index of type {}", t.name())),
        }
        let gate = match u.src().get(2) {
            Some(g) if g.as_const().is_some_and(|c| c.as_bool()) => None,
            Some(g) => Some(self.e(g)?),
            None => None,
        };
        self.globals.insert(
            u.clone(),
            Access {
                slot,
                dtype: u.dtype().base(),
                idx,
                gate,
            },
        );
        Ok(())
    }

    /// The expression reading element `a.idx` of buffer `a.slot` (in register form).
    fn read(&mut self, a: &Access) -> Result<String, String> {
        let b = format!("b{}", a.slot);
        let n = per_word(a.dtype);
        if n == 1 {
            return Ok(format!("{b}[{}]", a.idx));
        }
        let word = format!("{b}[u32({}) >> {}u]", a.idx, n.trailing_zeros());
        let word = if self.atomic.contains(&a.slot) {
            format!("atomicLoad(&{word})")
        } else {
            word
        };
        let w = self.fresh("w");
        self.line(&format!("let {w}: u32 = {word};"));
        let bits = 32 / n;
        let sh = format!("((u32({}) & {}u) * {bits}u)", a.idx, n - 1);
        Ok(match a.dtype.kind() {
            Scalar::Bool => format!("(({w} >> {sh}) & 0xffu) != 0u"),
            Scalar::Int8 | Scalar::Int16 => {
                format!(
                    "(bitcast<i32>({w} << ({}u - {sh})) >> {}u)",
                    32 - bits,
                    32 - bits
                )
            }
            _ => format!("(({w} >> {sh}) & 0x{:x}u)", (1u64 << bits) - 1),
        })
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(acc) = self.accs.get(index).cloned() {
            return self.def(u, &acc);
        }
        let a = self
            .globals
            .get(index)
            .cloned()
            .ok_or("Load from an unknown index")?;
        let ty = self.ty(u.dtype())?;
        match a.gate.clone() {
            None => {
                let expr = self.read(&a)?;
                self.def(u, &expr)
            }
            Some(g) => {
                // The value when the gate is off: the alternative source, else 0.
                let alt = match u.src().get(1) {
                    Some(x) => self.e(x)?,
                    None => self.literal(ConstValue::Int(0), u.dtype())?,
                };
                let name = self.fresh("v");
                self.line(&format!("var {name}: {} = {alt};", ty.name()));
                self.line(&format!("if ({g}) {{"));
                self.depth += 1;
                let expr = self.read(&a)?;
                self.line(&format!("{name} = {expr};"));
                self.depth -= 1;
                self.line("}");
                self.names.insert(u.clone(), name);
                Ok(())
            }
        }
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let v = self.e(u.s(1))?;
        if let Some(acc) = self.accs.get(index).cloned() {
            self.line(&format!("{acc} = {v};"));
            return Ok(());
        }
        let a = self
            .globals
            .get(index)
            .cloned()
            .ok_or("Store to an unknown index")?;
        if let Some(g) = &a.gate {
            self.line(&format!("if ({g}) {{"));
            self.depth += 1;
        }
        let b = format!("b{}", a.slot);
        let n = per_word(a.dtype);
        if n == 1 {
            self.line(&format!("{b}[{}] = {v};", a.idx));
        } else {
            let bits = 32 / n;
            let mask = format!("0x{:x}u", (1u64 << bits) - 1);
            let val = match self.ty(a.dtype)? {
                Ty::Bool => format!("select(0u, 1u, {v})"),
                Ty::I32 => format!("(bitcast<u32>({v}) & {mask})"),
                _ => format!("({v} & {mask})"),
            };
            let (w, s) = (self.fresh("w"), self.fresh("s"));
            self.line(&format!(
                "let {w}: u32 = u32({}) >> {}u;",
                a.idx,
                n.trailing_zeros()
            ));
            self.line(&format!(
                "let {s}: u32 = (u32({}) & {}u) * {bits}u;",
                a.idx,
                n - 1
            ));
            self.line(&format!("atomicAnd(&{b}[{w}], ~({mask} << {s}));"));
            self.line(&format!("atomicOr(&{b}[{w}], {val} << {s});"));
        }
        if a.gate.is_some() {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }
}
