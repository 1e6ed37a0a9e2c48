//! Core IR behaviour: hash-consing, freeing, toposort, substitute, matcher, graph_rewrite.

use std::collections::HashMap;

use tinygrad_uop::{
    Arg, DType, Ops, PatternMatcher, UOp, UPat, graph_rewrite, interned_count, rules,
    try_graph_rewrite_limit,
};

#[test]
fn structurally_equal_nodes_are_one_allocation() {
    let x = UOp::variable("x", 0, 10);
    let a = &x + 1;
    let b = &UOp::variable("x", 0, 10) + 1;
    assert_eq!(a, b);
    assert!(std::ptr::eq(a.node(), b.node()));
    assert_ne!(&x + 2, a);
    assert_eq!(a.structural_hash(), b.structural_hash());
}

#[test]
fn interner_shrinks_back_after_a_million_nodes() {
    // Other tests run in parallel and intern nodes too; the chain below is unique to this test,
    // so measure its own entries via a distinct variable name.
    let before = interned_count();
    {
        let mut chain = UOp::variable("million_chain_var", 0, 1);
        for i in 0..1_000_000i64 {
            chain = &chain + i;
        }
        assert!(interned_count() >= before + 1_000_000);
        // dropping a million-deep chain must not overflow the stack
    }
    let after = interned_count();
    assert!(
        after < before + 1000,
        "interner did not shrink: before {before}, after {after}"
    );
}

#[test]
fn toposort_lists_sources_first_and_shared_nodes_once() {
    let x = UOp::variable("tx", 0, 10);
    let y = &x * 2;
    let z = &y + &y;
    let order = z.toposort();
    assert_eq!(order.len(), 4); // x, const 2, mul, add
    let pos = |n: &UOp| order.iter().position(|m| m == n).unwrap();
    assert!(pos(&x) < pos(&y) && pos(&y) < pos(&z));
    assert_eq!(order.last(), Some(&z));
}

/// The ancestry flags set at construction: a `Buffer` (or `Copy`) anywhere below a node, seen
/// without walking the graph.
#[test]
fn ancestry_flags_follow_the_sources() {
    #[derive(Debug)]
    struct Handle;
    impl tinygrad_uop::Opaque for Handle {
        fn id(&self) -> u64 {
            7
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    let buf = UOp::new(
        Ops::Buffer,
        DType::FLOAT32,
        vec![],
        Arg::Buffer(4, std::sync::Arc::new(Handle)),
    );
    let c = UOp::cnst(DType::FLOAT32, 2.0f32);
    assert!(buf.has_buffer() && !buf.has_copy());
    assert!(!c.has_buffer());
    let sum = UOp::new(
        Ops::Add,
        DType::FLOAT32,
        vec![buf.clone(), c.clone()],
        Arg::None,
    );
    assert!(sum.has_buffer());
    let consts = UOp::new(Ops::Mul, DType::FLOAT32, vec![c.clone(), c], Arg::None);
    assert!(!consts.has_buffer());
    let copy = UOp::new(Ops::Copy, DType::FLOAT32, vec![sum], Arg::None);
    assert!(copy.has_copy() && copy.has_buffer());
}

#[test]
fn substitute_replaces_everywhere() {
    let x = UOp::variable("sx", 0, 10);
    let y = UOp::variable("sy", 0, 10);
    let e = (&x + 1) * &x;
    let map = HashMap::from([(x.clone(), y.clone())]);
    assert_eq!(e.substitute(&map), (&y + 1) * &y);
}

#[test]
fn pretty_prints_shared_subgraphs_once() {
    let x = UOp::variable("px", 0, 10);
    let y = &x * 3;
    let z = &y + &y;
    let text = z.pretty();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.contains("DEFINE_VAR"), "{text}");
}

#[test]
fn matcher_commutative_and_named_captures() {
    let pm: PatternMatcher = PatternMatcher::new(rules![
        UPat::var("x") + 0 => |x| x.clone(),
        UPat::var("x") + UPat::var("x") => |x| x * 2,
    ]);
    let x = UOp::variable("mx", 0, 10);
    let zero = UOp::index(0);
    assert_eq!(pm.rewrite(&(&zero + &x), &mut ()), Some(x.clone()));
    assert_eq!(pm.rewrite(&(&x + &x), &mut ()), Some(&x * 2));
    assert_eq!(pm.rewrite(&(&x + 1), &mut ()), None);
}

#[test]
fn matcher_dtype_arg_and_const_value() {
    let pm: PatternMatcher = PatternMatcher::new(rules![
        UPat::var("x").dtype(DType::FLOAT32) * 1.0 => |x| x.clone(),
        UPat::op(Ops::DefineVar).arg(Arg::Var("only".into(), 0, 5)).named("v") => |v| v + 100,
    ]);
    let f = UOp::new(Ops::Load, DType::FLOAT32, vec![], Arg::None);
    assert_eq!(pm.rewrite(&(&f * 1.0), &mut ()), Some(f.clone()));
    let i = UOp::variable("i", 0, 3);
    assert_eq!(
        pm.rewrite(&(&i * 1), &mut ()),
        None,
        "dtype restricted to float32"
    );
    let v = UOp::variable("only", 0, 5);
    assert_eq!(pm.rewrite(&v, &mut ()), Some(&v + 100));
    assert_eq!(pm.rewrite(&UOp::variable("only", 0, 6), &mut ()), None);
}

#[test]
fn graph_rewrite_reaches_fixed_point_and_memoizes() {
    let pm: PatternMatcher<usize> = PatternMatcher::new(rules![
        UPat::var("x") + 0 => @calls |x| { *calls += 1; x.clone() },
    ]);
    let x = UOp::variable("gx", 0, 10);
    // `(x+0)+0`: the inner `x+0` rewrites to x; the outer, rebuilt on x, *is* the inner node
    // (hash-consing), so it is not rewritten again. The product uses it twice (shared).
    let inner = (&x + 0) + 0;
    let e = &inner * &inner;
    let mut calls = 0usize;
    let out = graph_rewrite(&e, &pm, &mut calls, false);
    assert_eq!(out, &x * &x);
    assert_eq!(calls, 1, "each distinct node rewritten once");
    let mut calls2 = 0usize;
    assert_eq!(graph_rewrite(&e, &pm, &mut calls2, true), &x * &x);
}

#[test]
fn composed_matchers_apply_both_rule_sets() {
    let a: PatternMatcher = PatternMatcher::new(rules![UPat::var("x") + 0 => |x| x.clone()]);
    let b: PatternMatcher = PatternMatcher::new(rules![UPat::var("x") * 1 => |x| x.clone()]);
    let both = &a + &b;
    let x = UOp::variable("cx", 0, 10);
    assert_eq!(graph_rewrite(&((&x * 1) + 0), &both, &mut (), false), x);
}

#[test]
fn non_converging_rewrite_names_the_rule() {
    // A variable rewrites to `var + 1`, whose source is the variable again: it never ends.
    let pm: PatternMatcher = PatternMatcher::new(rules![
        UPat::op(Ops::DefineVar).named("x") => |x| x + 1,
    ]);
    let x = UOp::variable("loop", 0, 1);
    let err = try_graph_rewrite_limit(&x, &pm, &mut (), false, 1000).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("did not converge"), "{msg}");
    assert!(msg.contains("UPat::op(Ops::DefineVar)"), "{msg}");
}
