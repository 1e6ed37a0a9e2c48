//! Property tests of the simplifier: random integer expressions over bounded variables (with
//! negative bounds) keep their value under `simplify()`, and every node's value lies within
//! its `vmin..=vmax`.

#![allow(
    clippy::erasing_op,
    clippy::identity_op,
    clippy::neg_multiply,
    clippy::modulo_one
)]

mod common;

use common::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use tinygrad_uop::{PatternMatcher, UOp, UPat, graph_rewrite, rules, sym};

fn seeds() -> impl Strategy<Value = Vec<[u64; 3]>> {
    proptest::collection::vec(any::<[u64; 3]>(), 6)
}

/// Checks that `simplifier(expr)` has `expr`'s value at every assignment.
fn same_value(
    e: &E,
    b: &[(i64, i64); 3],
    s: &[[u64; 3]],
    simplifier: impl Fn(&UOp) -> UOp,
) -> Result<(), TestCaseError> {
    let u = to_uop(e, b);
    let simplified = simplifier(&u);
    for a in assignments(b, s) {
        let want = eval_e(e, &a);
        let got = eval(&simplified, &env_of(&a));
        prop_assert_eq!(want, got, "{} -> {} at {:?}", u, simplified, a);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn simplify_preserves_value(e in expr(), b in bounds(), s in seeds()) {
        same_value(&e, &b, &s, |u| u.simplify())?;
    }

    #[test]
    fn simplify_preserves_value_wide_bounds(e in expr(), b in wide_bounds(), s in seeds()) {
        same_value(&e, &b, &s, |u| u.simplify())?;
    }

    #[test]
    fn every_node_within_bounds(e in expr(), b in bounds(), s in seeds()) {
        let u = to_uop(&e, &b);
        let simplified = u.simplify();
        for a in assignments(&b, &s) {
            let env = env_of(&a);
            for root in [&u, &simplified] {
                for (n, v) in eval_all(root, &env) {
                    let v = v.as_i64();
                    prop_assert!(n.vmin() <= v && v <= n.vmax(),
                        "{} = {} outside [{}, {}] in {} at {:?}", n, v, n.vmin(), n.vmax(), root, a);
                }
            }
        }
    }
}

/// The harness has teeth: a simplifier with one wrong rule (`(x+c)//d -> x//d + c//d`, which
/// ignores carries and negative values) is caught on the same random expressions.
#[test]
fn property_catches_a_wrong_rule() {
    let bad: PatternMatcher = PatternMatcher::new(rules![
        (UPat::var("x") + UPat::cvar("c")).idiv(UPat::cvar("d")) => |x, c, d| x.idiv(d) + c.idiv(d),
    ]);
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    });
    let res = runner.run(&(expr(), bounds(), seeds()), |(e, b, s)| {
        same_value(&e, &b, &s, |u| {
            graph_rewrite(
                &graph_rewrite(u, &bad, &mut (), false),
                sym(),
                &mut (),
                false,
            )
        })
    });
    assert!(res.is_err(), "the wrong rule was not caught");
}

/// The generated expressions are not trivial: most of them change under `simplify()`, and they
/// contain divisions, remainders and negative bounds.
#[test]
fn generator_is_not_vacuous() {
    let mut runner = TestRunner::deterministic();
    let (mut changed, mut divmod, mut negative) = (0, 0, 0);
    let strat = (expr(), bounds());
    for _ in 0..1000 {
        let (e, b) = strat.new_tree(&mut runner).unwrap().current();
        let u = to_uop(&e, &b);
        if u.simplify() != u {
            changed += 1;
        }
        if u.toposort()
            .iter()
            .any(|n| matches!(n.op(), tinygrad_uop::Ops::IDiv | tinygrad_uop::Ops::Mod))
        {
            divmod += 1;
        }
        if b.iter().any(|(lo, _)| *lo < 0) {
            negative += 1;
        }
    }
    assert!(changed > 500, "only {changed}/1000 expressions simplified");
    assert!(divmod > 300, "only {divmod}/1000 expressions divide");
    assert!(negative > 300, "only {negative}/1000 have negative bounds");
}
