//! [`Arg`]: the non-UOp payload of a node (a constant, a shape, a loop id, ...).

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use tinygrad_dtype::ConstValue;

use crate::{Ops, SInt};

/// What kind of loop a `Range` is (tinygrad's `AxisType`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum AxisKind {
    /// An output axis run as a plain loop.
    Loop,
    /// An output axis mapped to GPU blocks / CPU threads.
    Global,
    /// An output axis mapped to GPU threads within a block.
    Local,
    /// A reduction axis.
    Reduce,
    /// An output axis unrolled into a vector (UPCAST).
    Upcast,
    /// A reduction axis unrolled (UNROLL).
    Unroll,
}

/// A payload owned by a layer above the IR (e.g. a device buffer), compared by identity.
/// The IR never looks inside; it only needs a stable id for hashing/equality and a label.
pub trait Opaque: Any + Send + Sync + fmt::Debug {
    /// A process-unique id; two opaques are equal iff their ids are equal.
    fn id(&self) -> u64;
    /// Upcast for downcasting by the owner.
    fn as_any(&self) -> &dyn Any;
    /// What a comparison of graphs by structure (the schedule cache) must match besides the
    /// payload's place in the graph, e.g. a buffer's device. Empty by default.
    fn class(&self) -> String {
        String::new()
    }
    /// The shape of a `Native` node carrying this payload (the kernel's output). `None` by
    /// default: a payload that is not a native kernel's.
    fn output_shape(&self) -> Option<Vec<usize>> {
        None
    }
}

/// The argument of a UOp. Hash and equality are structural (floats by bits).
#[derive(Clone, Debug, Default)]
pub enum Arg {
    /// No argument.
    #[default]
    None,
    /// A constant (for `Const`).
    Const(ConstValue),
    /// An integer (global slot, vector lane, buffer size).
    Int(i64),
    /// A list of sizes / axes / a permutation.
    Shape(Arc<[usize]>),
    /// A list of pairs (pad before/after, shrink start/end).
    Pairs(Arc<[(usize, usize)]>),
    /// A `Shape` (of a `Reshape` or `Expand`) some of whose sizes are symbolic: the sizes with
    /// variables bound to their values (with unbound variables: their largest values), then the
    /// symbolic sizes. [`Arg::as_shape`] gives the first list, so code that needs numbers reads
    /// the bound shape.
    SymShape(Arc<[usize]>, Arc<[SInt]>),
    /// `Pairs` (of a `Pad` or `Shrink`) some of which are symbolic, as [`Arg::SymShape`].
    SymPairs(Arc<[(usize, usize)]>, Arc<[(SInt, SInt)]>),
    /// A reduction: the op (`Add`, `Mul`, `Max`) and the reduced axes.
    Reduce(Ops, Arc<[usize]>),
    /// The op of a kernel-level `Reduce`.
    Op(Ops),
    /// A loop variable: a kernel-unique id and its kind.
    Range(usize, AxisKind),
    /// A symbolic variable: name and inclusive bounds.
    Var(Arc<str>, i64, i64),
    /// A name (device, special register).
    Str(Arc<str>),
    /// A buffer of `size` elements, identified by a handle owned by an upper layer.
    Buffer(usize, Arc<dyn Opaque>),
    /// A payload owned by an upper layer, compared by identity.
    Opaque(Arc<dyn Opaque>),
}

impl Arg {
    /// A `Shape` argument from a slice.
    pub fn shape(s: &[usize]) -> Arg {
        Arg::Shape(s.into())
    }

    /// A `Pairs` argument from a slice.
    pub fn pairs(p: &[(usize, usize)]) -> Arg {
        Arg::Pairs(p.into())
    }

    /// A `Str` argument.
    pub fn str(s: &str) -> Arg {
        Arg::Str(s.into())
    }

    /// The argument of a `Copy` from device `from` to device `to`: `Str("FROM->TO")`.
    pub fn copy(from: &str, to: &str) -> Arg {
        Arg::Str(format!("{from}->{to}").into())
    }

    /// The source and target devices of a `Copy`'s argument ([`Arg::copy`]).
    pub fn as_copy(&self) -> Option<(&str, &str)> {
        match self {
            Arg::Str(s) => s.split_once("->"),
            _ => None,
        }
    }

