//! A PTX emulator for the subset the PTX renderer emits: runs a rendered kernel on host buffers,
//! one thread after another, with PTX's semantics (so the renderer's own guards are what makes
//! results right). Without a GPU this checks what the assembler cannot: that the PTX computes
//! the right values.
//!
//! A block's threads share its `.shared` arrays; `bar.sync` suspends a thread until every
//! thread of the block has reached it (threads run one after another up to the barrier), and a
//! barrier that some of the block's threads never reach is an error.
//!
//! Undefined behaviour is an error, not a value: integer division by zero or `MIN / -1`, an
//! out-of-bounds or misaligned access, reading a register never written, a runaway loop.
//! Where PTX defines a result the hardware behaviour is modelled: `max.f32` returns the non-NaN
//! operand, shift amounts clamp at the width, float -> int `cvt` saturates with NaN -> 0,
//! narrow `ld`/`cvt` sign- or zero-extend by type, `.rn` conversions round to nearest even,
//! `.rzi`/`.rni` round a float to an integral float (toward zero / to nearest even).

use std::collections::HashMap;

use half::{bf16, f16};

#[derive(Clone, Copy, Debug)]
enum Opd {
    Reg(usize),
    Imm(u64),
    Special(Special),
    /// `[reg]` or `[reg+off]`.
    Mem(usize, i64),
    /// `[param]`: the index of a kernel parameter.
    Param(usize),
    /// `[name_var_k]`: the value of the kernel's variable `k`.
    Var(usize),
    Label(usize),
}

#[derive(Clone, Copy, Debug)]
enum Special {
    Ctaid,
    Ntid,
    Tid,
    Nctaid,
}

#[derive(Debug)]
struct Inst {
    pred: Option<(usize, bool)>,
    /// The opcode split at dots (`["add", "rn", "f32"]`).
    op: Vec<String>,
    args: Vec<Opd>,
    text: String,
}

/// A parsed kernel.
pub struct Kernel {
    insts: Vec<Inst>,
    widths: Vec<u32>,
    names: Vec<String>,
    params: usize,
    /// Variable parameters (`.param .s64 name_var_k`, after the buffers).
    vars: usize,
    /// Bytes of `.shared` memory per block.
    shared_bytes: usize,
}

fn width_of(decl: &str) -> u32 {
    match decl {
        ".pred" => 1,
        ".b16" => 16,
        ".b32" | ".f32" => 32,
        _ => 64,
    }
}

fn parse_imm(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0f").or_else(|| s.strip_prefix("0d")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h.trim_end_matches('U'), 16).ok();
    }
    s.trim_end_matches('U')
        .parse::<i64>()
        .ok()
        .map(|v| v as u64)
}

