//! tinygrad's `test/backend/test_symbolic_jit.py`, replayed on our API (see `replay/mod.rs`).
//!
//! Each case runs a jitted function ([`Jit`]) on tensors with a symbolic size (a `Variable`
//! bound to `i`) and compares it with the function unjitted at the concrete size `i`, as
//! tinygrad's methods do, then checks the number of captured kernels (tinygrad's
//! `assert_jit_cache_len`: our `captured_launches`).
//!
//! tinygrad passes the symbolic views themselves (`jf(a[:, :vi])`); our [`Jit`] compares its
//! inputs by their bound sizes, so here the jitted function ([`Jit::with_vars`]) takes the
//! whole tensors and the bound variables and takes the same symbolic views first.

mod replay;

use replay::{Case, Ctx, all, bind, close, sym_to, to};
use tinygrad_tensor::{Axis, BoundVar, DType, Idx, Jit, JitError, SInt, Tensor, Variable};

const CASES: &[Case] = &[
    ("TestSymbolicJit.test_plus1", plus1),
    ("TestSymbolicJit.test_plus1_pad", plus1_pad),
    ("TestSymbolicJit.test_add", add),
    ("TestSymbolicJit.test_matmul", matmul),
    (
        "TestSymbolicJit.test_mixed_with_no_symbol_kernel",
        mixed_with_no_symbol_kernel,
    ),
    ("TestSymbolicJit.test_attention", attention),
    ("TestSymbolicJit.test_cat_dim0", cat_dim0),
    ("TestSymbolicJit.test_cat_dim1", cat_dim1),
    ("TestSymbolicJit.test_cat_dim0_two_vars", cat_dim0_two_vars),
    ("TestSymbolicJit.test_cat_dim1_two_vars", cat_dim1_two_vars),
    ("TestSymbolicJit.test_two_vars_plus1_ij", two_vars_plus1_ij),
    ("TestSymbolicJit.test_two_vars_plus1_ji", two_vars_plus1_ji),
    (
        "TestSymbolicJit.test_jit_symbolic_shape_mismatch",
        jit_symbolic_shape_mismatch,
    ),
    ("TestSymbolicJit.test_shrink", shrink),
    ("TestSymbolicJit.test_slice", slice),
    ("TestSymbolicJit.test_slice_var_shape", slice_var_shape),
    ("TestSymbolicJit.test_ones_sum", ones_sum),
    ("TestSymbolicJit.test_mean", mean),
    ("TestSymbolicJit.test_mean_2d", mean_2d),
    ("TestSymbolicJit.test_var", var),
    ("TestSymbolicJit.test_var_2d", var_2d),
];

// ---- helpers ----

/// `start:stop`
fn range(start: usize, stop: usize) -> Idx {
    Idx::slice(Some(start as isize), Some(stop as isize), 1)
}

/// One call of a jitted function: its single output.
fn call<F: tinygrad_tensor::jit::JitFn>(
    jf: &mut Jit<F>,
    inputs: &[&Tensor],
    vars: &[BoundVar],
) -> Tensor {
    let inputs: Vec<Tensor> = inputs.iter().map(|&t| t.clone()).collect();
    let mut out = jf
        .call_vars(&inputs, vars)
        .unwrap_or_else(|e| panic!("the jitted call: {e}"));
    assert_eq!(out.len(), 1, "one output");
    out.remove(0)
}

/// tinygrad's `assert_jit_cache_len(jf, n)`: the capture holds `n` kernels.
fn assert_jit_cache_len<F: tinygrad_tensor::jit::JitFn>(jf: &Jit<F>, n: usize) {
    assert_eq!(jf.captured_launches(), Some(n), "kernels in the capture");
}

// ---- the cases ----

