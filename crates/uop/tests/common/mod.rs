//! Shared helpers for the symbolic tests: variables, an evaluator over UOp graphs, and the
//! random expression trees of the property tests.
#![allow(dead_code)]

use std::collections::HashMap;

use proptest::prelude::*;
use tinygrad_uop::{ConstValue, DType, Ops, UOp, exec_alu};

/// A variable `name` in `lo..=hi`.
pub fn var(name: &str, lo: i64, hi: i64) -> UOp {
    UOp::variable(name, lo, hi)
}

/// A variable `name` of dtype `dt` (an integer type other than `index`) in `lo..=hi`.
pub fn var_of(dt: DType, name: &str, lo: i64, hi: i64) -> UOp {
    UOp::new(
        Ops::DefineVar,
        dt,
        vec![],
        tinygrad_uop::Arg::Var(name.into(), lo, hi),
    )
}

/// `u.simplify()` rendered.
pub fn simp(u: &UOp) -> String {
    u.simplify().to_string()
}

/// Asserts the simplified rendering and the bounds of the simplified node.
#[track_caller]
pub fn check(u: &UOp, vmin: i64, vmax: i64, rendered: &str) {
    let s = u.simplify();
    assert_eq!(s.to_string(), rendered, "simplifying {u}");
    assert_eq!((s.vmin(), s.vmax()), (vmin, vmax), "bounds of {s}");
    exhaustive_equal(u, &s);
}

/// Asserts `"rendered [vmin, vmax]"` of the simplified node and checks it equals the original
/// on every assignment (and that all values lie within their bounds).
#[track_caller]
pub fn t(u: &UOp, expect: &str) {
    let s = u.simplify();
    let got = format!("{s} [{}, {}]", s.vmin(), s.vmax());
    if expect == "?" {
        let loc = std::panic::Location::caller();
        println!("FILL {}:{} {}", loc.file(), loc.line(), got);
    } else {
        assert_eq!(got, expect, "simplifying {u}");
    }
    exhaustive_equal(u, &s);
}

/// The value of every node of `root` under `env` (variables by name), computed with
/// [`exec_alu`].
pub fn eval_all(root: &UOp, env: &HashMap<String, i64>) -> HashMap<UOp, ConstValue> {
    let mut vals: HashMap<UOp, ConstValue> = HashMap::new();
    for n in root.toposort() {
        let v = match n.op() {
            Ops::Const => n.arg().as_const().expect("const arg"),
            Ops::DefineVar => match n.arg() {
                tinygrad_uop::Arg::Var(name, ..) => ConstValue::Int(env[&name.to_string()]),
                _ => unreachable!(),
            },
            Ops::Range | Ops::Special => ConstValue::Int(env[&n.to_string()]),
            Ops::Cast => vals[n.s(0)].cast(n.dtype().scalar()),
            op if op.is_alu() => {
                let srcs: Vec<ConstValue> = n.src().iter().map(|s| vals[s]).collect();
                exec_alu(op, n.dtype(), &srcs)
            }
            op => panic!("eval: unexpected {op} in {root}"),
        };
        vals.insert(n, v);
    }
    vals
}

/// The value of `root` under `env`.
pub fn eval(root: &UOp, env: &HashMap<String, i64>) -> i64 {
    eval_all(root, env)[root].as_i64()
}

