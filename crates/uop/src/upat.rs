//! Patterns over UOps ([`UPat`]) and the op-indexed [`PatternMatcher`].
//!
//! A rule is a pattern plus a rewrite closure; the [`rules!`](crate::rules) macro writes one rule
//! per line, in the spirit of tinygrad's `(UPat.var("x") + 0, lambda x: x)`:
//! ```
//! use tinygrad_uop::{rules, PatternMatcher, UOp, UPat};
//! let pm: PatternMatcher = PatternMatcher::new(rules![
//!     UPat::var("x") + 0 => |x| x.clone(),
//!     UPat::var("x") * 1 => |x| x.clone(),
//! ]);
//! let x = UOp::variable("x", 0, 10);
//! assert_eq!(pm.rewrite(&(&x + 0), &mut ()), Some(x));
//! ```

use std::fmt;
use std::ops::{Add, BitAnd, BitOr, BitXor, Mul, Rem};
use std::sync::Arc;

use tinygrad_dtype::{ConstValue, DType};

use crate::{Arg, NUM_OPS, Ops, UOp};

/// How a pattern matches a node's sources.
#[derive(Clone, Debug)]
enum SrcPat {
    /// Any sources.
    Any,
    /// Exactly these, in order.
    Seq(Vec<UPat>),
    /// Exactly these, in any order (for commutative ops).
    Perm(Vec<UPat>),
    /// Any number of sources, each matching this pattern.
    Repeat(UPat),
    /// At least these, in order; more sources may follow.
    Prefix(Vec<UPat>),
}

/// How a pattern matches a node's argument.
#[derive(Clone, Debug)]
enum ArgPat {
    Any,
    Exact(Arg),
    /// A constant numerically equal to this one (`0` matches `0.0`, `0u64`, `false`).
    ConstEq(ConstValue),
}

/// A custom predicate on a node.
type Pred = Arc<dyn Fn(&UOp) -> bool + Send + Sync>;

#[derive(Clone)]
struct UPatInner {
    ops: Option<Vec<Ops>>,
    dtypes: Option<Vec<DType>>,
    src: SrcPat,
    arg: ArgPat,
    name: Option<&'static str>,
    pred: Option<Pred>,
}

/// A pattern over a UOp: which ops, dtypes, sources and argument it accepts, and under which
/// name to capture the node. Cheap to clone.
#[derive(Clone)]
pub struct UPat(Arc<UPatInner>);

impl fmt::Debug for UPat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.0;
        write!(f, "UPat(")?;
        match &p.ops {
            Some(ops) if ops.len() == 1 => write!(f, "{}", ops[0])?,
            Some(ops) => write!(f, "{ops:?}")?,
            None => write!(f, "*")?,
        }
        if let Some(n) = p.name {
            write!(f, " as {n}")?;
        }
        match &p.src {
            SrcPat::Any => {}
            SrcPat::Seq(s) | SrcPat::Perm(s) | SrcPat::Prefix(s) => write!(f, " {s:?}")?,
            SrcPat::Repeat(r) => write!(f, " [{r:?}...]")?,
        }
        write!(f, ")")
    }
}

impl UPat {
    fn from_inner(i: UPatInner) -> UPat {
        UPat(Arc::new(i))
    }

    fn edit(self, f: impl FnOnce(&mut UPatInner)) -> UPat {
        let mut inner = Arc::unwrap_or_clone(self.0);
        f(&mut inner);
        UPat(Arc::new(inner))
    }

    /// Matches any node.
    pub fn any() -> UPat {
        UPat::from_inner(UPatInner {
            ops: None,
            dtypes: None,
            src: SrcPat::Any,
            arg: ArgPat::Any,
            name: None,
            pred: None,
        })
    }

    /// Matches any node and captures it as `name`.
    pub fn var(name: &'static str) -> UPat {
        UPat::any().named(name)
    }

    /// Matches any constant and captures it as `name`.
    pub fn cvar(name: &'static str) -> UPat {
        UPat::op(Ops::Const).named(name)
    }

    /// Matches a constant numerically equal to `v`.
    pub fn cnst(v: impl Into<ConstValue>) -> UPat {
        let v = v.into();
        UPat::op(Ops::Const).edit(|p| p.arg = ArgPat::ConstEq(v))
    }

