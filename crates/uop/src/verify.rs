//! Per-stage spec check (tinygrad's `spec.py`): every node is checked against the contract of
//! its op documented in [`crate::ops`] (number of sources, their dtypes, the argument's
//! variant) and against the ops its stage admits.
//!
//! Stages:
//! - [`Stage::Tensor`]: the tensor graph: buffers, movement ops, `ReduceAxis`, realize markers,
//!   plus the shared ops (`Sink`, `Noop`, `Const`, ALU, `Cast`/`Bitcast`, `DefineVar`, `Bind`,
//!   `Vectorize`, `Gep`).
//! - [`Stage::Kernel`]: a kernel after scheduling: pointers, ranges, `Index`/`Load`/`Store`,
//!   `Reduce`, GPU control flow, plus the shared ops; no movement ops or buffers.
//! - [`Stage::Program`]: a kernel ready to linearize: as `Kernel` without `Reduce`, and no value
//!   of dtype `index` (lowered to `int32`/`int64`).

use std::fmt;

use tinygrad_dtype::{AddrSpace, DType, Scalar};

use crate::{Arg, Ops, UOp};

/// The stage a graph is checked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Stage {
    /// The tensor-level graph.
    Tensor,
    /// A kernel (after scheduling, before codegen lowering).
    Kernel,
    /// A kernel ready to linearize and render.
    Program,
}

/// A node that breaks its op's contract.
#[derive(Clone, Debug)]
pub struct VerifyError {
    /// The stage checked.
    pub stage: Stage,
    /// Position of the node in the graph's topological order.
    pub index: usize,
    /// The node.
    pub node: UOp,
    /// The rule broken, in words.
    pub rule: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = &self.node;
        write!(
            f,
            "{:?} stage: node {} {} {}",
            self.stage,
            self.index,
            u.op(),
            u.dtype()
        )?;
        if !matches!(u.arg(), Arg::None) {
            write!(f, " arg {}", u.arg())?;
        }
        let srcs: Vec<String> = u
            .src()
            .iter()
            .map(|s| format!("{} {}", s.op(), s.dtype()))
            .collect();
        write!(f, " with sources [{}]: {}", srcs.join(", "), self.rule)
    }
}

impl std::error::Error for VerifyError {}

/// Checks every node reachable from `root` against its op's contract for `stage`.
pub fn verify(root: &UOp, stage: Stage) -> Result<(), VerifyError> {
    for (index, u) in root.toposort().into_iter().enumerate() {
        if let Err(rule) = check(&u, stage) {
            return Err(VerifyError {
                stage,
                index,
                node: u,
                rule,
            });
        }
    }
    Ok(())
}

fn admitted(op: Ops, stage: Stage) -> bool {
    use Ops::*;
    let shared = op.is_alu()
        || matches!(
            op,
            Sink | Noop | Const | Cast | Bitcast | DefineVar | Bind | Vectorize | Gep
        );
    let tensor = op.is_movement()
        || matches!(
            op,
            Buffer | Contiguous | ContiguousBackward | Detach | Copy | Assign | ReduceAxis | Native
        );
    let kernel = matches!(
        op,
        DefineGlobal
            | DefineLocal
            | DefineReg
            | Range
            | End
            | Special
            | Index
            | Load
            | Store
            | Reduce
            | Wmma
            | Barrier
            | If
            | EndIf
    );
    shared
        || match stage {
            Stage::Tensor => tensor,
            Stage::Kernel => kernel,
            Stage::Program => kernel && op != Reduce,
        }
}

type Check = Result<(), String>;

fn rule(ok: bool, msg: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(msg()) }
}

fn nsrc(u: &UOp, lo: usize, hi: usize) -> Check {
    let n = u.src().len();
    rule(lo <= n && n <= hi, || {
        if lo == hi {
            format!("takes {lo} source(s), has {n}")
        } else if hi == usize::MAX {
            format!("takes at least {lo} source(s), has {n}")
        } else {
            format!("takes {lo} to {hi} sources, has {n}")
        }
    })
}

fn no_arg(u: &UOp) -> Check {
    rule(matches!(u.arg(), Arg::None), || {
        format!("takes no argument, has {}", u.arg())
    })
}

fn same_dtype(u: &UOp, i: usize) -> Check {
    rule(u.s(i).dtype() == u.dtype(), || {
        format!(
            "source {i} must have the node's dtype {}, has {}",
            u.dtype(),
            u.s(i).dtype()
        )
    })
}

fn value_dtype(dt: DType) -> bool {
    !dt.is_ptr() && dt.kind() != Scalar::Void
}

fn int_dtype(dt: DType) -> bool {
    dt.is_int() && !dt.is_ptr() && dt.count() == 1
}

