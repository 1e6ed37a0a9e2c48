//! Reverse-mode gradients on the tensor-level UOp graph (tinygrad's `pm_gradient` and
//! `compute_gradient`).
//!
//! Each primitive op has one local derivative rule in [`pm_gradient`], a [`PatternMatcher`]
//! whose context is the gradient flowing into the matched node. A rule answers with the
//! gradients of the node's sources, packed into one UOp by [`pack_gradients`] (a `Sink` whose
//! `arg` lists which sources the gradients belong to; a source without an entry gets no
//! gradient). [`local_gradients`] unpacks them again, so other compilers can extend the rule
//! set (`&pm_gradient() + &mine`) and run it with [`compute_gradient_with`].
//!
//! [`compute_gradient`] walks the graph once in reverse topological order, only through nodes
//! on a path to a target, and never through `Detach` or `Assign`. Gradients of a node used
//! several times are summed. Gradients are ordinary lazy UOps built from the forward graph, so
//! forward and backward are scheduled and fused together.
//!
//! Conventions of the rules (tinygrad's): `max` splits the gradient evenly between equal
//! operands; a `Max` reduction divides it evenly among the positions equal to the maximum;
//! comparisons, bitwise and integer ops have no gradient; `Trunc` and `Round` have a zero gradient;
//! `ContiguousBackward` makes the gradient flowing through it contiguous.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use tinygrad_dtype::{ConstValue, DType, sum_acc_dtype};

use crate::{Arg, Ops, PatternMatcher, Rule, UOp, UPat};

// ---- tensor-level constructors (shapes must be known) ----

fn shape_of(u: &UOp) -> Vec<usize> {
    u.shape()
        .unwrap_or_else(|| {
            panic!(
                "gradient: {} ({}) has no tensor-level shape",
                u.op(),
                u.dtype()
            )
        })
        .to_vec()
}

fn movement(u: &UOp, op: Ops, arg: Arg) -> UOp {
    UOp::new(op, u.dtype(), vec![u.clone()], arg)
}

fn reshape(u: &UOp, shape: &[usize]) -> UOp {
    if shape_of(u) == shape {
        return u.clone();
    }
    movement(u, Ops::Reshape, Arg::shape(shape))
}

fn expand(u: &UOp, shape: &[usize]) -> UOp {
    if shape_of(u) == shape {
        return u.clone();
    }
    movement(u, Ops::Expand, Arg::shape(shape))
}

/// `u` broadcast to `shape`: left-padded with size-1 axes, then expanded.
fn broadcast(u: &UOp, shape: &[usize]) -> UOp {
    let s = shape_of(u);
    let mut padded = vec![1usize; shape.len().saturating_sub(s.len())];
    padded.extend(&s);
    expand(&reshape(u, &padded), shape)
}

fn reduce(u: &UOp, op: Ops, axes: &[usize]) -> UOp {
    if axes.is_empty() {
        return u.clone();
    }
    movement(u, Ops::ReduceAxis, Arg::Reduce(op, axes.into()))
}

/// A constant `v` of `u`'s dtype, broadcast to `u`'s shape.
fn full_like(u: &UOp, v: impl Into<ConstValue>) -> UOp {
    broadcast(&UOp::cnst(u.dtype().base(), v), &shape_of(u))
}

fn zeros_like(u: &UOp) -> UOp {
    full_like(u, 0i64)
}

/// `u * v` with `v` a shaped constant.
fn mul_c(u: &UOp, v: f64) -> UOp {
    u * full_like(u, v)
}

fn neg(u: &UOp) -> UOp {
    mul_c(u, -1.0)
}

fn fdiv(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::FDiv, std::slice::from_ref(b))
}

fn cast(u: &UOp, dt: DType) -> UOp {
    if u.dtype() == dt {
        u.clone()
    } else {
        UOp::new(Ops::Cast, dt, vec![u.clone()], Arg::None)
    }
}

/// Packs the gradients of a node's sources (`None`: no gradient) into one UOp: a `Sink` of the
/// present gradients, with `arg` the indices of the sources they belong to. The answer of every
/// rule of a gradient [`PatternMatcher`].
pub fn pack_gradients(grads: Vec<Option<UOp>>) -> UOp {
    let mut idx = Vec::new();
    let mut src = Vec::new();
    for (i, g) in grads.into_iter().enumerate() {
        if let Some(g) = g {
            idx.push(i);
            src.push(g);
        }
    }
    UOp::new(Ops::Sink, DType::VOID, src, Arg::shape(&idx))
}