fn plus1(_: &Ctx) {
    let f = |a: &Tensor| (a + 1.0).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(&x[0].getitem(&[all(), sym_to(&v[0])]))]
    });
    let a = Tensor::rand(&[3, 10]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a], &[vi]).getitem(&[to(3), to(i)]);
        let expected = f(&a.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn plus1_pad(_: &Ctx) {
    // (a+1).pad((None, (0, 10-a.shape[1]))).contiguous(): the pad is symbolic when a's size is
    let f = |a: &Tensor| {
        let right = SInt::from(10usize) - a.sym_shape()[1].clone();
        (a + 1.0)
            .pad_sym(&[(0.into(), 0.into()), (0.into(), right)])
            .contiguous()
            .realize()
            .clone()
    };
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(&x[0].getitem(&[all(), sym_to(&v[0])]))]
    });
    let a = Tensor::rand(&[3, 10]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a], &[vi]);
        let expected = f(&a.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn add(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| (a + b).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[all(), sym_to(&v[0])]),
            &x[1].getitem(&[all(), sym_to(&v[0])]),
        )]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 10]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a, &b], &[vi]).getitem(&[to(3), to(i)]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn matmul(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[all(), sym_to(&v[0])]),
            &x[1].getitem(&[sym_to(&v[0]), all()]),
        )]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[10, 5]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a, &b], &[vi]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[to(i), all()]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn mixed_with_no_symbol_kernel(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| {
        let s = a.matmul(b).realize().clone();
        (&s + &s).realize().clone() // this one does not have symbols in input
    };
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[all(), sym_to(&v[0])]),
            &x[1].getitem(&[sym_to(&v[0]), all()]),
        )]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[10, 5]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a, &b], &[vi]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[to(i), all()]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 2);
}

fn attention(_: &Ctx) {
    let f = |q: &Tensor, k: &Tensor, v: &Tensor| {
        q.transpose(1, 2)
            .scaled_dot_product_attention(&k.transpose(1, 2), &v.transpose(1, 2), None, 0.0, false)
            .realize()
            .clone()
    };
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0],
            &x[1].getitem(&[all(), sym_to(&v[0])]),
            &x[2].getitem(&[all(), sym_to(&v[0])]),
        )]
    });
    let q = Tensor::rand(&[2, 1, 4, 8]);
    let k = Tensor::rand(&[2, 10, 4, 8]);
    let v = Tensor::rand(&[2, 10, 4, 8]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&q, &k, &v], &[vi]).getitem(&[to(2), to(4), to(1), to(8)]);
        let expected = f(&q, &k.getitem(&[all(), to(i)]), &v.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    // tinygrad's capture holds 5 kernels; our scheduler fuses softmax differently (`x - max`
    // is a kernel of its own, read by the exp-sum and the normalization), so the count checked
    // is that of one unjitted call of the same function, scheduled: the capture holds exactly
    // the kernels of a call
    let vi = bind("i", 4);
    let lazy = q.transpose(1, 2).scaled_dot_product_attention(
        &k.getitem(&[all(), sym_to(&vi)]).transpose(1, 2),
        &v.getitem(&[all(), sym_to(&vi)]).transpose(1, 2),
        None,
        0.0,
        false,
    );
    assert_jit_cache_len(&jf, Tensor::schedule(&[&lazy]).len());
}

fn cat_dim0(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 0).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(&x[0].getitem(&[sym_to(&v[0])]), &x[1])]
    });
    let (a, b) = (Tensor::rand(&[10, 3]), Tensor::rand(&[2, 3]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a, &b], &[vi]).getitem(&[to(i + 2), to(3)]);
        let expected = f(&a.getitem(&[to(i)]), &b);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn cat_dim1(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 1).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(&x[0].getitem(&[all(), sym_to(&v[0])]), &x[1])]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 2]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&a, &b], &[vi]).getitem(&[to(3), to(i + 2)]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn cat_dim0_two_vars(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 0).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[sym_to(&v[0])]),
            &x[1].getitem(&[sym_to(&v[1])]),
        )]
    });
    let (a, b) = (Tensor::rand(&[10, 3]), Tensor::rand(&[10, 3]));
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            let symbolic = call(&mut jf, &[&a, &b], &[vi, vj]).getitem(&[to(i + j), to(3)]);
            let expected = f(&a.getitem(&[to(i)]), &b.getitem(&[to(j)]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
    assert_jit_cache_len(&jf, 1);
}

fn cat_dim1_two_vars(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 1).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[all(), sym_to(&v[0])]),
            &x[1].getitem(&[all(), sym_to(&v[1])]),
        )]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 10]));
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            let symbolic = call(&mut jf, &[&a, &b], &[vi, vj]).getitem(&[to(3), to(i + j)]);
            let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[all(), to(j)]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
    assert_jit_cache_len(&jf, 1);
}