impl Kernel {
    /// Parses the PTX text of one rendered kernel.
    pub fn parse(ptx: &str) -> Result<Kernel, String> {
        let mut regs: HashMap<String, usize> = HashMap::new();
        let mut widths = Vec::new();
        let mut names = Vec::new();
        let mut prefixes: Vec<(String, u32)> = Vec::new();
        let mut labels: HashMap<String, usize> = HashMap::new();
        let mut raw: Vec<&str> = Vec::new();
        let mut params = 0;
        let mut nvars = 0;
        // `.shared` arrays: name -> byte offset in the block's shared memory.
        let mut shared: HashMap<String, usize> = HashMap::new();
        let mut shared_bytes = 0usize;
        for line in ptx.lines() {
            let line = line.split("//").next().unwrap_or("").trim();
            if line.is_empty() || matches!(line, "{" | "}" | ")") {
                continue;
            }
            if let Some(rest) = line.strip_prefix(".reg ") {
                // `.reg .b32 %r<12>;`
                let mut it = rest.split_whitespace();
                let decl = it.next().ok_or("bad .reg")?;
                let name = it.next().ok_or("bad .reg")?;
                let prefix = name.split('<').next().ok_or("bad .reg")?;
                prefixes.push((prefix.to_string(), width_of(decl)));
                continue;
            }
            if let Some(rest) = line.strip_prefix(".shared ") {
                // `.shared .align 8 .b32 part0[256];`
                let toks: Vec<&str> = rest.split_whitespace().collect();
                let (decl, arr) = match toks.as_slice() {
                    [".align", _, decl, arr] | [decl, arr] => (*decl, *arr),
                    _ => return Err(format!("bad .shared: {line}")),
                };
                let arr = arr.strip_suffix(';').unwrap_or(arr);
                let (name, n) = arr
                    .strip_suffix(']')
                    .and_then(|a| a.split_once('['))
                    .ok_or_else(|| format!("bad .shared: {line}"))?;
                let n: usize = n.parse().map_err(|_| format!("bad .shared: {line}"))?;
                shared_bytes = shared_bytes.next_multiple_of(8);
                shared.insert(name.to_string(), shared_bytes);
                shared_bytes += n * (width_of(decl) as usize / 8);
                continue;
            }
            if line.starts_with(".param") {
                if line.contains("_var_") {
                    nvars += 1;
                } else {
                    params += 1;
                }
                continue;
            }
            if line.starts_with('.') {
                continue;
            }
            if let Some(l) = line.strip_suffix(':') {
                labels.insert(l.to_string(), raw.len());
                continue;
            }
            raw.push(line);
        }
        // Longest prefix first: `%rd` before `%r`.
        prefixes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        let mut reg_id = |name: &str| -> Result<usize, String> {
            if let Some(&i) = regs.get(name) {
                return Ok(i);
            }
            let (_, w) = prefixes
                .iter()
                .find(|(p, _)| {
                    name.starts_with(p.as_str()) && name[p.len()..].parse::<u32>().is_ok()
                })
                .ok_or_else(|| format!("undeclared register {name}"))?;
            regs.insert(name.to_string(), widths.len());
            widths.push(*w);
            names.push(name.to_string());
            Ok(widths.len() - 1)
        };
        let mut insts = Vec::new();
        for line in raw {
            let text = line.to_string();
            let line = line
                .strip_suffix(';')
                .ok_or_else(|| format!("no ';': {line}"))?;
            let (pred, line) = if let Some(p) = line.strip_prefix('@') {
                let (p, rest) = p.split_once(char::is_whitespace).ok_or("bad predicate")?;
                let (neg, p) = match p.strip_prefix('!') {
                    Some(p) => (true, p),
                    None => (false, p),
                };
                (Some((reg_id(p)?, neg)), rest.trim())
            } else {
                (None, line)
            };
            let (op, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let op: Vec<String> = op.split('.').map(str::to_string).collect();
            let mut args = Vec::new();
            for a in rest.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                let opd = if let Some(m) = a.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
                    let (base, off) = match m.split_once('+') {
                        Some((b, o)) => (b, o.parse::<i64>().map_err(|e| e.to_string())?),
                        None => (m, 0),
                    };
                    if base.starts_with('%') {
                        Opd::Mem(reg_id(base)?, off)
                    } else if let Some(k) = base.rsplit_once("_var_") {
                        Opd::Var(k.1.parse().map_err(|_| format!("bad variable {base}"))?)
                    } else {
                        let i = base
                            .rsplit("_param_")
                            .next()
                            .and_then(|s| s.parse().ok())
                            .ok_or_else(|| format!("bad parameter {base}"))?;
                        Opd::Param(i)
                    }
                } else if let Some(s) = a.strip_prefix('%').and_then(|s| s.strip_suffix(".x")) {
                    Opd::Special(match s {
                        "ctaid" => Special::Ctaid,
                        "ntid" => Special::Ntid,
                        "tid" => Special::Tid,
                        "nctaid" => Special::Nctaid,
                        other => return Err(format!("special register {other}")),
                    })
                } else if a.starts_with('%') {
                    Opd::Reg(reg_id(a)?)
                } else if a.starts_with('$') {
                    Opd::Label(*labels.get(a).ok_or_else(|| format!("no label {a}"))?)
                } else if let Some(&off) = shared.get(a) {
                    Opd::Imm(SHARED_BASE + off as u64)
                } else {
                    Opd::Imm(parse_imm(a).ok_or_else(|| format!("bad operand {a}"))?)
                };
                args.push(opd);
            }
            insts.push(Inst {
                pred,
                op,
                args,
                text,
            });
        }
        Ok(Kernel {
            insts,
            widths,
            names,
            params,
            vars: nvars,
            shared_bytes,
        })
    }

    /// Runs the kernel on `grid` x `block` threads over `mem` (one byte vector per parameter;
    /// parameters may share a vector through `alias`: `alias[i]` is the vector of parameter `i`).
    pub fn run(
        &self,
        grid: u32,
        block: u32,
        mem: &mut [Vec<u8>],
        alias: &[usize],
    ) -> Result<(), String> {
        self.run_with_vars(grid, block, mem, alias, &[])
    }

    /// [`Kernel::run`] with `vars` the values of the kernel's variables.
    pub fn run_with_vars(
        &self,
        grid: u32,
        block: u32,
        mem: &mut [Vec<u8>],
        alias: &[usize],
        vars: &[i64],
    ) -> Result<(), String> {
        if vars.len() != self.vars {
            return Err(format!("{} values for {} variables", vars.len(), self.vars));
        }
        if alias.len() != self.params {
            return Err(format!(
                "{} buffers for {} parameters",
                alias.len(),
                self.params
            ));
        }
        for b in 0..grid {
            // Not zeros: 0 is the sum's identity, and a partial read before any thread wrote
            // it must show (all-ones bits: NaN as a float, -1 as an integer).
            let mut shared = vec![0xffu8; self.shared_bytes];
            let mut threads: Vec<Thread<'_>> = (0..block)
                .map(|tid| Thread {
                    k: self,
                    vars,
                    regs: vec![None; self.widths.len()],
                    ctaid: b,
                    tid,
                    grid,
                    block,
                    pc: 0,
                    steps: 0,
                })
                .collect();
            // Each thread runs to a barrier or its end; the barrier releases when all are there.
            loop {
                let mut at_barrier = 0;
                for t in threads.iter_mut() {
                    if t.pc == usize::MAX {
                        continue;
                    }
                    if t.run(mem, alias, &mut shared)? {
                        at_barrier += 1;
                    } else {
                        t.pc = usize::MAX;
                    }
                }
                if at_barrier == 0 {
                    break;
                }
                if at_barrier != threads.len() {
                    return Err(format!(
                        "block {b}: {at_barrier} of {block} threads wait at a barrier the others \
                         never reach"
                    ));
                }
            }
        }
        Ok(())
    }
}