/// The gradients of `node`'s sources given the gradient `grad` flowing into `node`, by the first
/// matching rule of `pm`: one entry per source (`None`: no gradient). `None` if no rule matches.
///
/// # Panics
/// If a rule answers with something other than [`pack_gradients`]' encoding.
pub fn local_gradients(
    pm: &PatternMatcher<UOp>,
    node: &UOp,
    grad: &UOp,
) -> Option<Vec<Option<UOp>>> {
    let packed = pm.rewrite(node, &mut grad.clone())?;
    let idx = match (packed.op(), packed.arg()) {
        (Ops::Sink, Arg::Shape(idx)) if idx.len() == packed.src().len() => idx.clone(),
        _ => panic!(
            "gradient rule for {} must answer with pack_gradients(..), got {packed:?}",
            node.op()
        ),
    };
    let mut out = vec![None; node.src().len()];
    for (&i, g) in idx.iter().zip(packed.src()) {
        assert!(
            i < out.len(),
            "gradient rule for {} gave a gradient for source {i} of {}",
            node.op(),
            out.len()
        );
        out[i] = Some(g.clone());
    }
    Some(out)
}

fn one(g: UOp) -> UOp {
    pack_gradients(vec![Some(g)])
}

fn none(n: usize) -> UOp {
    pack_gradients(vec![None; n])
}

/// The gradient of a `ReduceAxis` (Add: broadcast back; Max: split evenly among the maxima;
/// Mul: `grad * out / x`).
fn reduce_gradient(g: &UOp, ret: &UOp) -> UOp {
    let Arg::Reduce(op, axes) = ret.arg() else {
        panic!("gradient: REDUCE_AXIS without a Reduce arg: {ret:?}")
    };
    let x = ret.s(0);
    let in_shape = shape_of(x);
    match op {
        Ops::Add => one(broadcast(g, &in_shape)),
        Ops::Max => {
            let mask = cast(&x.eq_(broadcast(ret, &in_shape)), g.dtype());
            let count = reduce(&mask, Ops::Add, axes);
            one(fdiv(&mask, &broadcast(&count, &in_shape)) * broadcast(g, &in_shape))
        }
        Ops::Mul => one(fdiv(&broadcast(&(g * ret), &in_shape), x)),
        op => panic!("gradient: REDUCE_AXIS with unknown reduce op {op}"),
    }
}

/// `argsort` of a permutation: its inverse.
fn inverse_permutation(p: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; p.len()];
    for (i, &x) in p.iter().enumerate() {
        inv[x] = i;
    }
    inv
}