/// `_ij`: `jf(a[:vi, :], b[:, :vj])`; `_ji` (the order of the variables reversed):
/// `jf(a[:vj, :], b[:, :vi])`.
fn two_vars_plus1(swap: bool) {
    let f = |a: &Tensor, b: &Tensor| (a.matmul(b) + 1.0).realize().clone();
    // the variables passed in the order (i, j); `swap` picks which slices which
    let (ka, kb) = if swap { (1, 0) } else { (0, 1) };
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        vec![f(
            &x[0].getitem(&[sym_to(&v[ka]), all()]),
            &x[1].getitem(&[all(), sym_to(&v[kb])]),
        )]
    });
    let (a, b) = (Tensor::rand(&[10, 3]), Tensor::rand(&[3, 10]));
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            let (na, nb) = if swap { (j, i) } else { (i, j) };
            let symbolic = call(&mut jf, &[&a, &b], &[vi, vj]).getitem(&[to(na), to(nb)]);
            let expected = f(&a.getitem(&[to(na), all()]), &b.getitem(&[all(), to(nb)]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
    assert_jit_cache_len(&jf, 1);
}

fn two_vars_plus1_ij(_: &Ctx) {
    two_vars_plus1(false);
}

fn two_vars_plus1_ji(_: &Ctx) {
    two_vars_plus1(true);
}

fn jit_symbolic_shape_mismatch(_: &Ctx) {
    let mut add = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        let s = |t: &Tensor| t.getitem(&[all(), sym_to(&v[0])]);
        vec![(s(&x[0]) + s(&x[1])).realize().clone()]
    });
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 10]));
    for i in 1..5 {
        let vi = bind("i", i);
        call(&mut add, &[&a, &b], &[vi]);
    }
    let vi2 = bind("i", 7);
    // tinygrad: a = Tensor.rand(3, 7)[:, :vi2], bad = Tensor.rand(4, 7)[:, :vi2]: the whole
    // tensors here are (3, 10) and (4, 10), the views (3, vi2) and (4, vi2)
    let a = Tensor::rand(&[3, 10]);
    let bad = Tensor::rand(&[4, 10]);
    match add.call_vars(&[a, bad], &[vi2]) {
        Err(JitError::Inputs(_)) => {}
        Err(e) => panic!("expected JitError::Inputs, got {e}"),
        Ok(_) => panic!("expected JitError::Inputs, the call ran"),
    }
}

/// tinygrad's `Variable("i", 1, 10)` for a window `vi:vi+2` of a dim of 11: our symbolic
/// shrink refuses bounds that could pass the dim for a value in the variable's bounds (10 + 2 >
/// 11: a kernel serves every value), so these cases bind `Variable("i", 1, 9)`.
fn bind_window(v: usize) -> BoundVar {
    Variable::new("i", 1, 9).bind(v)
}

