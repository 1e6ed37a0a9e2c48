//! tinygrad's `test/backend/test_symbolic_ops.py`, replayed on our API (see `replay/mod.rs`).
//!
//! Each case compares an op on a tensor with a symbolic size (a `Variable` bound to `i`) with
//! the same op at the concrete size `i`, as tinygrad's methods do, on the same random inputs.
//! tinygrad's `t[:, :vi]` is `Idx::SymSlice`, `t.shrink(((3, 5), (vi, vi + 2)))` is
//! `shrink_sym`, `t.expand(vi, 2)` is `expand_sym`, a pad by `10 - a.shape[1]` is `pad_sym`.

mod replay;

use replay::{Case, Ctx, all, assert_panics, bind, close, sym_to, to};
use tinygrad_tensor::nn::{Linear, Module};
use tinygrad_tensor::{Axis, BoundVar, DType, Idx, SInt, Tensor, Variable};

const CASES: &[Case] = &[
    ("TestSymbolicOps.test_negative_slice", negative_slice),
    ("TestSymbolicOps.test_plus1", plus1),
    ("TestSymbolicOps.test_plus1_pad", plus1_pad),
    ("TestSymbolicOps.test_add", add),
    ("TestSymbolicOps.test_matmul", matmul),
    ("TestSymbolicOps.test_attention", attention),
    (
        "TestSymbolicOps.test_attention_cmp_symbolic",
        attention_cmp_symbolic,
    ),
    (
        "TestSymbolicOps.test_attention_training",
        attention_training,
    ),
    (
        "TestSymbolicOps.test_sdpa_symbolic_seq_len",
        sdpa_symbolic_seq_len,
    ),
    (
        "TestSymbolicOps.test_sdpa_symbolic_seq_len_query_only",
        sdpa_symbolic_seq_len_query_only,
    ),
    (
        "TestSymbolicOps.test_sdpa_symbolic_batch",
        sdpa_symbolic_batch,
    ),
    (
        "TestSymbolicOps.test_sdpa_symbolic_heads",
        sdpa_symbolic_heads,
    ),
    (
        "TestSymbolicOps.test_attention_pos_0_sz_0",
        attention_pos_0_sz_0,
    ),
    (
        "TestSymbolicOps.test_attention_pos_0_sz_1",
        attention_pos_0_sz_1,
    ),
    (
        "TestSymbolicOps.test_attention_pos_0_sz_2",
        attention_pos_0_sz_2,
    ),
    ("TestSymbolicOps.test_cat_dim0", cat_dim0),
    ("TestSymbolicOps.test_cat_dim1", cat_dim1),
    ("TestSymbolicOps.test_cat_dim0_two_vars", cat_dim0_two_vars),
    ("TestSymbolicOps.test_cat_dim1_two_vars", cat_dim1_two_vars),
    ("TestSymbolicOps.test_two_vars_plus1_ij", two_vars_plus1_ij),
    ("TestSymbolicOps.test_two_vars_plus1_ji", two_vars_plus1_ji),
    (
        "TestSymbolicOps.test_invalid_symbolic_reshape",
        invalid_symbolic_reshape,
    ),
    ("TestSymbolicOps.test_shrink", shrink),
    ("TestSymbolicOps.test_slice", slice),
    ("TestSymbolicOps.test_slice_no_start", slice_no_start),
    ("TestSymbolicOps.test_expand_padded", expand_padded),
    ("TestSymbolicOps.test_slice_var_shape", slice_var_shape),
    ("TestSymbolicOps.test_ones_sum", ones_sum),
    ("TestSymbolicOps.test_mean", mean),
    ("TestSymbolicOps.test_mean_2d", mean_2d),
    ("TestSymbolicOps.test_var", var),
    ("TestSymbolicOps.test_var_2d", var_2d),
    (
        "TestSymbolicOps.test_conv2d_ceildiv_edge_case",
        conv2d_ceildiv_edge_case,
    ),
];

// ---- helpers: tinygrad's indexing spelled on `Idx` ----

/// `start:stop` (Python bounds, negatives count from the end)
fn range(start: isize, stop: Option<isize>) -> Idx {
    Idx::slice(Some(start), stop, 1)
}

// ---- the cases ----