    /// Matches nodes with op `op`.
    pub fn op(op: Ops) -> UPat {
        UPat::any().edit(|p| p.ops = Some(vec![op]))
    }

    /// Matches nodes with any of `ops`.
    pub fn ops(ops: &[Ops]) -> UPat {
        UPat::any().edit(|p| p.ops = Some(ops.to_vec()))
    }

    /// Matches `op` applied to exactly `src` (in order; any order if `op` is commutative).
    pub fn alu(op: Ops, src: Vec<UPat>) -> UPat {
        if op.is_commutative() {
            UPat::op(op).src_perm(src)
        } else {
            UPat::op(op).src(src)
        }
    }

    /// Captures the matched node as `name`. A name used twice in one pattern must bind the same
    /// node both times (`x + x`).
    pub fn named(self, name: &'static str) -> UPat {
        self.edit(|p| p.name = Some(name))
    }

    /// Requires exactly these sources, in order.
    pub fn src(self, src: Vec<UPat>) -> UPat {
        self.edit(|p| p.src = SrcPat::Seq(src))
    }

    /// Requires exactly these sources, in any order.
    pub fn src_perm(self, src: Vec<UPat>) -> UPat {
        self.edit(|p| p.src = SrcPat::Perm(src))
    }

    /// Requires every source (any number) to match `pat`.
    pub fn src_repeat(self, pat: UPat) -> UPat {
        self.edit(|p| p.src = SrcPat::Repeat(pat))
    }

    /// Requires the first sources to match `src`; further sources are allowed.
    pub fn src_prefix(self, src: Vec<UPat>) -> UPat {
        self.edit(|p| p.src = SrcPat::Prefix(src))
    }

    /// Requires dtype `dt` (exactly, or as the scalar of a vector).
    pub fn dtype(self, dt: DType) -> UPat {
        self.edit(|p| p.dtypes = Some(vec![dt]))
    }

    /// Requires one of `dts`.
    pub fn dtypes(self, dts: &[DType]) -> UPat {
        self.edit(|p| p.dtypes = Some(dts.to_vec()))
    }

    /// Requires argument `arg`.
    pub fn arg(self, arg: Arg) -> UPat {
        self.edit(|p| p.arg = ArgPat::Exact(arg))
    }

    /// Requires `pred(node)` to hold.
    pub fn pred(self, pred: impl Fn(&UOp) -> bool + Send + Sync + 'static) -> UPat {
        self.edit(|p| p.pred = Some(Arc::new(pred)))
    }

    /// `self op other` (sources in any order when `op` is commutative).
    pub fn bin(self, op: Ops, other: impl IntoUPat) -> UPat {
        UPat::alu(op, vec![self, other.into_upat()])
    }

    /// `self < other`.
    pub fn lt(self, other: impl IntoUPat) -> UPat {
        self.bin(Ops::CmpLt, other)
    }

    /// `self != other`.
    pub fn ne(self, other: impl IntoUPat) -> UPat {
        self.bin(Ops::CmpNe, other)
    }

    /// `self == other` (the `CmpEq` op).
    pub fn eq(self, other: impl IntoUPat) -> UPat {
        self.bin(Ops::CmpEq, other)
    }

    /// `max(self, other)`.
    pub fn max(self, other: impl IntoUPat) -> UPat {
        self.bin(Ops::Max, other)
    }

    /// `self // other` (truncating).
    pub fn idiv(self, other: impl IntoUPat) -> UPat {
        self.bin(Ops::IDiv, other)
    }

    /// `self.where(t, f)`: a `Where` with `self` as the condition.
    pub fn where_(self, t: impl IntoUPat, f: impl IntoUPat) -> UPat {
        UPat::op(Ops::Where).src(vec![self, t.into_upat(), f.into_upat()])
    }

    /// `Cast` of `self` (to any dtype unless restricted with [`Self::dtype`]).
    pub fn cast(self) -> UPat {
        UPat::op(Ops::Cast).src(vec![self])
    }