fn check(u: &UOp, stage: Stage) -> Check {
    let op = u.op();
    rule(admitted(op, stage), || {
        format!("{op} is not allowed at the {stage:?} stage")
    })?;
    if stage == Stage::Program {
        rule(u.dtype().kind() != Scalar::Index, || {
            "the index dtype must be lowered to int32/int64 in programs".to_string()
        })?;
    }
    if op.is_alu() {
        return check_alu(u);
    }
    use Ops::*;
    match op {
        Sink => {
            no_arg(u)?;
            rule(u.dtype() == DType::VOID, || "a sink has dtype void".into())
        }
        Noop if matches!(u.arg(), Arg::Opaque(_)) => {
            // a custom-gradient node: the value, then the inputs its gradient function uses
            nsrc(u, 1, usize::MAX)?;
            same_dtype(u, 0)
        }
        Native => rule(
            matches!(u.arg(), Arg::Opaque(o) if o.output_shape().is_some()),
            || "a native kernel's arg is an opaque payload with an output shape".into(),
        ),
        Noop => {
            nsrc(u, 0, 1)?;
            if u.src().len() == 1 {
                same_dtype(u, 0)
            } else {
                Ok(())
            }
        }
        Const => {
            nsrc(u, 0, 1)?;
            rule(value_dtype(u.dtype()), || {
                "a constant needs a value dtype".into()
            })?;
            let Arg::Const(c) = u.arg() else {
                return Err(format!(
                    "the argument must be a Const value, is {}",
                    u.arg()
                ));
            };
            rule(c.cast(u.dtype().scalar()) == *c, || {
                format!(
                    "the value {c} is not a canonical {} value",
                    u.dtype().scalar()
                )
            })
        }
        Cast | Bitcast => {
            nsrc(u, 1, 1)?;
            no_arg(u)?;
            rule(u.dtype().kind() != Scalar::Void, || {
                "cannot cast to void".into()
            })?;
            if op == Bitcast && !u.dtype().is_ptr() {
                rule(u.dtype().bitsize() == u.s(0).dtype().bitsize(), || {
                    format!(
                        "a bitcast keeps the size: {} -> {}",
                        u.s(0).dtype(),
                        u.dtype()
                    )
                })?;
            }
            Ok(())
        }
        DefineVar => {
            nsrc(u, 0, 0)?;
            rule(int_dtype(u.dtype()), || {
                "a variable has an integer dtype".into()
            })?;
            match u.arg() {
                Arg::Var(_, lo, hi) => rule(lo <= hi, || format!("empty bounds {lo}..={hi}")),
                a => Err(format!("the argument must be Var(name, min, max), is {a}")),
            }
        }
        Bind => {
            nsrc(u, 2, 2)?;
            rule(u.s(0).op() == DefineVar, || {
                "source 0 must be a DEFINE_VAR".into()
            })?;
            rule(u.s(1).op() == Const, || "source 1 must be a CONST".into())?;
            same_dtype(u, 0)?;
            if let (Arg::Var(_, lo, hi), Some(v)) = (u.s(0).arg(), u.s(1).as_int()) {
                rule(*lo <= v && v <= *hi, || {
                    format!("value {v} outside the bounds {lo}..={hi}")
                })?;
            }
            Ok(())
        }
        Vectorize => {
            nsrc(u, 1, usize::MAX)?;
            let s0 = u.s(0).dtype();
            rule(
                u.src().iter().all(|s| s.dtype() == s0 && s0.count() == 1),
                || "sources must be scalars of one dtype".into(),
            )?;
            rule(u.dtype() == s0.vec(u.src().len()), || {
                format!("dtype must be {}", s0.vec(u.src().len()))
            })
        }
        Gep => {
            nsrc(u, 1, 1)?;
            let n = u.s(0).dtype().count() as i64;
            match u.arg() {
                Arg::Int(i) => rule(0 <= *i && *i < n, || format!("lane {i} outside 0..{n}"))?,
                a => return Err(format!("the argument must be Int(lane), is {a}")),
            }
            rule(u.dtype() == u.s(0).dtype().scalar(), || {
                "dtype must be the vector's scalar".into()
            })
        }
        Buffer => {
            nsrc(u, 0, 0)?;
            rule(value_dtype(u.dtype()), || "a buffer holds values".into())?;
            rule(matches!(u.arg(), Arg::Buffer(..)), || {
                format!("the argument must be Buffer, is {}", u.arg())
            })
        }
        Contiguous | ContiguousBackward | Detach => {
            nsrc(u, 1, 1)?;
            same_dtype(u, 0)
        }
        Copy => {
            nsrc(u, 1, 1)?;
            same_dtype(u, 0)?;
            rule(u.arg().as_copy().is_some(), || {
                format!(
                    "the argument must name the devices (\"FROM->TO\"), is {}",
                    u.arg()
                )
            })
        }
        Assign => {
            nsrc(u, 2, 2)?;
            same_dtype(u, 0)?;
            same_dtype(u, 1)
        }
        Reshape | Expand | Permute | Flip | Pad | Shrink => check_movement(u),
        ReduceAxis => {
            nsrc(u, 1, 1)?;
            same_dtype(u, 0)?;
            match u.arg() {
                Arg::Reduce(r, _) => rule(r.is_reduce_op(), || format!("{r} is not a reduce op")),
                a => Err(format!("the argument must be Reduce(op, axes), is {a}")),
            }
        }
        DefineGlobal | DefineLocal | DefineReg => {
            nsrc(u, 0, 0)?;
            let want = match op {
                DefineGlobal => AddrSpace::Global,
                DefineLocal => AddrSpace::Local,
                _ => AddrSpace::Reg,
            };
            rule(u.dtype().addr_space() == Some(want), || {
                format!("dtype must be a {want:?} pointer")
            })?;
            rule(matches!(u.arg(), Arg::Int(i) if *i >= 0), || {
                format!("the argument must be Int(n >= 0), is {}", u.arg())
            })
        }
        Range | Special => {
            nsrc(u, 1, 1)?;
            rule(int_dtype(u.s(0).dtype()), || {
                "the size must be an integer".into()
            })?;
            same_dtype(u, 0)?;
            if op == Range {
                rule(matches!(u.arg(), Arg::Range(..)), || {
                    format!("the argument must be Range(id, kind), is {}", u.arg())
                })
            } else {
                rule(matches!(u.arg(), Arg::Str(_)), || {
                    format!("the argument must be Str(name), is {}", u.arg())
                })
            }
        }
        End | Reduce => {
            nsrc(u, 1, usize::MAX)?;
            rule(u.src()[1..].iter().all(|s| s.op() == Range), || {
                "sources after the first must be RANGEs".into()
            })?;
            if op == Reduce {
                same_dtype(u, 0)?;
                return match u.arg() {
                    Arg::Op(r) => rule(r.is_reduce_op(), || format!("{r} is not a reduce op")),
                    a => Err(format!("the argument must be Op(ADD|MUL|MAX), is {a}")),
                };
            }
            Ok(())
        }
        Index => {
            nsrc(u, 2, 3)?;
            rule(u.s(0).dtype().is_ptr(), || {
                "source 0 must be a pointer".into()
            })?;
            same_dtype(u, 0)?;
            rule(int_dtype(u.s(1).dtype()), || {
                "the index must be an integer".into()
            })?;
            if u.src().len() == 3 {
                rule(u.s(2).dtype() == DType::BOOL, || {
                    "the valid must be bool".into()
                })?;
            }
            Ok(())
        }
        Load => {
            nsrc(u, 1, 2)?;
            rule(u.s(0).dtype().is_ptr(), || {
                "source 0 must be a pointer (an INDEX)".into()
            })?;
            rule(u.dtype() == u.s(0).dtype().base(), || {
                format!("dtype must be {}", u.s(0).dtype().base())
            })?;
            if u.src().len() == 2 {
                same_dtype(u, 1)
            } else {
                Ok(())
            }
        }
        Store => {
            nsrc(u, 2, usize::MAX)?;
            rule(u.dtype() == DType::VOID, || "a store has dtype void".into())?;
            rule(u.s(0).dtype().is_ptr(), || {
                "source 0 must be a pointer (an INDEX)".into()
            })?;
            rule(u.s(1).dtype() == u.s(0).dtype().base(), || {
                format!(
                    "the value must be {}, is {}",
                    u.s(0).dtype().base(),
                    u.s(1).dtype()
                )
            })
        }
        If => {
            nsrc(u, 1, usize::MAX)?;
            rule(u.s(0).dtype() == DType::BOOL, || {
                "the condition must be bool".into()
            })
        }
        EndIf => {
            nsrc(u, 1, 1)?;
            rule(u.s(0).op() == If, || "source 0 must be an IF".into())
        }
        Barrier => rule(u.dtype() == DType::VOID, || {
            "a barrier has dtype void".into()
        }),
        Wmma => nsrc(u, 3, 3),
        _ => Ok(()),
    }
}