fn negative_slice(_: &Ctx) {
    let a = Tensor::rand(&[3, 10, 4]);
    for i in 3..10 {
        let vi = bind("i", i);
        let s = a.getitem(&[all(), sym_to(&vi)]);
        let c = a.getitem(&[all(), to(i)]);
        // negative int bounds against a symbolic dim must resolve against the size
        let idx = [all(), range(-3, Some(-1))];
        close(
            &s.getitem(&idx),
            &c.getitem(&idx),
            1e-6,
            1e-6,
            &format!("[-3:-1], i={i}"),
        );
        let idx = [all(), range(-1, None)];
        close(
            &s.getitem(&idx),
            &c.getitem(&idx),
            1e-6,
            1e-6,
            &format!("[-1:], i={i}"),
        );
        let idx = [all(), Idx::Int(-1)];
        close(
            &s.getitem(&idx),
            &c.getitem(&idx),
            1e-6,
            1e-6,
            &format!("[-1], i={i}"),
        );
    }
}

fn plus1(_: &Ctx) {
    let f = |a: &Tensor| (a + 1.0).realize().clone();
    let a = Tensor::rand(&[3, 10]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = f(&a.getitem(&[all(), sym_to(&vi)])).getitem(&[to(3), to(i)]);
        let expected = f(&a.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn plus1_pad(_: &Ctx) {
    // (a+1).pad((None, (0, 10-a.shape[1]))): the pad is symbolic when a's size is
    let f = |a: &Tensor| {
        let right = SInt::from(10usize) - a.sym_shape()[1].clone();
        (a + 1.0)
            .pad_sym(&[(0.into(), 0.into()), (0.into(), right)])
            .realize()
            .clone()
    };
    let a = Tensor::rand(&[3, 10]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = f(&a.getitem(&[all(), sym_to(&vi)]));
        let expected = f(&a.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn add(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| (a + b).realize().clone();
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 10]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = f(
            &a.getitem(&[all(), sym_to(&vi)]),
            &b.getitem(&[all(), sym_to(&vi)]),
        )
        .getitem(&[all(), to(i)]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[all(), to(i)]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn matmul(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| a.matmul(b).realize().clone();
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[10, 5]));
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = f(
            &a.getitem(&[all(), sym_to(&vi)]),
            &b.getitem(&[sym_to(&vi), all()]),
        );
        let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[to(i), all()]));
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

/// tinygrad's `test_attention(dropout_p, imin, imax, use_symbolic)`.
fn attention_with(dropout_p: f64, imin: usize, imax: usize, use_symbolic: bool) {
    let f = |q: &Tensor, k: &Tensor, v: &Tensor| {
        q.transpose(1, 2)
            .scaled_dot_product_attention(
                &k.transpose(1, 2),
                &v.transpose(1, 2),
                None,
                dropout_p,
                false,
            )
            .realize()
            .clone()
    };
    let q = Tensor::rand(&[2, 1, 4, 8]);
    let k = Tensor::rand(&[2, 10, 4, 8]);
    let v = Tensor::rand(&[2, 10, 4, 8]);
    for i in imin..imax {
        let vi = if use_symbolic {
            sym_to(bind("i", i))
        } else {
            to(i)
        };
        Tensor::try_realize_all(&[&q, &k, &v]).unwrap();
        let symbolic = f(
            &q,
            &k.getitem(&[all(), vi.clone(), all(), all()]),
            &v.getitem(&[all(), vi, all(), all()]),
        )
        .getitem(&[to(2), to(4), to(1), to(8)]);
        let expected = f(
            &q,
            &k.getitem(&[all(), to(i), all(), all()]),
            &v.getitem(&[all(), to(i), all(), all()]),
        );
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn attention(_: &Ctx) {
    attention_with(0.0, 1, 5, true);
}

fn attention_cmp_symbolic(_: &Ctx) {
    attention_with(0.0, 4, 5, false);
    attention_with(0.0, 4, 5, true);
}

fn attention_training(_: &Ctx) {
    let _training = Tensor::train(true);
    attention_with(0.0, 1, 5, true);
    // symbolic shape dropout is not supported
    // (tinygrad's loop starts at i=1; ours from i=2: bound to 1, the key's symbolic length is
    // lost in matmul's reshapes of concrete shapes, where a size of 1 is ambiguous, so the
    // attention weights reach dropout with a concrete shape, and dropout runs)
    assert_panics("dropout on a symbolic shape", &["dropout"], || {
        attention_with(0.5, 2, 5, true)
    });
}

fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor) -> Tensor {
    q.scaled_dot_product_attention(k, v, None, 0.0, false)
}

fn sdpa_symbolic_seq_len(_: &Ctx) {
    // symbolic seq_len on all of q/k/v (dim -2 after transpose)
    let q = Tensor::rand(&[2, 10, 4, 8]);
    let k = Tensor::rand(&[2, 10, 4, 8]);
    let v = Tensor::rand(&[2, 10, 4, 8]);
    for i in 1..5 {
        let vi = bind("i", i);
        Tensor::try_realize_all(&[&q, &k, &v]).unwrap();
        let s = |t: &Tensor| t.getitem(&[all(), sym_to(&vi)]).transpose(1, 2);
        let c = |t: &Tensor| t.getitem(&[all(), to(i)]).transpose(1, 2);
        let symbolic =
            sdpa(&s(&q), &s(&k), &s(&v))
                .realize()
                .clone()
                .getitem(&[to(2), to(4), to(i), to(8)]);
        let expected = sdpa(&c(&q), &c(&k), &c(&v)).realize().clone();
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn sdpa_symbolic_seq_len_query_only(_: &Ctx) {
    // symbolic seq_len on query only (dim -2 after transpose)
    let q = Tensor::rand(&[2, 10, 4, 8]);
    let k = Tensor::rand(&[2, 5, 4, 8]);
    let v = Tensor::rand(&[2, 5, 4, 8]);
    for i in 1..5 {
        let vi = bind("i", i);
        Tensor::try_realize_all(&[&q, &k, &v]).unwrap();
        let (kt, vt) = (k.transpose(1, 2), v.transpose(1, 2));
        let symbolic = sdpa(&q.getitem(&[all(), sym_to(&vi)]).transpose(1, 2), &kt, &vt)
            .realize()
            .clone()
            .getitem(&[to(2), to(4), to(i), to(8)]);
        let expected = sdpa(&q.getitem(&[all(), to(i)]).transpose(1, 2), &kt, &vt)
            .realize()
            .clone();
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn sdpa_symbolic_batch(_: &Ctx) {
    // symbolic batch dim (dim 0)
    let q = Tensor::rand(&[10, 4, 3, 8]);
    let k = Tensor::rand(&[10, 4, 3, 8]);
    let v = Tensor::rand(&[10, 4, 3, 8]);
    for i in 1..5 {
        let vi = bind("i", i);
        Tensor::try_realize_all(&[&q, &k, &v]).unwrap();
        let s = |t: &Tensor| t.getitem(&[sym_to(&vi)]);
        let c = |t: &Tensor| t.getitem(&[to(i)]);
        let symbolic =
            sdpa(&s(&q), &s(&k), &s(&v))
                .realize()
                .clone()
                .getitem(&[to(i), to(4), to(3), to(8)]);
        let expected = sdpa(&c(&q), &c(&k), &c(&v)).realize().clone();
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn sdpa_symbolic_heads(_: &Ctx) {
    // symbolic heads dim (dim -3)
    let q = Tensor::rand(&[2, 10, 3, 8]);
    let k = Tensor::rand(&[2, 10, 3, 8]);
    let v = Tensor::rand(&[2, 10, 3, 8]);
    for i in 1..5 {
        let vi = bind("i", i);
        Tensor::try_realize_all(&[&q, &k, &v]).unwrap();
        let s = |t: &Tensor| t.getitem(&[all(), sym_to(&vi)]);
        let c = |t: &Tensor| t.getitem(&[all(), to(i)]);
        let symbolic =
            sdpa(&s(&q), &s(&k), &s(&v))
                .realize()
                .clone()
                .getitem(&[to(2), to(i), to(3), to(8)]);
        let expected = sdpa(&c(&q), &c(&k), &c(&v)).realize().clone();
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

/// `examples/gpt2.py`'s `Attention` (the part `test_attention_pos_0_sz_*` runs): the projections,
/// a KV cache of `MAX_CONTEXT` = 128 positions written at `start_pos:start_pos+seqlen`, and the
/// attention over `:start_pos+seqlen`.
struct Gpt2Attention {
    c_attn: Linear,
    c_proj: Linear,
    n_heads: usize,
    dim: usize,
    head_dim: usize,
}

const MAX_CONTEXT: usize = 128;

impl Gpt2Attention {
    fn new(dim: usize, n_heads: usize) -> Gpt2Attention {
        Gpt2Attention {
            c_attn: Linear::new_with(dim, 3 * dim, true),
            c_proj: Linear::new_with(dim, dim, true),
            n_heads,
            dim,
            head_dim: dim / n_heads,
        }
    }

    fn call(&self, x: &Tensor, start_pos: &BoundVar) -> Tensor {
        let (h, hd) = (self.n_heads as isize, self.head_dim as isize);
        // reshape(None, None, 3, n_heads, head_dim): None keeps x's size
        let xs = x.shape();
        let xqkv = self
            .c_attn
            .forward(x)
            .reshape(&[xs[0] as isize, xs[1] as isize, 3, h, hd]);
        let sel = |i: isize| xqkv.getitem(&[all(), all(), Idx::Int(i), all(), all()]);
        let (xq, xk, xv) = (sel(0), sel(1), sel(2));
        let (bsz, seqlen) = (xq.shape()[0], xq.shape()[1]);
        // create kv cache
        let cache_kv = Tensor::zeros(
            &[2, bsz, MAX_CONTEXT, self.n_heads, self.head_dim],
            x.dtype(),
        )
        .contiguous()
        .realize()
        .clone();
        // update the cache
        let sp = SInt::from(start_pos);
        let end = &sp + seqlen;
        cache_kv
            .getitem(&[
                all(),
                all(),
                Idx::SymSlice {
                    start: sp,
                    stop: end.clone(),
                },
                all(),
                all(),
            ])
            .assign_in_place(&Tensor::stack(&[&xk, &xv], 0))
            .expect("the cache update runs");
        let keys = cache_kv
            .getitem(&[Idx::Int(0)])
            .getitem(&[all(), sym_to(end.clone())]);
        let values = cache_kv
            .getitem(&[Idx::Int(1)])
            .getitem(&[all(), sym_to(end)]);
        let (xq, keys, values) = (
            xq.transpose(1, 2),
            keys.transpose(1, 2),
            values.transpose(1, 2),
        );
        self.c_proj.forward(
            &sdpa(&xq, &keys, &values)
                .transpose(1, 2)
                .reshape(&[bsz, seqlen, self.dim]),
        )
    }
}

/// tinygrad binds `Variable("start_pos", 0, 128)`: the cache window `start_pos:start_pos+sz`
/// could then pass the 128 positions; our symbolic slices refuse a bound that can pass the dim
/// for a value in the variable's bounds (the kernels serve every value), so the variable here
/// ends at `128 - sz`.
fn attention_pos(sz: usize) {
    let start_pos = Variable::new("start_pos", 0, MAX_CONTEXT - sz).bind(0);
    Gpt2Attention::new(128, 8).call(&Tensor::ones(&[1, sz, 128], DType::FLOAT32), &start_pos);
}

fn attention_pos_0_sz_0(_: &Ctx) {
    attention_pos(0);
}

fn attention_pos_0_sz_1(_: &Ctx) {
    attention_pos(1);
}

fn attention_pos_0_sz_2(_: &Ctx) {
    attention_pos(2);
}

fn cat_dim0(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 0).realize().clone();
    let a = Tensor::rand(&[10, 3]);
    for i in 1..5 {
        let vi = bind("i", i);
        let b = Tensor::rand(&[2, 3]);
        let symbolic = f(&a.getitem(&[sym_to(&vi), all()]), &b).getitem(&[to(i + 2), to(3)]);
        let expected = f(&a.getitem(&[to(i), all()]), &b);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn cat_dim1(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 1).realize().clone();
    let a = Tensor::rand(&[3, 10]);
    for i in 1..5 {
        let vi = bind("i", i);
        let b = Tensor::rand(&[3, 2]);
        let symbolic = f(&a.getitem(&[all(), sym_to(&vi)]), &b).getitem(&[to(3), to(i + 2)]);
        let expected = f(&a.getitem(&[all(), to(i)]), &b);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn cat_dim0_two_vars(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 0).realize().clone();
    let (a, b) = (Tensor::rand(&[10, 3]), Tensor::rand(&[10, 3]));
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            let symbolic = f(
                &a.getitem(&[sym_to(&vi), all()]),
                &b.getitem(&[sym_to(&vj), all()]),
            )
            .getitem(&[to(i + j), to(3)]);
            let expected = f(&a.getitem(&[to(i), all()]), &b.getitem(&[to(j), all()]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
}

fn cat_dim1_two_vars(_: &Ctx) {
    let f = |a: &Tensor, b: &Tensor| Tensor::cat(&[a, b], 1).realize().clone();
    let (a, b) = (Tensor::rand(&[3, 10]), Tensor::rand(&[3, 10]));
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            let symbolic = f(
                &a.getitem(&[all(), sym_to(&vi)]),
                &b.getitem(&[all(), sym_to(&vj)]),
            )
            .getitem(&[to(3), to(i + j)]);
            let expected = f(&a.getitem(&[all(), to(i)]), &b.getitem(&[all(), to(j)]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
}

fn two_vars_plus1(swap: bool) {
    let f = |a: &Tensor, b: &Tensor| (a.matmul(b) + 1.0).realize().clone();
    let a = Tensor::rand(&[10, 3]).realize().clone();
    let b = Tensor::rand(&[3, 10]).realize().clone();
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            // _ij: a[:vi], b[:, :vj]; _ji (the order of the variables reversed): a[:vj], b[:, :vi]
            let ((va, na), (vb, nb)) = if swap {
                ((&vj, j), (&vi, i))
            } else {
                ((&vi, i), (&vj, j))
            };
            let symbolic = f(
                &a.getitem(&[sym_to(va), all()]),
                &b.getitem(&[all(), sym_to(vb)]),
            )
            .getitem(&[to(na), to(nb)]);
            let expected = f(&a.getitem(&[to(na), all()]), &b.getitem(&[all(), to(nb)]));
            close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i} j={j}"));
        }
    }
}

fn two_vars_plus1_ij(_: &Ctx) {
    two_vars_plus1(false);
}

fn two_vars_plus1_ji(_: &Ctx) {
    two_vars_plus1(true);
}

fn invalid_symbolic_reshape(_: &Ctx) {
    let a = Tensor::rand(&[30]);
    for i in 1..5 {
        let vi = bind("i", i);
        // Cannot reshape into symbolic from non-symbolic
        assert_panics(&format!("reshape (3, vi), i={i}"), &["reshape_sym"], || {
            a.reshape_sym(&[3.into(), vi.into()]);
        });
    }
}

/// tinygrad's `Variable("i", 1, 10)` for a window `vi:vi+2` of a dim of 11: our symbolic
/// shrink refuses bounds that could pass the dim for a value in the variable's bounds (10 + 2 >
/// 11: a kernel serves every value), so these cases bind `Variable("i", 1, 9)`.
fn bind_window(v: usize) -> BoundVar {
    Variable::new("i", 1, 9).bind(v)
}

fn shrink(_: &Ctx) {
    for i in 1..5 {
        let vi = SInt::from(bind_window(i));
        let a = Tensor::rand(&[7, 11]);
        let symbolic = a.shrink_sym(&[(3.into(), 5.into()), (vi.clone(), &vi + 2)]);
        let expected = a.shrink(&[(3, 5), (i, i + 2)]);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn slice(_: &Ctx) {
    for i in 1..5 {
        let vi = SInt::from(bind_window(i));
        let a = Tensor::rand(&[7, 11]);
        let symbolic = a.getitem(&[
            range(3, Some(5)),
            Idx::SymSlice {
                start: vi.clone(),
                stop: &vi + 2,
            },
        ]);
        let expected = a.getitem(&[range(3, Some(5)), range(i as isize, Some(i as isize + 2))]);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn slice_no_start(_: &Ctx) {
    let a = Tensor::rand(&[7, 11]);
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = a
            .getitem(&[range(3, Some(5)), sym_to(&vi)])
            .getitem(&[to(2), to(i)]);
        let expected = a.getitem(&[range(3, Some(5)), to(i)]);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn expand_padded(_: &Ctx) {
    for i in 1..5 {
        let vi = bind("i", i);
        let a = Tensor::scalar(1i32)
            .unsqueeze(0)
            .pad(&[(0, 1)], 0)
            .unsqueeze(0);
        let symbolic = a
            .expand_sym(&[vi.into(), 2.into()])
            .getitem(&[to(i), to(2)]);
        let expected = a.expand(&[i, 2]);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

/// tinygrad's `Tensor.ones(*shape)` with symbolic sizes: its `full` is a constant reshaped to
/// ones and expanded to the shape, which is what this spells (our creation functions take
/// `usize` sizes).
fn ones_sym(shape: &[SInt]) -> Tensor {
    Tensor::ones(&vec![1; shape.len()], DType::FLOAT32).expand_sym(shape)
}

fn slice_var_shape(_: &Ctx) {
    for i in 1..5 {
        let vi = bind("i", i);
        let a = ones_sym(&[vi.into(), 11.into()]).contiguous();
        let symbolic = a
            .getitem(&[all(), range(1, Some(2))])
            .getitem(&[to(i), to(1)]);
        let expected = Tensor::ones(&[i, 11], DType::FLOAT32).getitem(&[all(), range(1, Some(2))]);
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("i={i}"));
    }
}

fn ones_sum(_: &Ctx) {
    let t = Tensor::ones(&[10], DType::FLOAT32).contiguous();
    for i in 1..5 {
        let vi = bind("i", i);
        let symbolic = t.getitem(&[sym_to(&vi)]).sum(Axis::All).item::<f32>();
        let expected = t.getitem(&[to(i)]).sum(Axis::All).item::<f32>();
        assert_eq!(symbolic, expected, "i={i}");
    }
}

/// `mean`/`var` over `axis` of `a[:vi(, :vj)]` against `a[:i(, :j)]`, the symbolic result cut to
/// `expected.shape[0]` where an axis is given.
fn reduce_cmp(reduce: &dyn Fn(&Tensor, Axis) -> Tensor, a: &Tensor, sym: &[Idx], con: &[Idx]) {
    for axis in [None, Some(0isize), Some(1)] {
        let expected = reduce(&a.getitem(con), axis.into());
        let mut symbolic = reduce(&a.getitem(sym), axis.into());
        if axis.is_some() {
            symbolic = symbolic.getitem(&[to(expected.shape()[0])]);
        }
        close(&symbolic, &expected, 1e-6, 1e-6, &format!("axis {axis:?}"));
    }
}

fn mean_or_var_1d(reduce: &dyn Fn(&Tensor, Axis) -> Tensor) {
    let a = Tensor::rand(&[10, 3]);
    for i in 1..5 {
        let vi = bind("i", i);
        reduce_cmp(reduce, &a, &[sym_to(&vi)], &[to(i)]);
    }
}

fn mean_or_var_2d(reduce: &dyn Fn(&Tensor, Axis) -> Tensor) {
    let a = Tensor::rand(&[10, 10]);
    for i in 2..5 {
        for j in 2..5 {
            let (vi, vj) = (bind("i", i), bind("j", j));
            reduce_cmp(reduce, &a, &[sym_to(&vi), sym_to(&vj)], &[to(i), to(j)]);
        }
    }
}

fn mean(_: &Ctx) {
    mean_or_var_1d(&|t, axis| t.mean(axis));
}

fn mean_2d(_: &Ctx) {
    mean_or_var_2d(&|t, axis| t.mean(axis));
}

fn var(_: &Ctx) {
    // tinygrad's var: correction=1
    mean_or_var_1d(&|t, axis| t.var(axis, 1));
}

fn var_2d(_: &Ctx) {
    mean_or_var_2d(&|t, axis| t.var(axis, 1));
}

fn conv2d_ceildiv_edge_case(_: &Ctx) {
    // tests symbolic ceildiv in conv2d output shape calculation
    // val=79: floor((79 + 6 - 12) / 6) + 1 = 13 output positions
    let v = Variable::new("v", 11, 100);
    let val = 79;
    let x_full = Tensor::randn(&[1, 8, 100]);
    let weight = Tensor::randn(&[16, 8, 12]);
    let conv = |x: &Tensor| x.conv2d(&weight, None, 1, 6, 1, vec![3isize, 3]);
    // symbolic version
    let result = conv(&x_full.getitem(&[all(), all(), sym_to(v.bind(val))]));
    assert_eq!(result.shape(), vec![1, 16, 13]);
    // concrete version for comparison
    let expected = conv(&x_full.getitem(&[all(), all(), to(val)]));
    close(
        &result.getitem(&[all(), all(), to(13)]),
        &expected,
        1e-5,
        1e-5,
        "conv",
    );
}

#[test]
fn cpu() {
    replay::replay("test_symbolic_ops", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("test_symbolic_ops", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("test_symbolic_ops on WEBGPU", |dev| {
        replay::replay("test_symbolic_ops", dev, CASES)
    });
}
