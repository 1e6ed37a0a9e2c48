//! Statements: each linearized op as Cranelift IR (values, constants, loops and the two-stream
//! loop, loads, stores, vectors).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};
use tinygrad_dtype::ConstValue;
use tinygrad_uop::{Arg, Ops, UOp};

use super::{
    Ctx, LoopState, bool_bytes_to_mask, clif_type, lane_flags, mask_to_bool_bytes, mem_flags,
    zero_of,
};

impl<'a> Ctx<'a> {
    pub(super) fn i(&mut self) -> cranelift_frontend::FuncInstBuilder<'_, 'a> {
        self.b.ins()
    }

    pub(super) fn val(&mut self, u: &UOp) -> Result<Value, String> {
        if let Some(v) = self.vals.get(u) {
            return Ok(*v);
        }
        if u.op() == Ops::Const {
            let v = self.constant(u)?;
            self.vals.insert(u.clone(), v);
            return Ok(v);
        }
        Err(format!("{} used before it is defined", u.op()))
    }

    fn constant(&mut self, u: &UOp) -> Result<Value, String> {
        let c = u.as_const().ok_or("const without value")?;
        if u.dtype().count() > 1 {
            let vty = clif_type(u.dtype())?;
            let lane = if u.dtype().is_bool() {
                self.b
                    .ins()
                    .iconst(types::I32, if c.as_bool() { -1 } else { 0 })
            } else {
                let sc = UOp::cnst(u.dtype().scalar(), c);
                self.constant(&sc)?
            };
            return Ok(self.b.ins().splat(vty, lane));
        }
        let ty = clif_type(u.dtype())?;
        Ok(match ty {
            types::F32 => self.b.ins().f32const(c.as_f64() as f32),
            types::F64 => self.b.ins().f64const(c.as_f64()),
            _ if u.dtype().is_float() => {
                let b = c.to_le_bytes(u.dtype().scalar());
                let bits = u16::from_le_bytes([b[0], b[1]]) as i64;
                self.b.ins().iconst(ty, bits)
            }
            _ => {
                let bits = match c {
                    ConstValue::UInt(x) => x as i64,
                    other => other.as_i64(),
                };
                let bits = if ty == types::I64 {
                    bits
                } else {
                    bits & ((1i64 << ty.bits()) - 1)
                };
                self.b.ins().iconst(ty, bits)
            }
        })
    }

    pub(super) fn emit(&mut self, u: &UOp) -> Result<(), String> {
        let v = match u.op() {
            Ops::Const => self.constant(u)?,
            Ops::DefineGlobal => {
                let slot = u.arg().as_int().ok_or("DefineGlobal needs a slot")?;
                let flags = MemFlagsData::trusted();
                self.b
                    .ins()
                    .load(types::I64, flags, self.bufs, (slot * 8) as i32)
            }
            Ops::DefineVar => {
                // the launcher passes each variable's value (an i64) after the buffer addresses
                let Arg::Var(name, _, _) = u.arg() else {
                    return Err("DefineVar needs a Var argument".into());
                };
                let k = crate::program::var_index(self.vars, name)?;
                let flags = MemFlagsData::trusted();
                let word = ((self.globals + k) * 8) as i32;
                let v = self.b.ins().load(types::I64, flags, self.bufs, word);
                match clif_type(u.dtype())? {
                    types::I64 => v,
                    ty => self.b.ins().ireduce(ty, v),
                }
            }
            Ops::DefineReg => {
                let ty = clif_type(u.dtype().base())?;
                let var = self.b.declare_var(ty);
                self.regs.insert(u.clone(), (var, ty));
                return Ok(());
            }
            Ops::Range => return self.open_loop(u),
            Ops::End => return self.close_loop(),
            Ops::Index => {
                if self.regs.contains_key(u.s(0)) {
                    return Ok(()); // register access: handled by Load/Store
                }
                let base = self.val(u.s(0))?;
                let size = u.dtype().base().itemsize() as i64;
                // `x + c`: the constant part becomes the access's immediate offset.
                let (x, c) = match (u.s(1).op(), u.s(1).src().get(1).and_then(|c| c.as_int())) {
                    (Ops::Add, Some(c)) if (c * size).abs() < i32::MAX as i64 / 2 => {
                        (u.s(1).s(0), c)
                    }
                    _ => (u.s(1), 0),
                };
                let idx = self.val(x)?;
                let off = match size {
                    1 => idx,
                    s if s > 0 && (s as u64).is_power_of_two() => {
                        self.b.ins().ishl_imm_u(idx, i64::from(s.trailing_zeros()))
                    }
                    s => self.b.ins().imul_imm_s(idx, s),
                };
                if c != 0 {
                    self.offsets.insert(u.clone(), (c * size) as i32);
                }
                self.b.ins().iadd(base, off)
            }
            Ops::Load => return self.load(u),
            Ops::Store => return self.store(u),
            Ops::Cast => self.cast(u)?,
            Ops::Bitcast => {
                let x = self.val(u.s(0))?;
                let ty = clif_type(u.dtype())?;
                if ty == clif_type(u.s(0).dtype())? {
                    x // e.g. float16 <-> int16: both are 16-bit integers here
                } else {
                    self.b.ins().bitcast(ty, lane_flags(), x)
                }
            }
            op if op.is_alu() => self.alu(u)?,
            Ops::Vectorize => self.vectorize(u)?,
            Ops::Gep => {
                let x = self.val(u.s(0))?;
                let lane = u.arg().as_int().ok_or("Gep needs a lane")? as u8;
                let v = self.b.ins().extractlane(x, lane);
                if u.dtype().is_bool() {
                    // lane mask -> bool 0/1
                    self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
                } else {
                    v
                }
            }
            Ops::Sink | Ops::Noop => return Ok(()),
            op => return Err(format!("{op} is not supported by the Cranelift renderer")),
        };
        self.vals.insert(u.clone(), v);
        Ok(())
    }

