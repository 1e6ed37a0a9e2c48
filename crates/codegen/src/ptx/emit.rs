//! Statements: each linearized op as PTX (registers, the prologue, loops plain, grouped and
//! grid-stride, indexing, loads and stores).

use std::collections::HashSet;

use tinygrad_dtype::{ConstValue, Scalar};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::Program;
use crate::grid::group_fold;

use super::regs::{Class, class_of, ld_type, literal, st_type};
use super::{BLOCK_SIZE, Ctx, Loop};

impl Ctx {
    pub(super) fn new_reg(&mut self, c: Class) -> String {
        let n = self.counts.entry(c).or_insert(0);
        let r = format!("{}{n}", c.prefix());
        *n += 1;
        r
    }

    pub(super) fn line(&mut self, s: &str) {
        self.body.push('\t');
        self.body.push_str(s);
        self.body.push('\n');
    }

    fn label(&mut self, s: &str) {
        self.body.push_str(s);
        self.body.push_str(":\n");
    }

    /// The register holding `u`'s value.
    pub(super) fn r(&self, u: &UOp) -> Result<String, String> {
        self.regs
            .get(u)
            .cloned()
            .ok_or_else(|| format!("{} used before it is defined", u.op()))
    }

    /// A fresh register for `u`'s value, recorded as its home.
    pub(super) fn def(&mut self, u: &UOp) -> Result<String, String> {
        let r = self.new_reg(class_of(u.dtype())?);
        self.regs.insert(u.clone(), r.clone());
        Ok(r)
    }