enum Flow {
    Next,
    Jump(usize),
    Ret,
    Barrier,
}

struct Thread<'a> {
    k: &'a Kernel,
    vars: &'a [i64],
    regs: Vec<Option<u64>>,
    ctaid: u32,
    tid: u32,
    grid: u32,
    block: u32,
    /// The next instruction (`usize::MAX` once the thread has ended).
    pc: usize,
    steps: u64,
}

/// The block's shared memory is addressed from here (above every buffer).
const SHARED_BASE: u64 = 1 << 62;

impl Thread<'_> {
    /// Runs until the thread ends (`false`) or reaches a `bar.sync` (`true`, resuming after it).
    fn run(
        &mut self,
        mem: &mut [Vec<u8>],
        alias: &[usize],
        shared: &mut [u8],
    ) -> Result<bool, String> {
        let insts = &self.k.insts;
        while self.pc < insts.len() {
            self.steps += 1;
            if self.steps > 200_000_000 {
                return Err("runaway loop".into());
            }
            let inst = &insts[self.pc];
            self.pc += 1;
            if let Some((p, neg)) = inst.pred
                && (self.get(p)? != 0) == neg
            {
                continue;
            }
            match self.exec(inst, mem, alias, shared) {
                Ok(Flow::Next) => {}
                Ok(Flow::Jump(l)) => self.pc = l,
                Ok(Flow::Ret) => return Ok(false),
                Ok(Flow::Barrier) => return Ok(true),
                Err(e) => {
                    return Err(format!(
                        "{e} at `{}` (block {}, thread {})",
                        inst.text, self.ctaid, self.tid
                    ));
                }
            }
        }
        Ok(false)
    }

    /// Resolves a shared address to a byte offset, checking bounds and alignment.
    fn shared_addr(&self, o: &Opd, size: usize, shared: &[u8]) -> Result<usize, String> {
        let Opd::Mem(r, off) = *o else {
            return Err(format!("{o:?} is not an address"));
        };
        let a = self.get(r)?.wrapping_add(off as u64);
        let at = a.wrapping_sub(SHARED_BASE) as usize;
        if a < SHARED_BASE || !at.is_multiple_of(size) || at + size > shared.len() {
            return Err(format!(
                "shared access of {size} bytes at {a:#x} ({} bytes of shared memory)",
                shared.len()
            ));
        }
        Ok(at)
    }
}

