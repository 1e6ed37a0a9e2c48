//! `REF`: a reference device that interprets the linear program directly, one scalar at a time,
//! with the IR's exact semantics (`tinygrad_uop::exec_alu`). Slow and simple on purpose: it is
//! the oracle every other backend is compared against. It keeps transcendentals native (no
//! polynomial decompositions), so it also checks them.

use std::collections::HashMap;
use std::sync::Arc;

use tinygrad_codegen::{Program, TargetCaps};
use tinygrad_dtype::{ConstValue, DType};
use tinygrad_uop::{Arg, Ops, UOp, exec_alu};

use crate::Buffer;
use crate::device::{Device, DeviceError, Kernel};

/// The reference interpreter device.
pub struct RefDevice {
    name: &'static str,
}

impl RefDevice {
    /// The device called `name` (`REF`, `REF:1`).
    pub fn new(name: &'static str) -> RefDevice {
        RefDevice { name }
    }
}

impl Device for RefDevice {
    fn name(&self) -> &'static str {
        self.name
    }

    fn caps(&self) -> TargetCaps {
        TargetCaps {
            transcendentals: true,
            half: true,
            fp8: true,
            fma: false,
        }
    }

    fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError> {
        // "Compiling" checks loop structure and records where each loop ends.
        let mut ends = HashMap::new();
        let mut open = Vec::new();
        for (i, u) in prog.uops.iter().enumerate() {
            match u.op() {
                Ops::Range => open.push(i),
                Ops::End => {
                    let start = open.pop().ok_or_else(|| DeviceError::Compile {
                        kernel: prog.name.clone(),
                        message: format!("End at {i} without Range"),
                    })?;
                    ends.insert(start, i);
                }
                _ => {}
            }
        }
        if !open.is_empty() {
            return Err(DeviceError::Compile {
                kernel: prog.name.clone(),
                message: "unclosed Range".into(),
            });
        }
        // one line per instruction, sources by index: `{u:?}` would print each source's whole
        // sub-graph, exponential in the depth of a DAG (e.g. the 20 rounds of threefry)
        let pos: HashMap<&UOp, usize> = prog.uops.iter().enumerate().map(|(i, u)| (u, i)).collect();
        let source = prog
            .uops
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let srcs: Vec<String> = u
                    .src()
                    .iter()
                    .map(|s| {
                        pos.get(s)
                            .map_or_else(|| format!("{s:?}"), |j| format!("%{j}"))
                    })
                    .collect();
                format!(
                    "%{i} = {} {} ({}) {}",
                    u.op().name(),
                    u.dtype(),
                    srcs.join(", "),
                    u.arg()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(Arc::new(RefKernel {
            prog: prog.clone(),
            ends,
            source,
        }))
    }
}

struct RefKernel {
    prog: Program,
    ends: HashMap<usize, usize>,
    source: String,
}