    /// Buffer pointers, variables and every constant, once, before any loop.
    pub(super) fn prologue(&mut self, prog: &Program, name: &str) -> Result<(), String> {
        for u in &prog.uops {
            if u.op() == Ops::DefineGlobal && !self.regs.contains_key(u) {
                let slot = u.arg().as_int().ok_or("DefineGlobal needs a slot")?;
                let r = self.def(u)?;
                self.line(&format!("ld.param.u64 {r}, [{name}_param_{slot}];"));
                self.line(&format!("cvta.to.global.u64 {r}, {r};"));
            }
            if u.op() == Ops::DefineVar && !self.regs.contains_key(u) {
                let Arg::Var(var, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                if !matches!(u.dtype().kind(), Scalar::Index | Scalar::Int64) {
                    return Err(format!("variable {var} is {}, not index", u.dtype()));
                }
                let k = crate::program::var_index(&prog.vars, var)?;
                let r = self.def(u)?;
                self.line(&format!("ld.param.s64 {r}, [{name}_var_{k}];"));
            }
        }
        let mut consts: Vec<UOp> = Vec::new();
        let mut seen: HashSet<UOp> = HashSet::new();
        for u in &prog.uops {
            for s in std::iter::once(u).chain(u.src()) {
                if s.op() == Ops::Const && seen.insert(s.clone()) {
                    consts.push(s.clone());
                }
            }
        }
        for c in consts {
            let v = c.as_const().ok_or("Const without a value")?;
            let lit = literal(v, c.dtype())?;
            let r = self.def(&c)?;
            let mov = class_of(c.dtype())?.mov();
            self.line(&format!("mov.{mov} {r}, {lit};"));
        }
        Ok(())
    }

    pub(super) fn emit(&mut self, i: usize, u: &UOp) -> Result<(), String> {
        match u.op() {
            // (variables are loaded by the prologue)
            Ops::Const | Ops::DefineGlobal | Ops::DefineVar | Ops::Sink | Ops::Noop => Ok(()),
            Ops::DefineReg => {
                let r = self.new_reg(class_of(u.dtype().base())?);
                self.accs.insert(u.clone(), r);
                Ok(())
            }
            Ops::Range if self.grid_at.contains(&i) => self.open_grid(i, u),
            Ops::Range if self.group.as_ref().is_some_and(|g| g.range == i) => self.open_grouped(u),
            Ops::Range => self.open_loop(u),
            Ops::End => self.close_loop(u),
            Ops::Index => self.index(u),
            Ops::Load => self.load(u),
            Ops::Store => self.store(u),
            Ops::Cast => {
                let a = self.r(u.s(0))?;
                let d = self.def(u)?;
                self.cast(&d, &a, u.s(0).dtype(), u.dtype())
            }
            Ops::Bitcast => self.bitcast(u),
            op if op.is_alu() => self.alu(u),
            op => Err(format!("{op} is not supported by the PTX renderer yet")),
        }
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.r(r.s(0))?;
        let counter = self.def(r)?;
        let label = self.labels;
        self.labels += 1;
        let p = self.new_reg(Class::Pred);
        self.line(&format!("mov.b64 {counter}, 0;"));
        self.label(&format!("$L{label}"));
        self.line(&format!("setp.ge.s64 {p}, {counter}, {size};"));
        self.line(&format!("@{p} bra $L{label}_end;"));
        self.loops.push(Loop::Plain { counter, label });
        Ok(())
    }

    /// The grouped reduction loop: thread `tid.x` runs every [`BLOCK_SIZE`]th iteration from
    /// its own.
    fn open_grouped(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.r(r.s(0))?;
        let counter = self.def(r)?;
        let label = self.labels;
        self.labels += 1;
        let t = self.new_reg(Class::B32);
        self.line(&format!("mov.u32 {t}, %tid.x;"));
        self.line(&format!("cvt.u64.u32 {counter}, {t};"));
        self.label(&format!("$L{label}"));
        let p = self.new_reg(Class::Pred);
        self.line(&format!("setp.ge.s64 {p}, {counter}, {size};"));
        self.line(&format!("@{p} bra $L{label}_end;"));
        self.loops.push(Loop::Grouped { counter, label });
        Ok(())
    }

    /// After the grouped loop: each accumulator's partials go through a `.shared` array, and
    /// every thread folds them in the same order (the second barrier keeps the next output's
    /// partials from overwriting them early).
    fn combine_group(&mut self) -> Result<(), String> {
        let accs = self
            .group
            .as_ref()
            .map(|g| g.accs.clone())
            .unwrap_or_default();
        let t = self.new_reg(Class::B32);
        self.line(&format!("mov.u32 {t}, %tid.x;"));
        let mut bases = Vec::new();
        for (k, (reg, _)) in accs.iter().enumerate() {
            let dt = reg.dtype().base();
            let class = class_of(dt)?;
            let (ty, bytes) = match class {
                Class::B16 => ("b16", 2),
                Class::B32 => ("b32", 4),
                Class::F32 => ("f32", 4),
                Class::B64 => ("b64", 8),
                Class::F64 => ("f64", 8),
                Class::Pred => return Err("a grouped bool accumulator".into()),
            };
            let acc = self.accs.get(reg).cloned().ok_or("unknown accumulator")?;
            let name = format!("part{k}");
            self.shared.push((name.clone(), bytes * 8));
            let (base, off, addr) = (
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
            );
            self.line(&format!("mov.u64 {base}, {name};"));
            self.line(&format!("mul.wide.u32 {off}, {t}, {bytes};"));
            self.line(&format!("add.s64 {addr}, {base}, {off};"));
            self.line(&format!("st.shared.{ty} [{addr}], {acc};"));
            bases.push((base, ty, bytes, class));
        }
        self.line("bar.sync 0;");
        for (k, ((reg, op), (base, ty, bytes, class))) in accs.iter().zip(bases).enumerate() {
            let acc = self.accs[reg].clone();
            let dt = reg.dtype().base();
            self.line(&format!("ld.shared.{ty} {acc}, [{base}];"));
            let label = self.labels;
            self.labels += 1;
            let (i, p, off, addr) = (
                self.new_reg(Class::B32),
                self.new_reg(Class::Pred),
                self.new_reg(Class::B64),
                self.new_reg(Class::B64),
            );
            let part = self.new_reg(class);
            self.line(&format!("mov.u32 {i}, 1;"));
            self.label(&format!("$L{label}"));
            self.line(&format!("setp.ge.u32 {p}, {i}, {BLOCK_SIZE};"));
            self.line(&format!("@{p} bra $L{label}_end;"));
            self.line(&format!("mul.wide.u32 {off}, {i}, {bytes};"));
            self.line(&format!("add.s64 {addr}, {base}, {off};"));
            self.line(&format!("ld.shared.{ty} {part}, [{addr}];"));
            let (a, b, folded) = group_fold(*op, dt, k);
            self.regs.insert(a, acc.clone());
            self.regs.insert(b, part);
            self.alu(&folded)?;
            let d = self.r(&folded)?;
            self.line(&format!("mov.{} {acc}, {d};", class.mov()));
            self.line(&format!("add.u32 {i}, {i}, 1;"));
            self.line(&format!("bra $L{label};"));
            self.label(&format!("$L{label}_end"));
        }
        self.line("bar.sync 0;");
        Ok(())
    }

    /// A grid-mapped range: the first opens the grid-stride loop; each computes its index
    /// from the flat element index.
    fn open_grid(&mut self, i: usize, r: &UOp) -> Result<(), String> {
        let pos = self
            .plan
            .ranges
            .iter()
            .position(|&(j, _)| j == i)
            .ok_or("grid range not in the plan")?;
        let outer = pos == 0;
        let label = self.labels;
        self.labels += 1;
        if outer {
            let total = self.plan.total;
            let (a, b, c) = (
                self.new_reg(Class::B32),
                self.new_reg(Class::B32),
                self.new_reg(Class::B32),
            );
            let gid = self.new_reg(Class::B64);
            let t = self.new_reg(Class::B64);
            if self.group.is_some() {
                // one output per block (uniform across it: the barriers need that)
                self.line(&format!("mov.u32 {a}, %ctaid.x;"));
                self.line(&format!("cvt.u64.u32 {gid}, {a};"));
            } else {
                self.line(&format!("mov.u32 {a}, %ctaid.x;"));
                self.line(&format!("mov.u32 {b}, %ntid.x;"));
                self.line(&format!("mov.u32 {c}, %tid.x;"));
                self.line(&format!("mul.wide.u32 {gid}, {a}, {b};"));
                self.line(&format!("cvt.u64.u32 {t}, {c};"));
                self.line(&format!("add.s64 {gid}, {gid}, {t};"));
            }
            self.label(&format!("$L{label}"));
            let p = self.new_reg(Class::Pred);
            self.line(&format!("setp.ge.u64 {p}, {gid}, {total};"));
            self.line(&format!("@{p} bra $L{label}_end;"));
            let g32 = if total <= u64::from(u32::MAX) {
                let g = self.new_reg(Class::B32);
                self.line(&format!("cvt.u32.u64 {g}, {gid};"));
                Some(g)
            } else {
                None
            };
            self.gid = Some((gid, g32));
        }
        let (gid, g32) = self.gid.clone().ok_or("grid range before the grid loop")?;
        let inner: u64 = self.plan.ranges[pos + 1..]
            .iter()
            .map(|&(_, s)| s)
            .product();
        let size = self.plan.ranges[pos].1;
        let d = self.def(r)?;
        match g32 {
            Some(g) => {
                let t = self.new_reg(Class::B32);
                self.line(&format!("mov.b32 {t}, {g};"));
                if inner != 1 {
                    self.line(&format!("div.u32 {t}, {t}, {inner};"));
                }
                if !outer {
                    self.line(&format!("rem.u32 {t}, {t}, {size};"));
                }
                self.line(&format!("cvt.u64.u32 {d}, {t};"));
            }
            None => {
                self.line(&format!("mov.b64 {d}, {gid};"));
                if inner != 1 {
                    self.line(&format!("div.u64 {d}, {d}, {inner};"));
                }
                if !outer {
                    self.line(&format!("rem.u64 {d}, {d}, {size};"));
                }
            }
        }
        self.loops.push(Loop::Grid { outer, label });
        Ok(())
    }

    fn close_loop(&mut self, _end: &UOp) -> Result<(), String> {
        match self.loops.pop().ok_or("End without Range")? {
            Loop::Plain { counter, label } => {
                self.line(&format!("add.s64 {counter}, {counter}, 1;"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
            }
            Loop::Grouped { counter, label } => {
                self.line(&format!("add.s64 {counter}, {counter}, {BLOCK_SIZE};"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
                self.combine_group()?;
            }
            Loop::Grid { outer: false, .. } => {}
            Loop::Grid { outer: true, label } => {
                let (gid, _) = self.gid.clone().ok_or("grid loop without an index")?;
                let (a, b) = (self.new_reg(Class::B32), self.new_reg(Class::B32));
                let stride = self.new_reg(Class::B64);
                self.line(&format!("mov.u32 {a}, %nctaid.x;"));
                if self.group.is_some() {
                    self.line(&format!("mov.u32 {b}, 1;"));
                } else {
                    self.line(&format!("mov.u32 {b}, %ntid.x;"));
                }
                self.line(&format!("mul.wide.u32 {stride}, {a}, {b};"));
                self.line(&format!("add.s64 {gid}, {gid}, {stride};"));
                self.line(&format!("bra $L{label};"));
                self.label(&format!("$L{label}_end"));
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
        let b = self.r(base)?;
        let idx = u.s(1);
        let mut i = self.r(idx)?;
        match class_of(idx.dtype())? {
            Class::B64 => {}
            Class::B32 => {
                let w = self.new_reg(Class::B64);
                let ext = if idx.dtype().is_unsigned() { "u" } else { "s" };
                self.line(&format!("cvt.{ext}64.{ext}32 {w}, {i};"));
                i = w;
            }
            c => return Err(format!("index of register class {c:?}")),
        }
        let size = u.dtype().base().itemsize();
        let d = self.def(u)?;
        if size == 1 {
            self.line(&format!("add.s64 {d}, {b}, {i};"));
        } else {
            self.line(&format!("mad.lo.s64 {d}, {i}, {size}, {b};"));
        }
        Ok(())
    }

    /// The gate of a global `Index` (its third source), as a predicate register.
    fn gate(&self, index: &UOp) -> Result<Option<String>, String> {
        match index.src().get(2) {
            Some(g) if g.as_const().is_some_and(|c| c.as_bool()) => Ok(None),
            Some(g) => self.r(g).map(Some),
            None => Ok(None),
        }
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(acc) = self.accs.get(index).cloned() {
            let d = self.def(u)?;
            let mov = class_of(u.dtype())?.mov();
            self.line(&format!("mov.{mov} {d}, {acc};"));
            return Ok(());
        }
        let addr = self.r(index)?;
        let gate = self.gate(index)?;
        let dt = u.dtype();
        let ty = ld_type(dt)?;
        let d = self.def(u)?;
        let pre = gate.as_ref().map_or(String::new(), |g| format!("@{g} "));
        // The value when the gate is off: the alternative source, else 0.
        let alt = match u.src().get(1) {
            Some(a) => Some(self.r(a)?),
            None => None,
        };
        if dt.is_bool() {
            let t = self.new_reg(Class::B32);
            if gate.is_some() {
                self.line(&format!("mov.b32 {t}, 0;"));
            }
            self.line(&format!("{pre}ld.global.{ty} {t}, [{addr}];"));
            self.line(&format!("setp.ne.u32 {d}, {t}, 0;"));
            if let (Some(g), Some(a)) = (&gate, &alt) {
                self.line(&format!("@!{g} mov.pred {d}, {a};"));
            }
            return Ok(());
        }
        let c = class_of(dt)?;
        if let Some(g) = &gate {
            match &alt {
                Some(a) => self.line(&format!("@!{g} mov.{} {d}, {a};", c.mov())),
                None => {
                    let z = literal(ConstValue::Int(0), dt)?;
                    self.line(&format!("mov.{} {d}, {z};", c.mov()));
                }
            }
        }
        self.line(&format!("{pre}ld.global.{ty} {d}, [{addr}];"));
        Ok(())
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let v = self.r(u.s(1))?;
        if let Some(acc) = self.accs.get(index).cloned() {
            let mov = class_of(u.s(1).dtype())?.mov();
            self.line(&format!("mov.{mov} {acc}, {v};"));
            return Ok(());
        }
        let addr = self.r(index)?;
        let gate = self.gate(index)?;
        let pre = gate.as_ref().map_or(String::new(), |g| format!("@{g} "));
        let dt = u.s(1).dtype();
        let ty = st_type(dt)?;
        let v = if dt.is_bool() {
            let t = self.new_reg(Class::B32);
            self.line(&format!("selp.b32 {t}, 1, 0, {v};"));
            t
        } else {
            v
        };
        self.line(&format!("{pre}st.global.{ty} [{addr}], {v};"));
        Ok(())
    }
}