fn shrink(_: &Ctx) {
    // shrink is a movement, so we pair it with a simple function to test the JIT interaction
    let f = |a: &Tensor| (a + 1.0).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        let vi = SInt::from(&v[0]);
        vec![f(
            &x[0].shrink_sym(&[(3.into(), 5.into()), (vi.clone(), &vi + 2)])
        )]
    });
    let a = Tensor::rand(&[7, 11]);
    for i in 1..5 {
        let symbolic = call(&mut jf, &[&a], &[bind_window(i)]);
        let expected = f(&a.shrink(&[(3, 5), (i, i + 2)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

fn slice(_: &Ctx) {
    // slice is a movement, so we pair it with a simple function to test the JIT interaction
    let f = |a: &Tensor| (a + 1.0).realize().clone();
    let mut jf = Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| {
        let vi = SInt::from(&v[0]);
        vec![f(&x[0].getitem(&[
            range(3, 5),
            Idx::SymSlice {
                start: vi.clone(),
                stop: &vi + 2,
            },
        ]))]
    });
    let a = Tensor::rand(&[7, 11]);
    for i in 1..5 {
        let symbolic = call(&mut jf, &[&a], &[bind_window(i)]);
        let expected = f(&a.getitem(&[range(3, 5), range(i, i + 2)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 1);
}

/// tinygrad's `Tensor.ones(*shape)` with symbolic sizes: its `full` is a constant reshaped to
/// ones and expanded to the shape, which is what this spells (our creation functions take
/// `usize` sizes).
fn ones_sym(shape: &[SInt]) -> Tensor {
    Tensor::ones(&vec![1; shape.len()], DType::FLOAT32).expand_sym(shape)
}

fn slice_var_shape(_: &Ctx) {
    let f = |a: &Tensor| (a + 1.0).realize().clone();
    // tinygrad makes `a = Tensor.ones(vi, 11).contiguous()` outside and passes `a[:, 1:2]`; a
    // tensor whose own buffer has a symbolic size cannot be our Jit's input (compared by its
    // bound size), so the function makes it, realized (the same kernel for every value), and
    // the capture holds that kernel and f's
    let mut jf = Jit::with_vars(|_: &[Tensor], v: &[BoundVar]| {
        let a = ones_sym(&[(&v[0]).into(), 11.into()])
            .contiguous()
            .realize()
            .clone();
        vec![f(&a.getitem(&[all(), range(1, 2)]))]
    });
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[], &[vi]).getitem(&[to(i), to(1)]);
        let a = Tensor::ones(&[i, 11], DType::FLOAT32).contiguous();
        let expected = f(&a.getitem(&[to(i), all()]).getitem(&[all(), range(1, 2)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
    assert_jit_cache_len(&jf, 2);
}

fn ones_sum(_: &Ctx) {
    let f = |a: &Tensor| a.sum(Axis::All).realize().clone();
    let mut jf =
        Jit::with_vars(|x: &[Tensor], v: &[BoundVar]| vec![f(&x[0].getitem(&[sym_to(&v[0])]))]);
    let t = Tensor::ones(&[10], DType::FLOAT32).contiguous();
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = call(&mut jf, &[&t], &[vi]).item::<f32>();
        let expected = f(&t.getitem(&[to(i)])).item::<f32>();
        assert_eq!(symbolic, expected, "i={i}");
    }
}

/// tinygrad's `test_mean`/`test_var` (`reduce` is mean or var): jitted `f`, `f0`, `f1` (the
/// reduce over every axis, axis 0, axis 1) on `a`, `b`, `c` sliced to `[:vi]` (`[:vi, :vj]`
/// for the 2-D tests) against the unjitted reduce at the concrete sizes; the results over
/// axis 1 (and over axis 0 in 2-D) cut to the concrete size.
fn reduce_jits(reduce: fn(&Tensor, Axis) -> Tensor, rows: usize, two_vars: bool) {
    let cols = if two_vars { 10 } else { 3 };
    let slice = move |t: &Tensor, v: &[BoundVar]| -> Tensor {
        if two_vars {
            t.getitem(&[sym_to(&v[0]), sym_to(&v[1])])
        } else {
            t.getitem(&[sym_to(&v[0])])
        }
    };
    let jit = |axis: Option<isize>| {
        Jit::with_vars(move |x: &[Tensor], v: &[BoundVar]| {
            vec![reduce(&slice(&x[0], v), axis.into()).realize().clone()]
        })
    };
    let (mut jf, mut jf0, mut jf1) = (jit(None), jit(Some(0)), jit(Some(1)));
    let a = Tensor::rand(&[rows, cols]);
    let b = Tensor::rand(&[rows, cols]);
    let c = Tensor::rand(&[rows, cols]);
    let pairs: Vec<(usize, usize)> = if two_vars {
        (2..5).flat_map(|i| (2..5).map(move |j| (i, j))).collect()
    } else {
        (1..5).map(|i| (i, cols)).collect()
    };
    for (i, j) in pairs {
        let vars = if two_vars {
            vec![bind("i", i), bind("j", j)]
        } else {
            vec![bind("i", i)]
        };
        let con = [to(i), to(j)];
        let what = format!("i={i} j={j}");
        // axis = None
        let symbolic = call(&mut jf, &[&a], &vars);
        let expected = reduce(&a.getitem(&con), Axis::All);
        close(
            &symbolic,
            &expected,
            1e-6,
            1e-6,
            &format!("axis None, {what}"),
        );
        // axis = 0
        let mut symbolic = call(&mut jf0, &[&b], &vars);
        if two_vars {
            symbolic = symbolic.getitem(&[to(j)]);
        }
        let expected = reduce(&b.getitem(&con), 0isize.into());
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("axis 0, {what}"));
        // axis = 1
        let symbolic = call(&mut jf1, &[&c], &vars).getitem(&[to(i)]);
        let expected = reduce(&c.getitem(&con), 1isize.into());
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("axis 1, {what}"));
    }
}

fn mean(_: &Ctx) {
    reduce_jits(|t, axis| t.mean(axis), 10, false);
}

fn mean_2d(_: &Ctx) {
    reduce_jits(|t, axis| t.mean(axis), 10, true);
}

fn var(_: &Ctx) {
    // tinygrad's var: correction=1
    reduce_jits(|t, axis| t.var(axis, 1), 10, false);
}

fn var_2d(_: &Ctx) {
    reduce_jits(|t, axis| t.var(axis, 1), 10, true);
}

#[test]
fn cpu() {
    replay::replay("test_symbolic_jit", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("test_symbolic_jit", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("test_symbolic_jit on WEBGPU", |dev| {
        replay::replay("test_symbolic_jit", dev, CASES)
    });
}