/// The local derivative rules of every primitive op of the tensor-level graph. The context is
/// the gradient flowing into the matched node; each rule answers with [`pack_gradients`].
///
/// Ops without a rule (`Assign`, kernel-level ops) make [`compute_gradient`] panic if a
/// gradient has to flow through them.
pub fn pm_gradient() -> &'static PatternMatcher<UOp> {
    static PM: LazyLock<PatternMatcher<UOp>> = LazyLock::new(|| {
        use Ops::*;
        use std::f64::consts::{FRAC_PI_2, LN_2};
        PatternMatcher::new(vec![
            // ** elementwise **
            rule(&[Cast], |g, ret| one(cast(g, ret.s(0).dtype()))),
            rule(&[Neg], |g, _| one(neg(g))),
            rule(&[Recip], |g, ret| one(neg(&(g * ret * ret)))),
            rule(&[Sin], |g, ret| {
                one(g * full_like(ret, FRAC_PI_2).sub(ret.s(0)).unary(Sin))
            }),
            rule(&[Log2], |g, ret| one(fdiv(g, &mul_c(ret.s(0), LN_2)))),
            rule(&[Exp2], |g, ret| one(mul_c(&(g * ret), LN_2))),
            rule(&[Sqrt], |g, ret| one(fdiv(g, &mul_c(ret, 2.0)))),
            rule(&[Trunc, Round], |_, ret| one(zeros_like(ret.s(0)))),
            rule(&[CmpLt, CmpNe, CmpEq], |_, _| none(2)),
            rule(&[IDiv, Mod, Shl, Shr, And, Or, Xor, Threefry], |_, _| {
                none(2)
            }),
            rule(&[Bitcast], |_, _| none(1)),
            rule(&[Add], |g, _| {
                pack_gradients(vec![Some(g.clone()), Some(g.clone())])
            }),
            rule(&[Sub], |g, _| {
                pack_gradients(vec![Some(g.clone()), Some(neg(g))])
            }),
            rule(&[Mul], |g, ret| {
                pack_gradients(vec![Some(g * ret.s(1)), Some(g * ret.s(0))])
            }),
            rule(&[MulAcc], |g, ret| {
                pack_gradients(vec![
                    Some(g * ret.s(1)),
                    Some(g * ret.s(0)),
                    Some(g.clone()),
                ])
            }),
            rule(&[FDiv], |g, ret| {
                let b = ret.s(1);
                pack_gradients(vec![Some(fdiv(g, b)), Some(neg(&fdiv(&(g * ret), b)))])
            }),
            rule(&[Max], |g, ret| {
                let (x, y) = (ret.s(0), ret.s(1));
                let tie = x.eq_(y).where_(mul_c(g, 0.5), zeros_like(g));
                pack_gradients(vec![
                    Some(y.lt(x).where_(g, &tie)),
                    Some(x.lt(y).where_(g, &tie)),
                ])
            }),
            rule(&[Pow], |g, ret| {
                // d/db = e * b^(e-1) (with 0^0 counting as 1); d/de = b^e * ln b (-inf at 0^-e)
                let (b, e) = (ret.s(0), ret.s(1));
                let b_zero = b.eq_(zeros_like(b));
                let db = (&b_zero & e.eq_(zeros_like(e)))
                    .where_(e, e * b.alu(Pow, &[e.sub(full_like(e, 1))]));
                let at_zero = e
                    .lt(zeros_like(e))
                    .where_(full_like(ret, f64::NEG_INFINITY), zeros_like(ret));
                let de = b_zero.where_(at_zero, mul_c(&(ret * b.unary(Log2)), LN_2));
                pack_gradients(vec![Some(g * db), Some(g * de)])
            }),
            rule(&[Where], |g, ret| {
                let (c, zero) = (ret.s(0), zeros_like(g));
                pack_gradients(vec![
                    None,
                    Some(c.where_(g, &zero)),
                    Some(c.where_(&zero, g)),
                ])
            }),
            // ** movement **
            rule(&[Reshape], |g, ret| one(reshape(g, &shape_of(ret.s(0))))),
            rule(&[Permute], |g, ret| {
                let p = ret.arg().as_shape().expect("permute arg");
                one(movement(g, Permute, Arg::shape(&inverse_permutation(p))))
            }),
            rule(&[Expand], |g, ret| {
                let (src, out) = (shape_of(ret.s(0)), shape_of(ret));
                let mut padded = vec![1usize; out.len().saturating_sub(src.len())];
                padded.extend(&src);
                let axes: Vec<usize> = (0..out.len()).filter(|&i| padded[i] != out[i]).collect();
                // a half/bfloat16 gradient is summed in float32 (as a forward sum is), then cast
                // back: summing many half values in half loses digits torch keeps
                let dt = g.dtype().base();
                let acc = sum_acc_dtype(dt);
                let summed = if dt.is_float() && dt.count() == 1 && acc != dt && !axes.is_empty() {
                    cast(&reduce(&cast(g, acc), Add, &axes), dt)
                } else {
                    reduce(g, Add, &axes)
                };
                one(reshape(&summed, &src))
            }),
            rule(&[Pad], |g, ret| {
                let pads = ret.arg().as_pairs().expect("pad arg");
                let b: Vec<(usize, usize)> = shape_of(ret.s(0))
                    .iter()
                    .zip(pads)
                    .map(|(&s, &(before, _))| (before, before + s))
                    .collect();
                one(movement(g, Shrink, Arg::pairs(&b)))
            }),
            rule(&[Shrink], |g, ret| {
                let bounds = ret.arg().as_pairs().expect("shrink arg");
                let p: Vec<(usize, usize)> = shape_of(ret.s(0))
                    .iter()
                    .zip(bounds)
                    .map(|(&s, &(start, end))| (start, s - end))
                    .collect();
                one(movement(g, Pad, Arg::pairs(&p)))
            }),
            rule(&[Flip], |g, ret| one(movement(g, Flip, ret.arg().clone()))),
            rule(&[ReduceAxis], reduce_gradient),
            // ** markers **
            rule(&[Contiguous], |g, _| one(g.clone())),
            rule(&[Noop], noop_gradient),
            rule(&[ContiguousBackward], |g, _| {
                one(movement(g, Contiguous, Arg::None))
            }),
            rule(&[Detach], |_, _| none(1)),
            // a copy's gradient is copied back to where its source lives
            rule(&[Copy], |g, ret| {
                let (from, to) = ret.arg().as_copy().expect("a Copy names its devices");
                one(UOp::new(
                    Copy,
                    g.dtype(),
                    vec![g.clone()],
                    Arg::copy(to, from),
                ))
            }),
            // The shards of a multi-device value live on devices this layer does not know: a
            // gradient stops at the sharded tensor (mark that one as requiring grad).
            rule(&[Multi], |_, ret| {
                panic!(
                    "backward through shard: a gradient reaches the tensor a multi-device \
                     tensor of shape {:?} was sharded from; gradients stop at sharded tensors \
                     (call requires_grad on the sharded tensor instead)",
                    ret.shape().as_deref()
                )
            }),
        ])
    });
    &PM
}