/// Checks one ALU node against its op's contract (number of sources, dtypes) without walking
/// the graph below it: for frontends that build ALU nodes from user operands.
///
/// ```
/// use tinygrad_uop::{Ops, UOp, verify::verify_alu};
/// use tinygrad_dtype::DType;
/// let (a, b) = (UOp::cnst(DType::INT32, 1i64), UOp::cnst(DType::FLOAT32, 1.0));
/// assert!(verify_alu(&a.alu(Ops::Add, &[a.clone()])).is_ok());
/// assert!(verify_alu(&a.alu(Ops::Add, &[b])).is_err());
/// ```
///
/// # Errors
/// A message saying which rule the node breaks.
pub fn verify_alu(u: &UOp) -> Result<(), String> {
    check_alu(u)
}

fn check_alu(u: &UOp) -> Check {
    let op = u.op();
    let arity = op.alu_arity().unwrap_or(0);
    nsrc(u, arity, arity)?;
    no_arg(u)?;
    let dt = u.dtype();
    rule(value_dtype(dt), || {
        format!("an ALU result needs a value dtype, has {dt}")
    })?;
    if op.is_comparison() {
        rule(
            dt.kind() == Scalar::Bool && dt.count() == u.s(0).dtype().count(),
            || "a comparison produces bool".into(),
        )?;
        return rule(u.s(0).dtype() == u.s(1).dtype(), || {
            format!(
                "compared sources must have one dtype: {} vs {}",
                u.s(0).dtype(),
                u.s(1).dtype()
            )
        });
    }
    match op {
        Ops::Where => {
            let c = u.s(0).dtype();
            rule(
                c.kind() == Scalar::Bool && (c.count() == 1 || c.count() == dt.count()),
                || format!("the condition of a where must be bool, is {c}"),
            )?;
            same_dtype(u, 1)?;
            same_dtype(u, 2)
        }
        Ops::Shl | Ops::Shr => {
            same_dtype(u, 0)?;
            let s = u.s(1).dtype();
            rule(s == dt || s == DType::UINT32, || {
                format!("the shift amount must be {dt} or uint32, is {s}")
            })
        }
        Ops::Threefry => {
            rule(dt == DType::UINT64, || "threefry produces uint64".into())?;
            same_dtype(u, 0)?;
            same_dtype(u, 1)
        }
        _ => (0..arity).try_for_each(|i| same_dtype(u, i)),
    }
}