/// The variables of `u` with their bounds.
pub fn vars_of(u: &UOp) -> Vec<(String, i64, i64)> {
    let mut out: Vec<(String, i64, i64)> = u
        .toposort()
        .iter()
        .filter_map(|n| match n.arg() {
            tinygrad_uop::Arg::Var(name, lo, hi) if n.op() == Ops::DefineVar => {
                Some((name.to_string(), *lo, *hi))
            }
            _ if matches!(n.op(), Ops::Range | Ops::Special) => {
                Some((n.to_string(), n.vmin(), n.vmax()))
            }
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Checks `a == b` for every assignment of their variables (at most ~20k combinations; larger
/// spaces are sampled on a grid), and that every node's value lies within its bounds.
#[track_caller]
pub fn exhaustive_equal(a: &UOp, b: &UOp) {
    let vars = vars_of(a);
    let total: i128 = vars.iter().map(|v| (v.2 - v.1 + 1) as i128).product();
    let step = |lo: i64, hi: i64| -> i64 {
        if total <= 20_000 {
            1
        } else {
            ((hi - lo) / 12).max(1)
        }
    };
    let mut env: HashMap<String, i64> = vars.iter().map(|v| (v.0.clone(), v.1)).collect();
    loop {
        let va = eval_all(a, &env);
        let vb = eval_all(b, &env);
        assert_eq!(va[a].as_i64(), vb[b].as_i64(), "{a} vs {b} at {env:?}");
        for (n, v) in va.iter().chain(vb.iter()) {
            if n.dtype().is_int() || n.dtype().is_bool() {
                let v = v.as_i64();
                assert!(
                    n.vmin() <= v && v <= n.vmax(),
                    "{n} = {v} outside [{}, {}] at {env:?}",
                    n.vmin(),
                    n.vmax()
                );
            }
        }
        // next assignment
        let mut i = 0;
        loop {
            if i == vars.len() {
                return;
            }
            let (name, lo, hi) = &vars[i];
            let cur = env[name];
            if cur < *hi {
                env.insert(name.clone(), (cur + step(*lo, *hi)).min(*hi));
                break;
            }
            env.insert(name.clone(), *lo);
            i += 1;
        }
    }
}

// ------------------------------------------------------------------------------------------
// random expressions

/// An integer expression over three variables, evaluated independently of the IR.
#[derive(Clone, Debug)]
pub enum E {
    Var(usize),
    Const(i64),
    Add(Box<E>, Box<E>),
    Sub(Box<E>, Box<E>),
    Mul(Box<E>, Box<E>),
    Div(Box<E>, i64),
    Mod(Box<E>, i64),
    Max(Box<E>, Box<E>),
    Min(Box<E>, Box<E>),
    /// `where(a < b, c, d)`
    Where(Box<E>, Box<E>, Box<E>, Box<E>),
    /// `a < b` as 0/1 (`where(a<b, 1, 0)`)
    Lt(Box<E>, Box<E>),
}

pub const NAMES: [&str; 3] = ["x", "y", "z"];

/// Evaluates with C semantics on wrapping 64-bit integers (the `index` dtype).
pub fn eval_e(e: &E, v: &[i64; 3]) -> i64 {
    use E::*;
    match e {
        Var(i) => v[*i],
        Const(c) => *c,
        Add(a, b) => eval_e(a, v).wrapping_add(eval_e(b, v)),
        Sub(a, b) => eval_e(a, v).wrapping_sub(eval_e(b, v)),
        Mul(a, b) => eval_e(a, v).wrapping_mul(eval_e(b, v)),
        Div(a, c) => eval_e(a, v).wrapping_div(*c),
        Mod(a, c) => eval_e(a, v).wrapping_rem(*c),
        Max(a, b) => eval_e(a, v).max(eval_e(b, v)),
        Min(a, b) => eval_e(a, v).min(eval_e(b, v)),
        Where(a, b, c, d) => {
            if eval_e(a, v) < eval_e(b, v) {
                eval_e(c, v)
            } else {
                eval_e(d, v)
            }
        }
        Lt(a, b) => (eval_e(a, v) < eval_e(b, v)) as i64,
    }
}

/// Builds the UOp graph of `e` (variables with the given bounds).
pub fn to_uop(e: &E, b: &[(i64, i64); 3]) -> UOp {
    use E::*;
    match e {
        Var(i) => UOp::variable(NAMES[*i], b[*i].0, b[*i].1),
        Const(c) => UOp::index(*c),
        Add(a, c) => to_uop(a, b) + to_uop(c, b),
        Sub(a, c) => to_uop(a, b) - to_uop(c, b),
        Mul(a, c) => to_uop(a, b) * to_uop(c, b),
        Div(a, c) => to_uop(a, b).idiv(*c),
        Mod(a, c) => to_uop(a, b) % *c,
        Max(a, c) => to_uop(a, b).maximum(to_uop(c, b)),
        Min(a, c) => to_uop(a, b).minimum(to_uop(c, b)),
        Where(p, q, r, s) => to_uop(p, b)
            .lt(to_uop(q, b))
            .where_(to_uop(r, b), to_uop(s, b)),
        Lt(p, q) => to_uop(p, b)
            .lt(to_uop(q, b))
            .where_(UOp::index(1), UOp::index(0)),
    }
}

fn divisor() -> impl Strategy<Value = i64> {
    prop_oneof![2i64..=8, -8i64..=-1, 9i64..=40, Just(1)]
}

/// Random expression trees (depth <= 6, up to ~40 nodes).
pub fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        3 => (0usize..3).prop_map(E::Var),
        2 => (-12i64..=12).prop_map(E::Const),
    ];
    leaf.prop_recursive(6, 40, 4, |inner| {
        let b = || inner.clone().prop_map(Box::new);
        prop_oneof![
            4 => (b(), b()).prop_map(|(a, c)| E::Add(a, c)),
            2 => (b(), b()).prop_map(|(a, c)| E::Sub(a, c)),
            2 => (b(), -9i64..=9).prop_map(|(a, c)| E::Mul(a, Box::new(E::Const(c)))),
            1 => (b(), b()).prop_map(|(a, c)| E::Mul(a, c)),
            3 => (b(), divisor()).prop_map(|(a, c)| E::Div(a, c)),
            3 => (b(), divisor()).prop_map(|(a, c)| E::Mod(a, c)),
            1 => (b(), b()).prop_map(|(a, c)| E::Max(a, c)),
            1 => (b(), b()).prop_map(|(a, c)| E::Min(a, c)),
            1 => (b(), b(), b(), b()).prop_map(|(p, q, r, s)| E::Where(p, q, r, s)),
            1 => (b(), b()).prop_map(|(p, q)| E::Lt(p, q)),
        ]
    })
}

/// Bounds for the three variables: `lo in -20..=20`, width `0..=25`; often non-negative.
pub fn bounds() -> impl Strategy<Value = [(i64, i64); 3]> {
    let one = prop_oneof![
        (0i64..=10, 0i64..=25).prop_map(|(lo, w)| (lo, lo + w)),
        (-20i64..=20, 0i64..=25).prop_map(|(lo, w)| (lo, lo + w)),
    ];
    [one.clone(), one.clone(), one]
}

/// Wide bounds: `lo in -300..=300`, width `0..=1000`.
pub fn wide_bounds() -> impl Strategy<Value = [(i64, i64); 3]> {
    let one = (-300i64..=300, 0i64..=1000).prop_map(|(lo, w)| (lo, lo + w));
    [one.clone(), one.clone(), one]
}

/// Assignments: the all-low and all-high corners, then random points within the bounds.
pub fn assignments(b: &[(i64, i64); 3], seeds: &[[u64; 3]]) -> Vec<[i64; 3]> {
    let mut out = vec![[b[0].0, b[1].0, b[2].0], [b[0].1, b[1].1, b[2].1]];
    for s in seeds {
        out.push(std::array::from_fn(|i| {
            let (lo, hi) = b[i];
            lo + (s[i] % ((hi - lo + 1) as u64)) as i64
        }));
    }
    out
}

/// The environment of an assignment.
pub fn env_of(a: &[i64; 3]) -> HashMap<String, i64> {
    NAMES
        .iter()
        .zip(a)
        .map(|(n, v)| (n.to_string(), *v))
        .collect()
}

/// `DType::INDEX`, re-exported for brevity.
pub const INDEX: DType = DType::INDEX;
