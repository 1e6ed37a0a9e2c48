//! [`Ops`]: every operation of the IR, and the groups tinygrad's `GroupOp` defines.
//!
//! Contracts (`src` = sources, `arg` = [`crate::Arg`]); `verify` checks them per stage.
//!
//! Tensor level:
//! - `Sink`: `src` = outputs, `arg` none, dtype void. Root of any graph.
//! - `Buffer`: no `src`; `arg` = `Buffer` (identity, size, device handle); dtype = element type.
//! - `Const`: no `src` (or one `Device`-like src, unused); `arg` = `Const` value; shape `[]`.
//! - `Contiguous`, `Detach`, `ContiguousBackward`: one `src`, same dtype; realize/grad markers.
//! - `Copy`: one `src`; `arg` = `Str("FROM->TO")`, the source's and the target's devices
//!   (`Arg::copy`, `Arg::as_copy`).
//! - `Assign`: `src` = (target, value); writes value into target's buffer.
//! - `Cast`/`Bitcast`: one `src`; dtype = target dtype.
//! - `Multi`: one `src` per device (a shard, of the shard's shape), all of one dtype; `arg` =
//!   `Int(axis)`, the axis the shards split evenly (`-1`: every shard holds the whole value,
//!   replicated). Its shape is the whole value's. Which device holds which shard is the upper
//!   layer's business (`src[i]` lives on its i-th device).
//! - `Reshape`/`Expand`: one `src`; `arg` = `Shape` (new shape).
//! - `Permute`: one `src`; `arg` = `Shape` (the permutation).
//! - `Pad`/`Shrink`: one `src`; `arg` = `Pairs` ((before, after) padding / (start, end) bounds).
//! - `Flip`: one `src`; `arg` = `Shape` (axes to flip).
//! - `ReduceAxis`: one `src`; `arg` = `Reduce(op, axes)`; reduced axes keep size 1.
//! - `Native`: `src` = inputs; `arg` = `Opaque` payload naming a kernel a device compiles
//!   natively (`Opaque::output_shape` gives its shape). The scheduler realizes each input
//!   into a buffer and runs the payload's kernel on (its new output buffer, the inputs).
//!
//! Kernel level:
//! - `DefineGlobal`: no `src`; `arg` = `Int(slot)`; dtype = pointer to the element type.
//! - `DefineLocal`/`DefineReg`: no `src`; `arg` = `Int(size)`; dtype = local/reg pointer.
//! - `DefineVar`: no `src`; `arg` = `Var(name, min, max)`; dtype index/int. A symbolic variable.
//! - `Range`: `src` = (size,); `arg` = `Range(id, kind)`; dtype index. A loop variable in `0..size`.
//! - `End`: `src` = (value or store, ranges...): closes ranges.
//! - `Special`: `src` = (size,); `arg` = `Str` name (`gidx0`, `lidx1`); a GPU thread/block id.
//! - `Index`: `src` = (buffer pointer, index[, valid]); dtype = the pointer dtype.
//! - `Load`: `src` = (index[, alt value]); dtype = element type.
//! - `Store`: `src` = (index, value[, ranges...]); dtype void.
//! - `Reduce`: `src` = (value, ranges...); `arg` = `Op` (Add, Mul or Max).
//! - `Barrier`, `If`, `EndIf`: control flow for GPU renderers.
//! - `Vectorize`: `src` = scalars; dtype = vector. `Gep`: one vector `src`; `arg` = `Int(lane)`.
//! - `Wmma`: a tensor-core style matrix multiply-accumulate, `src` = (a, b, acc).
//! - `Bind`: `src` = (DefineVar, value); a variable bound to a concrete value.
//! - `Noop`: one `src`, identity (used by rewrites).
//!
//! ALU (all elementwise; dtype = result type):
//! unary `Exp2 Log2 Sin Sqrt Recip Neg Trunc Round` (`Round`: to the nearest integer, ties to
//! even); binary `Add Mul IDiv Mod Max Shl Shr CmpLt CmpNe
//! CmpEq Xor Or And Sub FDiv Pow`; ternary `Where MulAcc`; `Threefry` (binary, uint64 random bits).
//! Comparisons produce `bool`; `IDiv`/`Mod` truncate toward zero (C semantics).

/// An operation of the IR.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs)] // each op's contract is documented at module level
pub enum Ops {
    // graph structure
    Sink,
    Noop,
    // tensor level
    Buffer,
    Const,
    Contiguous,
    ContiguousBackward,
    Detach,
    Copy,
    Assign,
    Cast,
    Bitcast,
    Multi,
    Native,
    // movement
    Reshape,
    Permute,
    Expand,
    Pad,
    Shrink,
    Flip,
    ReduceAxis,
    // kernel level
    DefineGlobal,
    DefineLocal,
    DefineReg,
    DefineVar,
    Bind,
    Range,
    End,
    Special,
    Index,
    Load,
    Store,
    Reduce,
    Barrier,
    If,
    EndIf,
    Vectorize,
    Gep,
    Wmma,
    // unary ALU
    Exp2,
    Log2,
    Sin,
    Sqrt,
    Recip,
    Neg,
    Trunc,
    Round,
    // binary ALU
    Add,
    Mul,
    IDiv,
    Mod,
    Max,
    Shl,
    Shr,
    CmpLt,
    CmpNe,
    CmpEq,
    Xor,
    Or,
    And,
    Sub,
    FDiv,
    Pow,
    Threefry,
    // ternary ALU
    Where,
    MulAcc,
}