    fn open_loop(&mut self, r: &UOp) -> Result<(), String> {
        let size = self.val(r.s(0))?;
        let (lo, hi) = if self.first_loop
            && !matches!(r.arg(), Arg::Range(_, tinygrad_uop::AxisKind::Reduce))
        {
            // The outermost output loop runs over the launcher's [start, end) slice.
            let hi = self.b.ins().smin(self.end, size);
            (self.start, hi)
        } else {
            (self.b.ins().iconst(types::I64, 0), size)
        };
        self.first_loop = false;
        let state = self.loop_header(lo, hi);
        self.vals.insert(r.clone(), state.counter);
        self.loops.push(state);
        Ok(())
    }

    /// Starts a loop whose counter runs from `lo` while below `bound`: the header block (the
    /// counter its parameter) and the exit block, leaving the builder in the (sealed) body.
    fn loop_header(&mut self, lo: Value, bound: Value) -> LoopState {
        let header = self.b.create_block();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let counter = self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[lo.into()]);
        self.b.switch_to_block(header);
        let go = self.b.ins().icmp(IntCC::SignedLessThan, counter, bound);
        self.b.ins().brif(go, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        self.b.seal_block(body);
        LoopState {
            header,
            exit,
            counter,
        }
    }

    /// The outer loop `r` (over the launcher's `[start, end)`) with body `body`, as two streams:
    /// iteration `i` of the first half and iteration `i + half` of the second run in the same
    /// pass of the loop, so each core reads and writes twice as many streams at once.
    pub(super) fn two_stream_loop(&mut self, r: &UOp, body: &[UOp]) -> Result<(), String> {
        let size = self.val(r.s(0))?;
        let hi = self.b.ins().smin(self.end, size);
        let lo = self.start;
        let n = self.b.ins().isub(hi, lo);
        let n1 = self.b.ins().iadd_imm_s(n, 1);
        let half = self.b.ins().sshr_imm_s(n1, 1);
        let mid = self.b.ins().iadd(lo, half);
        self.first_loop = false;
        let state = self.loop_header(lo, mid);
        let counter = state.counter;
        let second = self.b.create_block();
        let next = self.b.create_block();
        self.vals.insert(r.clone(), counter);
        for u in body {
            self.emit(u)?;
        }
        let other = self.b.ins().iadd(counter, half);
        let has_other = self.b.ins().icmp(IntCC::SignedLessThan, other, hi);
        self.b.ins().brif(has_other, second, &[], next, &[]);
        self.b.switch_to_block(second);
        self.b.seal_block(second);
        for u in body {
            self.vals.remove(u);
            self.offsets.remove(u);
        }
        self.vals.insert(r.clone(), other);
        for u in body {
            self.emit(u)?;
        }
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
        self.b.seal_block(next);
        self.loops.push(state);
        self.close_loop()
    }

    fn close_loop(&mut self) -> Result<(), String> {
        let l = self.loops.pop().ok_or("End without Range")?;
        let next = self.b.ins().iadd_imm_s(l.counter, 1);
        self.b.ins().jump(l.header, &[next.into()]);
        self.b.seal_block(l.header);
        self.b.switch_to_block(l.exit);
        self.b.seal_block(l.exit);
        Ok(())
    }