    /// The constant, if this is a `Const` argument.
    pub fn as_const(&self) -> Option<ConstValue> {
        match self {
            Arg::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// The list, if this is a `Shape` argument (of a `SymShape`: its numbers).
    pub fn as_shape(&self) -> Option<&[usize]> {
        match self {
            Arg::Shape(s) | Arg::SymShape(s, _) => Some(s),
            _ => None,
        }
    }

    /// The list, if this is a `Pairs` argument (of a `SymPairs`: its numbers).
    pub fn as_pairs(&self) -> Option<&[(usize, usize)]> {
        match self {
            Arg::Pairs(p) | Arg::SymPairs(p, _) => Some(p),
            _ => None,
        }
    }

    /// The sizes of a `Shape` or `SymShape` argument, symbolic where they are.
    pub fn sym_shape(&self) -> Option<Vec<SInt>> {
        match self {
            Arg::Shape(s) => Some(s.iter().map(|&d| SInt::Const(d)).collect()),
            Arg::SymShape(_, s) => Some(s.to_vec()),
            _ => None,
        }
    }

    /// The pairs of a `Pairs` or `SymPairs` argument, symbolic where they are.
    pub fn sym_pairs(&self) -> Option<Vec<(SInt, SInt)>> {
        match self {
            Arg::Pairs(p) => Some(
                p.iter()
                    .map(|&(a, b)| (SInt::Const(a), SInt::Const(b)))
                    .collect(),
            ),
            Arg::SymPairs(_, p) => Some(p.to_vec()),
            _ => None,
        }
    }

    /// A `Shape` argument for `sizes`: `SymShape` when one is symbolic (its numbers are the
    /// sizes' bound values, see [`SInt::bound_value`]).
    pub fn sizes(sizes: &[SInt]) -> Arg {
        if sizes.iter().all(|s| s.as_const().is_some()) {
            return Arg::Shape(
                sizes
                    .iter()
                    .map(|s| s.as_const().expect("constant"))
                    .collect(),
            );
        }
        Arg::SymShape(sizes.iter().map(SInt::bound_value).collect(), sizes.into())
    }

    /// A `Pairs` argument for `pairs`: `SymPairs` when one is symbolic.
    pub fn sym_pairs_of(pairs: &[(SInt, SInt)]) -> Arg {
        if pairs
            .iter()
            .all(|(a, b)| a.as_const().is_some() && b.as_const().is_some())
        {
            return Arg::Pairs(
                pairs
                    .iter()
                    .map(|(a, b)| {
                        (
                            a.as_const().expect("constant"),
                            b.as_const().expect("constant"),
                        )
                    })
                    .collect(),
            );
        }
        Arg::SymPairs(
            pairs
                .iter()
                .map(|(a, b)| (a.bound_value(), b.bound_value()))
                .collect(),
            pairs.into(),
        )
    }

    /// Whether this argument holds symbolic sizes.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, Arg::SymShape(..) | Arg::SymPairs(..))
    }

    /// The integer, if this is an `Int` argument.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Arg::Int(i) => Some(*i),
            _ => None,
        }
    }

    fn discriminant(&self) -> u8 {
        match self {
            Arg::None => 0,
            Arg::Const(_) => 1,
            Arg::Int(_) => 2,
            Arg::Shape(_) => 3,
            Arg::Pairs(_) => 4,
            Arg::Reduce(..) => 5,
            Arg::Op(_) => 6,
            Arg::Range(..) => 7,
            Arg::Var(..) => 8,
            Arg::Str(_) => 9,
            Arg::Opaque(_) => 10,
            Arg::Buffer(..) => 11,
            Arg::SymShape(..) => 12,
            Arg::SymPairs(..) => 13,
        }
    }
}

impl PartialEq for Arg {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Arg::None, Arg::None) => true,
            (Arg::Const(a), Arg::Const(b)) => a == b,
            (Arg::Int(a), Arg::Int(b)) => a == b,
            (Arg::Shape(a), Arg::Shape(b)) => a == b,
            (Arg::Pairs(a), Arg::Pairs(b)) => a == b,
            (Arg::Reduce(o1, a1), Arg::Reduce(o2, a2)) => o1 == o2 && a1 == a2,
            (Arg::Op(a), Arg::Op(b)) => a == b,
            (Arg::Range(i1, k1), Arg::Range(i2, k2)) => i1 == i2 && k1 == k2,
            (Arg::Var(n1, a1, b1), Arg::Var(n2, a2, b2)) => n1 == n2 && a1 == a2 && b1 == b2,
            (Arg::Str(a), Arg::Str(b)) => a == b,
            (Arg::Opaque(a), Arg::Opaque(b)) => a.id() == b.id(),
            (Arg::Buffer(s1, a), Arg::Buffer(s2, b)) => s1 == s2 && a.id() == b.id(),
            (Arg::SymShape(a, x), Arg::SymShape(b, y)) => a == b && x == y,
            (Arg::SymPairs(a, x), Arg::SymPairs(b, y)) => a == b && x == y,
            _ => false,
        }
    }
}

impl Eq for Arg {}

impl Hash for Arg {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.discriminant().hash(state);
        match self {
            Arg::None => {}
            Arg::Const(c) => c.hash(state),
            Arg::Int(i) => i.hash(state),
            Arg::Shape(s) => s.hash(state),
            Arg::Pairs(p) => p.hash(state),
            Arg::Reduce(o, a) => (o, a).hash(state),
            Arg::Op(o) => o.hash(state),
            Arg::Range(i, k) => (i, k).hash(state),
            Arg::Var(n, a, b) => (n, a, b).hash(state),
            Arg::Str(s) => s.hash(state),
            Arg::Opaque(o) => o.id().hash(state),
            Arg::Buffer(s, o) => (s, o.id()).hash(state),
            Arg::SymShape(a, x) => (a, x).hash(state),
            Arg::SymPairs(a, x) => (a, x).hash(state),
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::None => Ok(()),
            Arg::Const(c) => write!(f, "{c}"),
            Arg::Int(i) => write!(f, "{i}"),
            Arg::Shape(s) => write!(f, "{:?}", &s[..]),
            Arg::Pairs(p) => write!(f, "{:?}", &p[..]),
            Arg::Reduce(o, a) => write!(f, "({o}, {:?})", &a[..]),
            Arg::Op(o) => write!(f, "{o}"),
            Arg::Range(i, k) => write!(f, "({i}, {k:?})"),
            Arg::Var(n, a, b) => write!(f, "{n}[{a}-{b}]"),
            Arg::Str(s) => write!(f, "{s:?}"),
            Arg::Opaque(o) => write!(f, "{o:?}"),
            Arg::Buffer(s, o) => write!(f, "<{s} elements, {o:?}>"),
            Arg::SymShape(_, x) => {
                let v: Vec<String> = x.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", v.join(", "))
            }
            Arg::SymPairs(_, x) => {
                let v: Vec<String> = x.iter().map(|(a, b)| format!("({a}, {b})")).collect();
                write!(f, "[{}]", v.join(", "))
            }
        }
    }
}