fn check_movement(u: &UOp) -> Check {
    nsrc(u, 1, 1)?;
    same_dtype(u, 0)?;
    let op = u.op();
    let src_shape = u.s(0).shape();
    match op {
        Ops::Pad | Ops::Shrink => {
            let Some(pairs) = u.arg().as_pairs() else {
                return Err(format!("the argument must be Pairs, is {}", u.arg()));
            };
            if let Some(s) = &src_shape {
                rule(s.len() == pairs.len(), || {
                    format!("{} pairs for a rank-{} source", pairs.len(), s.len())
                })?;
                if op == Ops::Shrink {
                    for (&(b, e), &d) in pairs.iter().zip(s.iter()) {
                        rule(b <= e && e <= d, || {
                            format!("shrink ({b}, {e}) outside a dimension of {d}")
                        })?;
                    }
                }
            }
            Ok(())
        }
        _ => {
            let Some(arg) = u.arg().as_shape() else {
                return Err(format!("the argument must be Shape, is {}", u.arg()));
            };
            let Some(s) = src_shape else { return Ok(()) };
            match op {
                Ops::Permute => {
                    let mut seen = vec![false; arg.len()];
                    let ok = arg.len() == s.len()
                        && arg
                            .iter()
                            .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
                    rule(ok, || {
                        format!("{arg:?} is not a permutation of a rank-{} shape", s.len())
                    })
                }
                Ops::Flip => rule(arg.iter().all(|&a| a < s.len()), || {
                    format!("flip axes {arg:?} out of rank {}", s.len())
                }),
                Ops::Expand => rule(
                    arg.len() == s.len()
                        && arg.iter().zip(s.iter()).all(|(n, o)| n == o || *o == 1),
                    || format!("cannot expand {:?} to {arg:?}", &s[..]),
                ),
                // a realized tensor of symbolic shape is a view of the first elements of a
                // buffer sized for the variables' largest values
                _ if u.arg().is_symbolic() && u.s(0).op() == Ops::Buffer => rule(
                    arg.iter().product::<usize>() <= s.iter().product::<usize>(),
                    || format!("a view of {arg:?} is larger than its buffer of {}", s[0]),
                ),
                _ => rule(
                    arg.iter().product::<usize>() == s.iter().product::<usize>(),
                    || {
                        format!(
                            "cannot reshape {:?} ({} elements) to {arg:?}",
                            &s[..],
                            s.iter().product::<usize>()
                        )
                    },
                ),
            }
        }
    }
}