/// A value during interpretation: a scalar, or an address `(slot or register, element)`.
#[derive(Clone, Copy, Debug)]
enum Val {
    Scalar(ConstValue),
    Addr(Mem, i64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mem {
    Global(usize),
    Reg(usize),
}

impl Kernel for RefKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        crate::device::check_var_values(&self.prog.name, &self.prog.vars, vars);
        let mut mem: Vec<Vec<u8>> = bufs.iter().map(|b| b.to_bytes()).collect();
        let dts: Vec<DType> = bufs.iter().map(|b| b.dtype).collect();
        let mut regs: HashMap<usize, ConstValue> = HashMap::new();
        let mut vals: HashMap<UOp, Val> = HashMap::new();
        let mut counters: HashMap<usize, (i64, i64)> = HashMap::new(); // range pc -> (i, size)
        let uops = &self.prog.uops;
        let mut pc = 0;
        while pc < uops.len() {
            let u = &uops[pc];
            let get = |vals: &HashMap<UOp, Val>, s: &UOp| -> ConstValue {
                match vals.get(s) {
                    Some(Val::Scalar(c)) => *c,
                    _ => s
                        .as_const()
                        .unwrap_or_else(|| panic!("REF: {} used before defined", s.op())),
                }
            };
            match u.op() {
                Ops::Const => {
                    vals.insert(u.clone(), Val::Scalar(u.as_const().expect("const")));
                }
                Ops::DefineGlobal => {
                    let slot = u.arg().as_int().expect("slot") as usize;
                    vals.insert(u.clone(), Val::Addr(Mem::Global(slot), 0));
                }
                Ops::DefineVar => {
                    let Arg::Var(name, _, _) = u.arg() else {
                        panic!("REF: DefineVar without a Var argument")
                    };
                    let k = tinygrad_codegen::program::var_index(&self.prog.vars, name)
                        .expect("the program lists every variable");
                    let v = ConstValue::Int(vars[k]).cast(u.dtype());
                    vals.insert(u.clone(), Val::Scalar(v));
                }
                Ops::DefineReg => {
                    let id = u.arg().as_int().expect("reg id") as usize;
                    vals.insert(u.clone(), Val::Addr(Mem::Reg(id), 0));
                }
                Ops::Range => {
                    let size = get(&vals, u.s(0)).as_i64();
                    let (i, _) = *counters.entry(pc).or_insert((0, size));
                    if i >= size {
                        counters.remove(&pc);
                        pc = self.ends[&pc] + 1;
                        continue;
                    }
                    vals.insert(u.clone(), Val::Scalar(ConstValue::Int(i)));
                }
                Ops::End => {
                    let start = self
                        .ends
                        .iter()
                        .find(|(_, e)| **e == pc)
                        .map(|(s, _)| *s)
                        .expect("matched");
                    let c = counters.get_mut(&start).expect("open loop");
                    c.0 += 1;
                    pc = start;
                    continue;
                }
                Ops::Index => {
                    let Some(Val::Addr(m, _)) = vals.get(u.s(0)).copied() else {
                        panic!("REF: Index of non-pointer")
                    };
                    let idx = get(&vals, u.s(1)).as_i64();
                    let valid = u.src().get(2).is_none_or(|v| get(&vals, v).as_bool());
                    // an invalid address is recorded as element -1 and never touched
                    vals.insert(u.clone(), Val::Addr(m, if valid { idx } else { -1 }));
                }
                Ops::Load => {
                    let Some(Val::Addr(m, i)) = vals.get(u.s(0)).copied() else {
                        panic!("REF: Load of non-address")
                    };
                    let v = match m {
                        Mem::Reg(r) => regs.get(&r).copied().unwrap_or(ConstValue::Int(0)),
                        Mem::Global(_) if i < 0 => ConstValue::Int(0).cast(u.dtype()),
                        Mem::Global(s) => read(&mem[s], dts[s], i as usize),
                    };
                    vals.insert(u.clone(), Val::Scalar(v));
                }
                Ops::Store => {
                    let Some(Val::Addr(m, i)) = vals.get(u.s(0)).copied() else {
                        panic!("REF: Store to non-address")
                    };
                    let v = get(&vals, u.s(1));
                    match m {
                        Mem::Reg(r) => {
                            regs.insert(r, v);
                        }
                        Mem::Global(_) if i < 0 => {}
                        Mem::Global(s) => write(&mut mem[s], dts[s], i as usize, v),
                    }
                }
                Ops::Cast => {
                    let x = get(&vals, u.s(0));
                    vals.insert(u.clone(), Val::Scalar(x.cast(u.dtype())));
                }
                Ops::Bitcast => {
                    let x = get(&vals, u.s(0));
                    let bytes = x.to_le_bytes(u.s(0).dtype());
                    vals.insert(
                        u.clone(),
                        Val::Scalar(ConstValue::from_le_bytes(u.dtype(), &bytes)),
                    );
                }
                op if op.is_alu() => {
                    let srcs: Vec<ConstValue> = u.src().iter().map(|s| get(&vals, s)).collect();
                    vals.insert(u.clone(), Val::Scalar(exec_alu(op, u.dtype(), &srcs)));
                }
                Ops::Sink | Ops::Noop => {}
                op => panic!("REF: can't interpret {op}"),
            }
            pc += 1;
        }
        // Kernels only write slot 0 (the output); inputs are read-only.
        bufs[0].copy_in(&mem[0]);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

fn read(mem: &[u8], dt: DType, i: usize) -> ConstValue {
    let sz = dt.itemsize();
    let bytes = mem.get(i * sz..(i + 1) * sz).unwrap_or_else(|| {
        panic!(
            "REF: out of bounds read of element {i} in a buffer of {} {dt}",
            mem.len() / sz
        )
    });
    ConstValue::from_le_bytes(dt, bytes)
}

fn write(mem: &mut [u8], dt: DType, i: usize, v: ConstValue) {
    let sz = dt.itemsize();
    let n = mem.len() / sz.max(1);
    let dst = mem.get_mut(i * sz..(i + 1) * sz).unwrap_or_else(|| {
        panic!("REF: out of bounds write of element {i} in a buffer of {n} {dt}")
    });
    dst.copy_from_slice(&v.to_le_bytes(dt));
}