    /// A cheap necessary condition for a match: ops, dtypes, arguments and source structure,
    /// ignoring captures and predicates. Allocation-free; used to skip rules quickly.
    pub fn may_match(&self, u: &UOp) -> bool {
        let p = &*self.0;
        if let Some(ops) = &p.ops
            && !ops.contains(&u.op())
        {
            return false;
        }
        if let Some(dts) = &p.dtypes
            && !dts
                .iter()
                .any(|d| *d == u.dtype() || *d == u.dtype().scalar())
        {
            return false;
        }
        match &p.arg {
            ArgPat::Any => {}
            ArgPat::Exact(a) => {
                if a != u.arg() {
                    return false;
                }
            }
            ArgPat::ConstEq(c) => match u.arg() {
                Arg::Const(v) if const_num_eq(c, v) => {}
                _ => return false,
            },
        }
        let src = u.src();
        match &p.src {
            SrcPat::Any => true,
            SrcPat::Seq(ps) => {
                ps.len() == src.len() && ps.iter().zip(src).all(|(p, s)| p.may_match(s))
            }
            SrcPat::Prefix(ps) => {
                ps.len() <= src.len() && ps.iter().zip(src).all(|(p, s)| p.may_match(s))
            }
            SrcPat::Repeat(rp) => src.iter().all(|s| rp.may_match(s)),
            SrcPat::Perm(ps) => {
                if ps.len() != src.len() {
                    return false;
                }
                match ps.len() {
                    0 => true,
                    1 => ps[0].may_match(&src[0]),
                    2 => {
                        (ps[0].may_match(&src[0]) && ps[1].may_match(&src[1]))
                            || (ps[0].may_match(&src[1]) && ps[1].may_match(&src[0]))
                    }
                    // every pattern must match some source
                    _ => ps.iter().all(|p| src.iter().any(|s| p.may_match(s))),
                }
            }
        }
    }

    /// Tries to match `u`, returning the captures of the first consistent match.
    pub fn match_first(&self, u: &UOp) -> Option<Captures> {
        let mut out = Vec::new();
        self.match_all(u, Captures::default(), &mut out);
        out.into_iter().next()
    }

    /// All consistent matches of `u` (several when commutative sources match both ways).
    fn match_all(&self, u: &UOp, caps: Captures, out: &mut Vec<Captures>) {
        let p = &*self.0;
        if let Some(ops) = &p.ops
            && !ops.contains(&u.op())
        {
            return;
        }
        if let Some(dts) = &p.dtypes
            && !dts
                .iter()
                .any(|d| *d == u.dtype() || *d == u.dtype().scalar())
        {
            return;
        }
        match &p.arg {
            ArgPat::Any => {}
            ArgPat::Exact(a) => {
                if a != u.arg() {
                    return;
                }
            }
            ArgPat::ConstEq(c) => match u.arg() {
                Arg::Const(v) if const_num_eq(c, v) => {}
                _ => return,
            },
        }
        if let Some(pred) = &p.pred
            && !pred(u)
        {
            return;
        }
        let mut caps = caps;
        if let Some(name) = p.name {
            match caps.get_opt(name) {
                Some(prev) if prev != u => return,
                Some(_) => {}
                None => caps.push(name, u.clone()),
            }
        }
        match &p.src {
            SrcPat::Any => out.push(caps),
            SrcPat::Seq(ps) => {
                if ps.len() == u.src().len() {
                    match_seq(ps, u.src(), caps, out);
                }
            }
            SrcPat::Prefix(ps) => {
                if ps.len() <= u.src().len() {
                    match_seq(ps, &u.src()[..ps.len()], caps, out);
                }
            }
            SrcPat::Perm(ps) => {
                if ps.len() != u.src().len() {
                    return;
                }
                if ps.len() == 2 {
                    let s = u.src();
                    match_seq(ps, [&s[0], &s[1]], caps.clone(), out);
                    match_seq(ps, [&s[1], &s[0]], caps, out);
                    return;
                }
                for perm in permutations(ps.len()) {
                    match_seq(ps, perm.iter().map(|&i| &u.src()[i]), caps.clone(), out);
                }
            }
            SrcPat::Repeat(rp) => {
                let ps = vec![rp.clone(); u.src().len()];
                match_seq(&ps, u.src(), caps, out);
            }
        }
    }