/// Number of distinct [`Ops`] (for op-indexed tables).
pub const NUM_OPS: usize = Ops::MulAcc as usize + 1;

impl Ops {
    /// Every op, in declaration order.
    pub const ALL: [Ops; NUM_OPS] = {
        use Ops::*;
        [
            Sink,
            Noop,
            Buffer,
            Const,
            Contiguous,
            ContiguousBackward,
            Detach,
            Copy,
            Assign,
            Cast,
            Bitcast,
            Multi,
            Native,
            Reshape,
            Permute,
            Expand,
            Pad,
            Shrink,
            Flip,
            ReduceAxis,
            DefineGlobal,
            DefineLocal,
            DefineReg,
            DefineVar,
            Bind,
            Range,
            End,
            Special,
            Index,
            Load,
            Store,
            Reduce,
            Barrier,
            If,
            EndIf,
            Vectorize,
            Gep,
            Wmma,
            Exp2,
            Log2,
            Sin,
            Sqrt,
            Recip,
            Neg,
            Trunc,
            Round,
            Add,
            Mul,
            IDiv,
            Mod,
            Max,
            Shl,
            Shr,
            CmpLt,
            CmpNe,
            CmpEq,
            Xor,
            Or,
            And,
            Sub,
            FDiv,
            Pow,
            Threefry,
            Where,
            MulAcc,
        ]
    };

    /// Unary ALU ops: `Exp2 Log2 Sin Sqrt Recip Neg Trunc Round`.
    pub const fn is_unary(self) -> bool {
        use Ops::*;
        matches!(self, Exp2 | Log2 | Sin | Sqrt | Recip | Neg | Trunc | Round)
    }

    /// Binary ALU ops.
    pub const fn is_binary(self) -> bool {
        use Ops::*;
        matches!(
            self,
            Add | Mul
                | IDiv
                | Mod
                | Max
                | Shl
                | Shr
                | CmpLt
                | CmpNe
                | CmpEq
                | Xor
                | Or
                | And
                | Sub
                | FDiv
                | Pow
                | Threefry
        )
    }

    /// Ternary ALU ops: `Where MulAcc`.
    pub const fn is_ternary(self) -> bool {
        matches!(self, Ops::Where | Ops::MulAcc)
    }

    /// All ALU ops (unary, binary, ternary).
    pub const fn is_alu(self) -> bool {
        self.is_unary() || self.is_binary() || self.is_ternary()
    }

    /// Elementwise ops: ALU plus `Cast` and `Bitcast`.
    pub const fn is_elementwise(self) -> bool {
        self.is_alu() || matches!(self, Ops::Cast | Ops::Bitcast)
    }

    /// Movement ops: `Reshape Permute Expand Pad Shrink Flip`.
    pub const fn is_movement(self) -> bool {
        use Ops::*;
        matches!(self, Reshape | Permute | Expand | Pad | Shrink | Flip)
    }

    /// Reduce ops (the ones a `Reduce`/`ReduceAxis` may carry): `Add Mul Max`.
    pub const fn is_reduce_op(self) -> bool {
        matches!(self, Ops::Add | Ops::Mul | Ops::Max)
    }

    /// Commutative binary ops: operands may be swapped.
    pub const fn is_commutative(self) -> bool {
        use Ops::*;
        matches!(self, Add | Mul | Max | CmpNe | CmpEq | Xor | And | Or)
    }

    /// Associative binary ops: `(a op b) op c == a op (b op c)`.
    pub const fn is_associative(self) -> bool {
        use Ops::*;
        matches!(self, Add | Mul | And | Or | Max)
    }

    /// Comparisons, which produce `bool`: `CmpLt CmpNe CmpEq`.
    pub const fn is_comparison(self) -> bool {
        matches!(self, Ops::CmpLt | Ops::CmpNe | Ops::CmpEq)
    }

    /// Ops that act as `Id` when `x op x` is idempotent (`max(x, x) == x`, `x & x == x`).
    pub const fn is_idempotent(self) -> bool {
        matches!(self, Ops::Max | Ops::And | Ops::Or)
    }

    /// The number of sources an ALU op takes (`None` for non-ALU ops).
    pub const fn alu_arity(self) -> Option<usize> {
        if self.is_unary() {
            Some(1)
        } else if self.is_binary() {
            Some(2)
        } else if self.is_ternary() {
            Some(3)
        } else {
            None
        }
    }

    /// A short upper-case name, as tinygrad prints ops (`ADD`, `REDUCE_AXIS`).
    pub fn name(self) -> String {
        let dbg = format!("{self:?}");
        let mut out = String::with_capacity(dbg.len() + 4);
        for (i, c) in dbg.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                let prev = dbg.as_bytes()[i - 1] as char;
                if prev.is_ascii_lowercase() {
                    out.push('_');
                }
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }
}

impl std::fmt::Display for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}