/// A gradient supplied by the layer that built the graph, in place of the one the rules would
/// derive: the payload of a [`custom_gradient`] node.
///
/// Why: a formulation that is good for the forward pass can have a poor automatic gradient. A
/// convolution written as a sliding-window view of its input differentiates into a scatter
/// through that view (a huge intermediate); its gradient is better written as another
/// convolution. The node keeps the forward graph as it is and says how to differentiate it.
pub struct CustomGradient {
    id: u64,
    name: String,
    #[allow(clippy::type_complexity)]
    f: Box<dyn Fn(&UOp, &UOp) -> Vec<Option<UOp>> + Send + Sync>,
}

impl std::fmt::Debug for CustomGradient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "custom_gradient({})", self.name)
    }
}

impl crate::Opaque for CustomGradient {
    fn id(&self) -> u64 {
        self.id
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `value` (its values, shape and dtype: a `Noop` over it), whose gradient is `f(incoming
/// gradient, node)` instead of the derived one. The node's sources are `value` followed by
/// `inputs`; `f` answers one entry per source (`None`: no gradient). An entry for `value` flows
/// on through the ordinary rules (to the parts of `value` that `f` does not handle itself); an
/// entry for an input is that input's gradient. Schedulers see only `value`.
///
/// Build `value` so that it reaches the inputs `f` handles only through `Detach`; otherwise they
/// get the derived gradient as well (summed with `f`'s).
pub fn custom_gradient(
    value: &UOp,
    inputs: &[UOp],
    name: &str,
    f: impl Fn(&UOp, &UOp) -> Vec<Option<UOp>> + Send + Sync + 'static,
) -> UOp {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let payload = CustomGradient {
        id: NEXT.fetch_add(1, Ordering::Relaxed),
        name: name.to_string(),
        f: Box::new(f),
    };
    let mut src = vec![value.clone()];
    src.extend(inputs.iter().cloned());
    UOp::new(
        Ops::Noop,
        value.dtype(),
        src,
        Arg::Opaque(std::sync::Arc::new(payload)),
    )
}

/// `Noop`: the identity, or a [`custom_gradient`] node's own rule.
fn noop_gradient(g: &UOp, ret: &UOp) -> UOp {
    let custom = match ret.arg() {
        Arg::Opaque(o) => o.as_any().downcast_ref::<CustomGradient>(),
        _ => None,
    };
    let Some(custom) = custom else {
        return one(g.clone());
    };
    let grads = (custom.f)(g, ret);
    assert_eq!(
        grads.len(),
        ret.src().len(),
        "custom_gradient({}): one gradient entry per source expected",
        custom.name
    );
    pack_gradients(grads)
}

/// A gradient rule for nodes with one of `ops`: `f(incoming gradient, node)`.
fn rule(ops: &[Ops], f: fn(&UOp, &UOp) -> UOp) -> Rule<UOp> {
    let name = format!("gradient of {ops:?}");
    Rule::new(UPat::ops(ops).named("ret"), name, move |caps, g| {
        Some(f(g, caps.get("ret")))
    })
}

/// Gradients of `root` (seeded with `root_grad`, of `root`'s shape) with respect to every node on
/// a path from `root` to one of `targets`, by the rules of [`pm_gradient`]. The map holds the
/// gradient of each such node that one reaches (targets included); a target missing from it
/// gets no gradient (no path, or only through `Detach` or ops without a gradient).
///
/// # Panics
/// If `root_grad`'s shape differs from `root`'s, or a gradient must flow through an op that has
/// no rule (the message names it).
pub fn compute_gradient(root: &UOp, root_grad: &UOp, targets: &[UOp]) -> HashMap<UOp, UOp> {
    compute_gradient_with(pm_gradient(), root, root_grad, targets)
}

/// [`compute_gradient`] with another rule set (e.g. [`pm_gradient`] extended with rules for
/// ops of another compiler).
///
/// # Panics
/// As [`compute_gradient`].
pub fn compute_gradient_with(
    pm: &PatternMatcher<UOp>,
    root: &UOp,
    root_grad: &UOp,
    targets: &[UOp],
) -> HashMap<UOp, UOp> {
    if let (Some(a), Some(b)) = (root.shape(), root_grad.shape()) {
        assert!(
            a == b,
            "compute_gradient: gradient of shape {:?} for {} of shape {:?}",
            &b[..],
            root.op(),
            &a[..]
        );
    }
    let targets: HashSet<&UOp> = targets.iter().collect();
    let topo = root.toposort();
    // nodes with a source that is a target or on a path to one
    let mut on_path: HashSet<UOp> = HashSet::new();
    for u in &topo {
        if u.src()
            .iter()
            .any(|s| targets.contains(s) || on_path.contains(s))
        {
            on_path.insert(u.clone());
        }
    }
    let mut grads: HashMap<UOp, UOp> = HashMap::new();
    grads.insert(root.clone(), root_grad.clone());
    for node in topo.iter().rev() {
        if !on_path.contains(node) || matches!(node.op(), Ops::Detach | Ops::Assign) {
            continue;
        }
        let Some(g) = grads.get(node).cloned() else {
            continue;
        };
        let local = local_gradients(pm, node, &g).unwrap_or_else(|| {
            panic!(
                "compute_gradient: no gradient rule for {} (dtype {}, shape {:?})",
                node.op(),
                node.dtype(),
                node.shape().as_deref()
            )
        });
        for (s, sg) in node.src().iter().zip(local) {
            let Some(sg) = sg else { continue };
            let acc = match grads.remove(s) {
                Some(prev) => prev + sg,
                None => sg,
            };
            grads.insert(s.clone(), acc);
        }
    }
    grads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(shape: &[usize], id: i64) -> UOp {
        // a stand-in leaf with a shape: a reshaped constant distinguished by value
        let c = UOp::cnst(DType::FLOAT32, id as f64);
        broadcast(&c, shape)
    }

    #[test]
    fn mul_gradients_swap_operands() {
        let (x, y) = (buf(&[2, 3], 1), buf(&[2, 3], 2));
        let z = &x * &y;
        let g = full_like(&z, 1.0);
        let grads = compute_gradient(&z, &g, &[x.clone(), y.clone()]);
        assert_eq!(grads[&x], &g * &y);
        assert_eq!(grads[&y], &g * &x);
    }

    #[test]
    fn shared_node_gradients_are_summed() {
        let x = buf(&[3], 1);
        let z = &x * &x;
        let g = full_like(&z, 1.0);
        let grads = compute_gradient(&z, &g, std::slice::from_ref(&x));
        assert_eq!(grads[&x], (&g * &x) + (&g * &x));
    }

    #[test]
    fn only_nodes_on_a_path_to_a_target_are_visited() {
        let (x, y) = (buf(&[4], 1), buf(&[4], 2));
        let z = (&x + &y.unary(Ops::Exp2)) * &x;
        let g = full_like(&z, 1.0);
        let grads = compute_gradient(&z, &g, std::slice::from_ref(&x));
        assert!(grads.contains_key(&x));
        // exp2(y) receives a gradient from the add, but is not walked through
        assert!(!grads.contains_key(&y), "y is not on a path to x");
    }

    #[test]
    fn detach_blocks_and_comparisons_have_no_gradient() {
        let x = buf(&[4], 1);
        let d = movement(&x, Ops::Detach, Arg::None);
        let z = &d * &x.lt(&d).where_(&x, &d);
        let g = full_like(&z, 1.0);
        let grads = compute_gradient(&z, &g, std::slice::from_ref(&x));
        // only the `where` branch carries a gradient to x: not the detached operand of the
        // multiply, not the comparison
        let dg = &g * &d;
        assert_eq!(grads[&x], x.lt(&d).where_(&dg, zeros_like(&dg)));
        let w = &d * &d.lt(&d).where_(&d, &d);
        let grads = compute_gradient(&w, &full_like(&w, 1.0), std::slice::from_ref(&x));
        assert!(
            !grads.contains_key(&x),
            "x is only reachable through detach"
        );
    }

    #[test]
    fn movement_gradients_have_the_source_shape() {
        let x = buf(&[2, 3], 1);
        let views = [
            movement(&x, Ops::Permute, Arg::shape(&[1, 0])),
            movement(&x, Ops::Pad, Arg::pairs(&[(1, 0), (2, 1)])),
            movement(&x, Ops::Shrink, Arg::pairs(&[(1, 2), (0, 2)])),
            movement(&x, Ops::Flip, Arg::shape(&[1])),
            movement(
                &reshape(&x, &[2, 1, 3]),
                Ops::Expand,
                Arg::shape(&[2, 4, 3]),
            ),
            reduce(&x, Ops::Max, &[1]),
            reduce(&x, Ops::Add, &[0, 1]),
            reduce(&x, Ops::Mul, &[0]),
        ];
        for v in views {
            let grads = compute_gradient(&v, &full_like(&v, 1.0), std::slice::from_ref(&x));
            assert_eq!(shape_of(&grads[&x]), vec![2, 3], "{}", v.op());
        }
    }

    #[test]
    fn custom_gradient_replaces_the_derived_one() {
        let (x, w) = (buf(&[3], 1), buf(&[3], 2));
        // value = detach(x) * w; x's gradient comes from the function (here 5 * g), w's flows
        // through the value as derived
        let value = &movement(&x, Ops::Detach, Arg::None) * &w;
        let node = custom_gradient(&value, std::slice::from_ref(&x), "test", |g, _| {
            vec![Some(g.clone()), Some(mul_c(g, 5.0))]
        });
        assert_eq!(node.shape().as_deref(), Some(&[3usize][..]));
        if let Err(e) = crate::verify(&node, crate::Stage::Tensor) {
            panic!("custom-gradient node fails verification: {e:?}");
        }
        let z = &node * &node;
        let g = full_like(&z, 1.0);
        let grads = compute_gradient(&z, &g, &[x.clone(), w.clone()]);
        let gn = (&g * &node) + (&g * &node);
        assert_eq!(grads[&x], mul_c(&gn, 5.0));
        assert_eq!(grads[&w], &gn * &movement(&x, Ops::Detach, Arg::None));
        // a plain Noop stays the identity
        let plain = UOp::new(Ops::Noop, DType::FLOAT32, vec![x.clone()], Arg::None);
        let grads = compute_gradient(&plain, &full_like(&x, 1.0), std::slice::from_ref(&x));
        assert_eq!(grads[&x], full_like(&x, 1.0));
    }

    #[test]
    #[should_panic(expected = "custom_gradient(short): one gradient entry per source")]
    fn custom_gradient_must_answer_every_source() {
        let x = buf(&[2], 1);
        let node = custom_gradient(&x, std::slice::from_ref(&x), "short", |g, _| {
            vec![Some(g.clone())]
        });
        compute_gradient(&node, &full_like(&x, 1.0), &[x]);
    }

    #[test]
    #[should_panic(expected = "no gradient rule for VECTORIZE")]
    fn missing_rule_names_the_op() {
        let x = buf(&[2], 1);
        let c = UOp::new(Ops::Vectorize, DType::FLOAT32, vec![x.clone()], Arg::None);
        compute_gradient(&c, &full_like(&x, 1.0), &[x]);
    }

    #[test]
    fn a_copy_gradient_is_copied_back() {
        let x = buf(&[2], 1);
        let c = UOp::new(
            Ops::Copy,
            DType::FLOAT32,
            vec![x.clone()],
            Arg::copy("CPU", "WEBGPU"),
        );
        let g = compute_gradient(&c, &full_like(&c, 1.0), std::slice::from_ref(&x));
        let gx = g[&x].clone();
        assert_eq!(gx.op(), Ops::Copy);
        assert_eq!(gx.arg().as_copy(), Some(("WEBGPU", "CPU")));
    }

    #[test]
    fn pack_and_unpack_round_trip() {
        let x = buf(&[2], 1);
        let packed = pack_gradients(vec![None, Some(x.clone()), None]);
        assert_eq!(packed.arg(), &Arg::shape(&[1]));
        let pm: PatternMatcher<UOp> = PatternMatcher::new(vec![rule(&[Ops::Where], |g, _| {
            pack_gradients(vec![None, Some(g.clone()), None])
        })]);
        let c = x.lt(&x).where_(&x, &x);
        assert_eq!(
            local_gradients(&pm, &c, &x),
            Some(vec![None, Some(x.clone()), None])
        );
    }
}