    /// The ops this pattern can match (`None`: any op).
    fn root_ops(&self) -> Option<&[Ops]> {
        self.0.ops.as_deref()
    }
}

fn const_num_eq(a: &ConstValue, b: &ConstValue) -> bool {
    match (a, b) {
        (ConstValue::Float(_), _) | (_, ConstValue::Float(_)) => a.as_f64() == b.as_f64(),
        _ => a.as_i64() == b.as_i64() && a.as_bool() == b.as_bool(),
    }
}

fn match_seq<'a>(
    ps: &[UPat],
    us: impl IntoIterator<Item = &'a UOp>,
    caps: Captures,
    out: &mut Vec<Captures>,
) {
    let mut states = vec![caps];
    for (p, u) in ps.iter().zip(us) {
        let mut next = Vec::new();
        for c in states {
            p.match_all(u, c, &mut next);
        }
        if next.is_empty() {
            return;
        }
        states = next;
    }
    out.extend(states);
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n <= 1 {
        return vec![(0..n).collect()];
    }
    let mut out = Vec::new();
    for first in 0..n {
        for mut rest in permutations(n - 1) {
            for r in rest.iter_mut() {
                if *r >= first {
                    *r += 1;
                }
            }
            rest.insert(0, first);
            out.push(rest);
        }
    }
    out
}

/// Named captures of a match.
#[derive(Clone, Default, Debug)]
pub struct Captures(Vec<(&'static str, UOp)>);

impl Captures {
    fn push(&mut self, name: &'static str, u: UOp) {
        self.0.push((name, u));
    }

    /// The node captured as `name`, if any.
    pub fn get_opt(&self, name: &str) -> Option<&UOp> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, u)| u)
    }

    /// The node captured as `name`.
    ///
    /// # Panics
    /// If the pattern has no capture of that name (a bug in the rule).
    pub fn get(&self, name: &str) -> &UOp {
        self.get_opt(name).unwrap_or_else(|| {
            let have: Vec<&str> = self.0.iter().map(|(n, _)| *n).collect();
            panic!("rule asks for capture {name:?}, pattern captured {have:?}")
        })
    }
}

/// Conversion of a rule body's value into a rewrite result.
pub trait IntoRewrite {
    /// `Some(new)` to replace the node, `None` to leave it.
    fn into_rewrite(self) -> Option<UOp>;
}

impl IntoRewrite for UOp {
    fn into_rewrite(self) -> Option<UOp> {
        Some(self)
    }
}

impl IntoRewrite for Option<UOp> {
    fn into_rewrite(self) -> Option<UOp> {
        self
    }
}

/// Things usable as a pattern operand: a pattern, or a Rust number (a constant pattern).
pub trait IntoUPat {
    /// The pattern.
    fn into_upat(self) -> UPat;
}

impl IntoUPat for UPat {
    fn into_upat(self) -> UPat {
        self
    }
}

impl IntoUPat for &UPat {
    fn into_upat(self) -> UPat {
        self.clone()
    }
}

macro_rules! upat_const_operand {
    ($($t:ty),*) => {$(
        impl IntoUPat for $t {
            fn into_upat(self) -> UPat { UPat::cnst(self) }
        }
    )*};
}
upat_const_operand!(i32, i64, u64, f64, bool);

macro_rules! upat_binop {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl<T: IntoUPat> $tr<T> for UPat {
            type Output = UPat;
            fn $m(self, rhs: T) -> UPat { self.bin(Ops::$op, rhs) }
        }
    )*};
}
upat_binop!(Add add Add, Mul mul Mul, Rem rem Mod, BitAnd bitand And, BitOr bitor Or,
    BitXor bitxor Xor);

/// A rewrite closure: given the captures and the pass context, maybe a replacement.
pub type RewriteFn<C> = Arc<dyn Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync>;

/// One rewrite rule: a pattern, a name (for error messages) and a closure.
pub struct Rule<C = ()> {
    /// The pattern.
    pub pat: UPat,
    /// Where the rule comes from (source text or location), for diagnostics.
    pub name: String,
    f: RewriteFn<C>,
}