    fn load(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        if let Some(&(var, _)) = self.regs.get(index.s(0)) {
            let v = self.b.use_var(var);
            self.vals.insert(u.clone(), v);
            return Ok(());
        }
        // A bool vector is 4 bytes in memory (0/1 each): loaded as one i32, widened to a lane
        // mask after the (possibly gated) load.
        let bool_vec = u.dtype().is_bool() && u.dtype().count() == 4;
        let ty = if bool_vec {
            types::I32
        } else {
            clif_type(u.dtype())?
        };
        let addr = self.val(index)?;
        let flags = mem_flags(u.dtype());
        let offset = self.offsets.get(index).copied().unwrap_or(0);
        let v = if index.src().len() > 2 && index.s(2).dtype().count() > 1 {
            // A vector load gated lane by lane (a padded row's border: see `opt::expand`).
            let mask = self.val(index.s(2))?;
            self.lane_gated_load(ty, flags, addr, offset, mask)
        } else if index.src().len() > 2 {
            // Gated load: only touch memory when the condition holds.
            let cond = self.val(index.s(2))?;
            let do_load = self.b.create_block();
            let join = self.b.create_block();
            let res = self.b.append_block_param(join, ty);
            let zero = zero_of(&mut self.b, ty);
            self.b.ins().brif(cond, do_load, &[], join, &[zero.into()]);
            self.b.switch_to_block(do_load);
            self.b.seal_block(do_load);
            let loaded = self.b.ins().load(ty, flags, addr, offset);
            self.b.ins().jump(join, &[loaded.into()]);
            self.b.switch_to_block(join);
            self.b.seal_block(join);
            res
        } else {
            self.b.ins().load(ty, flags, addr, offset)
        };
        let v = if bool_vec {
            bool_bytes_to_mask(&mut self.b, v)
        } else {
            v
        };
        self.vals.insert(u.clone(), v);
        Ok(())
    }

    /// A vector load of type `ty` at `addr + offset` whose lanes are gated by `mask` (a lane
    /// mask, all ones where the lane's element may be read): one vector load when every lane
    /// is valid, zeros when none is, else each valid lane loaded alone (an invalid lane's
    /// address may lie outside the buffer, so it is never touched) and the others 0.
    fn lane_gated_load(
        &mut self,
        ty: types::Type,
        flags: MemFlagsData,
        addr: Value,
        offset: i32,
        mask: Value,
    ) -> Value {
        let join = self.b.create_block();
        let res = self.b.append_block_param(join, ty);
        let zero = zero_of(&mut self.b, ty);
        let whole = self.b.create_block();
        let not_whole = self.b.create_block();
        let some = self.b.create_block();
        let all = self.b.ins().vall_true(mask);
        self.b.ins().brif(all, whole, &[], not_whole, &[]);
        self.b.switch_to_block(whole);
        self.b.seal_block(whole);
        let loaded = self.b.ins().load(ty, flags, addr, offset);
        self.b.ins().jump(join, &[loaded.into()]);
        self.b.switch_to_block(not_whole);
        self.b.seal_block(not_whole);
        let any = self.b.ins().vany_true(mask);
        self.b.ins().brif(any, some, &[], join, &[zero.into()]);
        self.b.switch_to_block(some);
        self.b.seal_block(some);
        let lane_ty = ty.lane_type();
        let mut acc = zero;
        for k in 0..ty.lane_count() as u8 {
            let on = self.b.ins().extractlane(mask, k);
            let on = self.b.ins().icmp_imm_s(IntCC::NotEqual, on, 0);
            let load_lane = self.b.create_block();
            let next = self.b.create_block();
            let merged = self.b.append_block_param(next, ty);
            self.b.ins().brif(on, load_lane, &[], next, &[acc.into()]);
            self.b.switch_to_block(load_lane);
            self.b.seal_block(load_lane);
            let lane_offset = offset + i32::from(k) * lane_ty.bytes() as i32;
            let x = self.b.ins().load(lane_ty, flags, addr, lane_offset);
            let with = self.b.ins().insertlane(acc, x, k);
            self.b.ins().jump(next, &[with.into()]);
            self.b.switch_to_block(next);
            self.b.seal_block(next);
            acc = merged;
        }
        self.b.ins().jump(join, &[acc.into()]);
        self.b.switch_to_block(join);
        self.b.seal_block(join);
        res
    }

    fn store(&mut self, u: &UOp) -> Result<(), String> {
        let index = u.s(0);
        let value = self.val(u.s(1))?;
        if let Some(&(var, _)) = self.regs.get(index.s(0)) {
            self.b.def_var(var, value);
            return Ok(());
        }
        let addr = self.val(index)?;
        let offset = self.offsets.get(index).copied().unwrap_or(0);
        let dt = u.s(1).dtype();
        let value = if dt.is_bool() && dt.count() == 4 {
            mask_to_bool_bytes(&mut self.b, value)
        } else {
            value
        };
        self.b.ins().store(mem_flags(dt), value, addr, offset);
        Ok(())
    }

    /// A vector from lane values: a splat when all lanes are the same value. `bool` lanes
    /// (`i8` 0/1) become lane masks.
    fn vectorize(&mut self, u: &UOp) -> Result<Value, String> {
        let vty = clif_type(u.dtype())?;
        let mut lanes = Vec::with_capacity(u.src().len());
        for s in u.src() {
            let v = self.val(s)?;
            let v = if u.dtype().is_bool() {
                let wide = self.b.ins().uextend(types::I32, v);
                self.b.ins().ineg(wide)
            } else {
                v
            };
            lanes.push(v);
        }
        if u.src().iter().all(|s| s == u.s(0)) {
            return Ok(self.b.ins().splat(vty, lanes[0]));
        }
        let mut acc = self.b.ins().splat(vty, lanes[0]);
        for (i, l) in lanes.iter().enumerate().skip(1) {
            acc = self.b.ins().insertlane(acc, *l, i as u8);
        }
        Ok(acc)
    }
}