/// Buffer `i` of the kernel's memory lives at `(i + 1) << 40`.
const BUF_SHIFT: u32 = 40;

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}

/// Type width and kind: (bits, 's' | 'u' | 'b' | 'f' | 'p').
fn ty(t: &str) -> Result<(u32, char), String> {
    let kind = t.chars().next().ok_or("empty type")?;
    if t == "pred" {
        return Ok((1, 'p'));
    }
    if t == "bf16" {
        return Ok((16, 'b'));
    }
    let bits: u32 = t[1..].parse().map_err(|_| format!("bad type {t}"))?;
    Ok((bits, kind))
}

fn f32v(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn f64v(v: u64) -> f64 {
    f64::from_bits(v)
}

impl Thread<'_> {
    fn get(&self, r: usize) -> Result<u64, String> {
        self.regs[r].ok_or_else(|| format!("{} read before it is written", self.k.names[r]))
    }

    fn val(&self, o: &Opd) -> Result<u64, String> {
        Ok(match *o {
            Opd::Reg(r) => self.get(r)?,
            Opd::Imm(v) => v,
            Opd::Special(s) => u64::from(match s {
                Special::Ctaid => self.ctaid,
                Special::Ntid => self.block,
                Special::Tid => self.tid,
                Special::Nctaid => self.grid,
            }),
            Opd::Param(i) => ((i as u64) + 1) << BUF_SHIFT,
            Opd::Var(k) => self.vars[k] as u64,
            ref other => return Err(format!("{other:?} is not a value")),
        })
    }

    fn set(&mut self, o: &Opd, v: u64) -> Result<(), String> {
        match *o {
            Opd::Reg(r) => {
                self.regs[r] = Some(v & mask(self.k.widths[r]));
                Ok(())
            }
            ref other => Err(format!("can't write {other:?}")),
        }
    }

    /// Resolves a global address to (buffer, byte offset), checking bounds and alignment.
    fn addr(
        &self,
        o: &Opd,
        size: usize,
        mem: &[Vec<u8>],
        alias: &[usize],
    ) -> Result<(usize, usize), String> {
        let Opd::Mem(r, off) = *o else {
            return Err(format!("{o:?} is not an address"));
        };
        let a = self.get(r)?.wrapping_add(off as u64);
        let slot = (a >> BUF_SHIFT) as usize;
        if slot == 0 || slot > alias.len() {
            return Err(format!("address {a:#x} is in no buffer"));
        }
        let buf = alias[slot - 1];
        let at = (a & mask(BUF_SHIFT)) as usize;
        if !at.is_multiple_of(size) || at + size > mem[buf].len() {
            return Err(format!(
                "access of {size} bytes at offset {at} of buffer {} ({} bytes)",
                slot - 1,
                mem[buf].len()
            ));
        }
        Ok((buf, at))
    }

    fn exec(
        &mut self,
        inst: &Inst,
        mem: &mut [Vec<u8>],
        alias: &[usize],
        shared: &mut [u8],
    ) -> Result<Flow, String> {
        let op: Vec<&str> = inst.op.iter().map(String::as_str).collect();
        let a = &inst.args;
        let last = *op.last().ok_or("empty opcode")?;
        match op[0] {
            "ret" => return Ok(Flow::Ret),
            "bar" if op.get(1) == Some(&"sync") => return Ok(Flow::Barrier),
            "bra" => match a.first() {
                Some(Opd::Label(l)) => return Ok(Flow::Jump(*l)),
                _ => return Err("bra without a label".into()),
            },
            "mov" | "cvta" => {
                let v = self.val(&a[1])?;
                self.set(&a[0], v)?;
            }
            "ld" => {
                let v = match op[1] {
                    "param" => self.val(&a[1])?,
                    "global" => {
                        let (bits, kind) = ty(last)?;
                        let size = (bits / 8) as usize;
                        let (buf, at) = self.addr(&a[1], size, mem, alias)?;
                        let mut b8 = [0u8; 8];
                        b8[..size].copy_from_slice(&mem[buf][at..at + size]);
                        let raw = u64::from_le_bytes(b8);
                        if kind == 's' {
                            sext(raw, bits) as u64
                        } else {
                            raw
                        }
                    }
                    "shared" => {
                        let (bits, kind) = ty(last)?;
                        let size = (bits / 8) as usize;
                        let at = self.shared_addr(&a[1], size, shared)?;
                        let mut b8 = [0u8; 8];
                        b8[..size].copy_from_slice(&shared[at..at + size]);
                        let raw = u64::from_le_bytes(b8);
                        if kind == 's' {
                            sext(raw, bits) as u64
                        } else {
                            raw
                        }
                    }
                    s => return Err(format!("ld.{s}")),
                };
                self.set(&a[0], v)?;
            }
            "st" if op.get(1) == Some(&"shared") => {
                let (bits, _) = ty(last)?;
                let size = (bits / 8) as usize;
                let v = self.val(&a[1])?;
                let at = self.shared_addr(&a[0], size, shared)?;
                shared[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
            }
            "st" => {
                let (bits, _) = ty(last)?;
                let size = (bits / 8) as usize;
                let v = self.val(&a[1])?;
                let (buf, at) = self.addr(&a[0], size, mem, alias)?;
                mem[buf][at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
            }
            "setp" => {
                let (bits, kind) = ty(last)?;
                let (x, y) = (self.val(&a[1])?, self.val(&a[2])?);
                let r = if kind == 'f' {
                    let (x, y) = if bits == 32 {
                        (f64::from(f32v(x)), f64::from(f32v(y)))
                    } else {
                        (f64v(x), f64v(y))
                    };
                    let nan = x.is_nan() || y.is_nan();
                    match op[1] {
                        "eq" => x == y,
                        "ne" => !nan && x != y,
                        "lt" => x < y,
                        "le" => x <= y,
                        "gt" => x > y,
                        "ge" => x >= y,
                        "neu" => nan || x != y,
                        "nan" => nan,
                        c => return Err(format!("setp.{c} on floats")),
                    }
                } else {
                    let m = mask(bits);
                    let (ux, uy) = (x & m, y & m);
                    let (sx, sy) = (sext(ux, bits), sext(uy, bits));
                    let signed = kind == 's';
                    let ord = if signed { sx.cmp(&sy) } else { ux.cmp(&uy) };
                    match op[1] {
                        "eq" => ux == uy,
                        "ne" => ux != uy,
                        "lt" if kind != 'b' => ord.is_lt(),
                        "le" if kind != 'b' => ord.is_le(),
                        "gt" if kind != 'b' => ord.is_gt(),
                        "ge" if kind != 'b' => ord.is_ge(),
                        c => return Err(format!("setp.{c}.{last}")),
                    }
                };
                self.set(&a[0], u64::from(r))?;
            }
            "selp" => {
                let p = self.val(&a[3])?;
                let v = if p != 0 {
                    self.val(&a[1])?
                } else {
                    self.val(&a[2])?
                };
                self.set(&a[0], v)?;
            }
            "cvt" => {
                let v = self.cvt(&op, self.val(&a[1])?)?;
                self.set(&a[0], v)?;
            }
            _ if last == "pred" => {
                let x = self.val(&a[1])? != 0;
                let y = match a.get(2) {
                    Some(o) => self.val(o)? != 0,
                    None => false,
                };
                let r = match op[0] {
                    "and" => x && y,
                    "or" => x || y,
                    "xor" => x != y,
                    "not" => !x,
                    o => return Err(format!("{o}.pred")),
                };
                self.set(&a[0], u64::from(r))?;
            }
            _ => {
                let (bits, kind) = ty(last)?;
                let srcs: Vec<u64> = a[1..]
                    .iter()
                    .map(|o| self.val(o))
                    .collect::<Result<_, _>>()?;
                let v = if kind == 'f' {
                    if bits == 32 {
                        let f: Vec<f32> = srcs.iter().map(|&x| f32v(x)).collect();
                        u64::from(float_op(op[0], &f)?.to_bits())
                    } else {
                        let f: Vec<f64> = srcs.iter().map(|&x| f64v(x)).collect();
                        float_op(op[0], &f)?.to_bits()
                    }
                } else {
                    int_op(&op, bits, kind, &srcs)?
                };
                self.set(&a[0], v)?;
            }
        }
        Ok(Flow::Next)
    }

    fn cvt(&self, op: &[&str], x: u64) -> Result<u64, String> {
        let (dst, src) = (op[op.len() - 2], op[op.len() - 1]);
        let (db, dk) = ty(dst)?;
        let (sb, sk) = ty(src)?;
        let rnd = if op.len() == 4 { op[1] } else { "" };
        let x = x & mask(sb);
        let as_f64 = |x: u64| -> f64 {
            match (sk, sb) {
                ('f', 16) if src == "bf16" => f64::from(bf16::from_bits(x as u16).to_f32()),
                ('f', 16) => f64::from(f16::from_bits(x as u16).to_f32()),
                ('f', 32) => f64::from(f32v(x)),
                ('f', _) => f64v(x),
                ('s', b) => sext(x, b) as f64,
                (_, _) => x as f64,
            }
        };
        let src_is_bf16 = src == "bf16";
        let dst_is_bf16 = dst == "bf16";
        Ok(match (sk == 'f' || src_is_bf16, dk == 'f' || dst_is_bf16) {
            (false, false) => {
                let wide = if sk == 's' { sext(x, sb) as u64 } else { x };
                wide & mask(db)
            }
            (true, false) => {
                if rnd != "rzi" {
                    return Err(format!("float -> int cvt without .rzi: {op:?}"));
                }
                let f = as_f64(x).trunc();
                let v = if f.is_nan() {
                    0
                } else if dk == 's' {
                    let lo = -(2f64.powi(db as i32 - 1));
                    let hi = 2f64.powi(db as i32 - 1) - 1.0;
                    f.clamp(lo, hi) as i64 as u64
                } else {
                    f.clamp(0.0, 2f64.powi(db as i32) - 1.0) as u64
                };
                v & mask(db)
            }
            (false, true) | (true, true) => {
                // float -> float of the same type with an integer rounding: .rzi truncates,
                // .rni rounds to the nearest integer, ties to even
                let to_int = |v: f64| -> Result<f64, String> {
                    match rnd {
                        "rzi" => Ok(v.trunc()),
                        "rni" => Ok(v.round_ties_even()),
                        "" | "rn" => Ok(v),
                        other => Err(format!("cvt rounding .{other} not emulated: {op:?}")),
                    }
                };
                // One rounding from the exact source value (an f64 holds every source but
                // 64-bit integers above 2^53: convert those straight from the integer).
                let exact_f32 = || -> f32 {
                    match (sk, sb) {
                        ('s', 64) => sext(x, 64) as f32,
                        ('u', 64) => x as f32,
                        ('f', 64) => f64v(x) as f32,
                        _ => as_f64(x) as f32,
                    }
                };
                match (dst, db) {
                    ("f16", _) => u64::from(f16::from_f32(exact_f32()).to_bits()),
                    ("bf16", _) => u64::from(bf16::from_f32(exact_f32()).to_bits()),
                    (_, 32) if rnd == "rzi" || rnd == "rni" => {
                        u64::from((to_int(as_f64(x))? as f32).to_bits())
                    }
                    (_, 32) => u64::from(exact_f32().to_bits()),
                    _ => {
                        let v = match (sk, sb) {
                            ('s', 64) => sext(x, 64) as f64,
                            ('u', 64) => x as f64,
                            _ => as_f64(x),
                        };
                        to_int(v)?.to_bits()
                    }
                }
            }
        })
    }
}

trait Float: Copy + PartialOrd {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn fma(self, b: Self, c: Self) -> Self;
    fn sqrt(self) -> Self;
    fn neg(self) -> Self;
    fn one() -> Self;
    fn nan(self) -> bool;
}

macro_rules! float_impl {
    ($t:ty) => {
        impl Float for $t {
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn fma(self, b: Self, c: Self) -> Self {
                self.mul_add(b, c)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn neg(self) -> Self {
                -self
            }
            fn one() -> Self {
                1.0
            }
            fn nan(self) -> bool {
                self.is_nan()
            }
        }
    };
}
float_impl!(f32);
float_impl!(f64);

fn float_op<F: Float>(op: &str, s: &[F]) -> Result<F, String> {
    let (a, b) = (s[0], *s.get(1).unwrap_or(&s[0]));
    Ok(match op {
        "add" => a.add(b),
        "sub" => a.sub(b),
        "mul" => a.mul(b),
        "div" => a.div(b),
        "fma" => a.fma(b, s[2]),
        "sqrt" => a.sqrt(),
        "rcp" => F::one().div(a),
        "neg" => a.neg(),
        // PTX max/min: a NaN operand yields the other operand.
        "max" | "min" => {
            if a.nan() {
                b
            } else if b.nan() || (op == "max") == (a > b) {
                a
            } else {
                b
            }
        }
        o => return Err(format!("{o} on floats")),
    })
}

fn int_op(op: &[&str], bits: u32, kind: char, s: &[u64]) -> Result<u64, String> {
    let m = mask(bits);
    let (a, b) = (s[0] & m, s.get(1).map_or(0, |b| b & m));
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let signed = kind == 's';
    let v = match op[0] {
        "add" => a.wrapping_add(b),
        "sub" => a.wrapping_sub(b),
        "mul" if op.get(1) == Some(&"wide") => {
            // mul.wide.u32/s32: 32 x 32 -> 64 bits
            if signed {
                (sa.wrapping_mul(sb)) as u64
            } else {
                a.wrapping_mul(b)
            }
        }
        "mul" => a.wrapping_mul(b),
        "mad" => a.wrapping_mul(b).wrapping_add(s[2] & m),
        "neg" => a.wrapping_neg(),
        "and" => a & b,
        "or" => a | b,
        "xor" => a ^ b,
        "not" => !a,
        "max" if signed => sa.max(sb) as u64,
        "max" => a.max(b),
        "min" if signed => sa.min(sb) as u64,
        "min" => a.min(b),
        "shl" => {
            let n = s[1] & 0xffff_ffff;
            if n >= u64::from(bits) { 0 } else { a << n }
        }
        "shr" => {
            let n = (s[1] & 0xffff_ffff).min(u64::from(bits));
            if signed {
                (sa >> n.min(63)) as u64
            } else if n >= u64::from(bits) {
                0
            } else {
                a >> n
            }
        }
        "div" | "rem" => {
            if b == 0 {
                return Err("integer division by zero (undefined in PTX)".into());
            }
            if signed && sb == -1 && sa == sext(1u64 << (bits - 1), bits) {
                return Err("MIN / -1 (undefined in PTX)".into());
            }
            match (op[0], signed) {
                ("div", true) => (sa / sb) as u64,
                ("div", false) => a / b,
                (_, true) => (sa % sb) as u64,
                (_, false) => a % b,
            }
        }
        o => return Err(format!("{o}.{}", op[op.len() - 1])),
    };
    Ok(if op[0] == "mul" && op.get(1) == Some(&"wide") {
        v
    } else {
        v & m
    })
}