impl<C> Clone for Rule<C> {
    fn clone(&self) -> Self {
        Rule {
            pat: self.pat.clone(),
            name: self.name.clone(),
            f: self.f.clone(),
        }
    }
}

impl<C> Rule<C> {
    /// A rule from its parts.
    pub fn new(
        pat: UPat,
        name: impl Into<String>,
        f: impl Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync + 'static,
    ) -> Rule<C> {
        Rule {
            pat,
            name: name.into(),
            f: Arc::new(f),
        }
    }
}

/// Rules indexed by the op of their pattern's root, so a node is only tried against rules that
/// can match its op. `C` is the context passed to every rule (`()` for none).
pub struct PatternMatcher<C = ()> {
    rules: Vec<Rule<C>>,
    by_op: Vec<Vec<usize>>,
}

impl<C> Clone for PatternMatcher<C> {
    fn clone(&self) -> Self {
        PatternMatcher {
            rules: self.rules.clone(),
            by_op: self.by_op.clone(),
        }
    }
}

impl<C> PatternMatcher<C> {
    /// A matcher over `rules`, tried in order.
    pub fn new(rules: Vec<Rule<C>>) -> PatternMatcher<C> {
        let mut by_op = vec![Vec::new(); NUM_OPS];
        for (i, r) in rules.iter().enumerate() {
            match r.pat.root_ops() {
                Some(ops) => {
                    for op in ops {
                        by_op[*op as usize].push(i);
                    }
                }
                None => by_op.iter_mut().for_each(|v| v.push(i)),
            }
        }
        PatternMatcher { rules, by_op }
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule<C>] {
        &self.rules
    }

    /// Applies the first rule that matches `u` and returns a replacement, if any.
    pub fn rewrite(&self, u: &UOp, ctx: &mut C) -> Option<UOp> {
        self.rewrite_with_rule(u, ctx).map(|(r, _)| r)
    }

    /// Like [`Self::rewrite`], also returning the index of the rule that fired.
    pub fn rewrite_with_rule(&self, u: &UOp, ctx: &mut C) -> Option<(UOp, usize)> {
        for &i in &self.by_op[u.op() as usize] {
            let rule = &self.rules[i];
            if !rule.pat.may_match(u) {
                continue;
            }
            let mut matches = Vec::new();
            rule.pat.match_all(u, Captures::default(), &mut matches);
            for caps in matches {
                if let Some(r) = (rule.f)(&caps, ctx)
                    && r != *u
                {
                    return Some((r, i));
                }
            }
        }
        None
    }

    /// `self`'s rules followed by `other`'s.
    pub fn merged(&self, other: &PatternMatcher<C>) -> PatternMatcher<C> {
        let mut rules = self.rules.clone();
        rules.extend(other.rules.iter().cloned());
        PatternMatcher::new(rules)
    }
}

impl<C> Add for &PatternMatcher<C> {
    type Output = PatternMatcher<C>;
    fn add(self, rhs: Self) -> PatternMatcher<C> {
        self.merged(rhs)
    }
}

impl<C> Add for PatternMatcher<C> {
    type Output = PatternMatcher<C>;
    fn add(self, rhs: Self) -> PatternMatcher<C> {
        self.merged(&rhs)
    }
}

/// Writes a list of [`Rule`]s, one per line: `pattern => |captures...| body`.
///
/// The body may return a `UOp` or an `Option<UOp>`. Each capture is bound as `&UOp`. To use the
/// pass context, write `pattern => @ctx |captures...| body` (`ctx` is then `&mut C`).
#[macro_export]
macro_rules! rules {
    ($( $pat:expr => $(@$ctx:ident)? |$($cap:ident),*| $body:expr ),* $(,)?) => {
        vec![$(
            $crate::Rule::new(
                $pat,
                concat!(stringify!($pat), " @ ", file!(), ":", line!()),
                move |_caps: &$crate::Captures, _ctx| {
                    $(#[allow(unused_variables)] let $ctx = _ctx;)?
                    $(#[allow(unused_variables)] let $cap = _caps.get(stringify!($cap));)*
                    $crate::IntoRewrite::into_rewrite($body)
                },
            )
        ),*]
    };
}
