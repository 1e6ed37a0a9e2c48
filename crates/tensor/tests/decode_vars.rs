//! A decode-style loop over a growing KV cache, with the attention over a `Variable` length:
//! after the first steps no kernel is compiled any more (one kernel for every length), and the
//! results equal the same attention computed with concrete shapes. (Alone in its binary: it
//! counts the process's compiles.)

use tinygrad_tensor::{DType, SInt, Tensor, Variable, compile_count};

const MAX: usize = 48;
const DIM: usize = 8;

fn row(step: usize, salt: usize) -> Vec<f32> {
    (0..DIM)
        .map(|i| (((step * 7 + i * 3 + salt * 5) % 13) as f32 - 6.0) * 0.125)
        .collect()
}

/// One decode step: write row `pos` of both caches (a masked select: one kernel of constant
/// cost), then attend over the first `len` rows.
fn step(
    cache_k: &Tensor,
    cache_v: &Tensor,
    pos: usize,
    len: SInt,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    shrink: &dyn Fn(&Tensor, &SInt) -> Tensor,
) -> Tensor {
    let p = Tensor::from_slice(&[pos as i32], &[1, 1]);
    let at = Tensor::arange(0, MAX as i32, 1)
        .reshape(&[MAX as isize, 1])
        .eq(&p);
    cache_k.assign(&at.where_(&k.expand(&[MAX as isize, DIM as isize]), cache_k));
    cache_v.assign(&at.where_(&v.expand(&[MAX as isize, DIM as isize]), cache_v));
    Tensor::try_realize_all(&[cache_k, cache_v]).unwrap();
    let (keys, values) = (shrink(cache_k, &len), shrink(cache_v, &len));
    let scores = q.matmul(&keys.transpose(0, 1)) * (1.0 / (DIM as f64).sqrt());
    scores.softmax(-1).matmul(&values)
}

#[test]
fn a_decode_loop_compiles_nothing_after_its_first_steps_and_matches_concrete_shapes() {
    let var = Variable::new("len", 1, MAX);
    let zeros = || Tensor::zeros(&[MAX, DIM], DType::FLOAT32).contiguous();
    let (ck, cv) = (zeros(), zeros());
    let (rk, rv) = (zeros(), zeros());
    let sym_shrink =
        |c: &Tensor, len: &SInt| c.shrink_sym(&[(0.into(), len.clone()), (0.into(), DIM.into())]);
    let mut compiled_after = vec![];
    for pos in 0..MAX {
        let (q, k, v) = (
            Tensor::from_slice(&row(pos, 0), &[1, DIM]),
            Tensor::from_slice(&row(pos, 1), &[1, DIM]),
            Tensor::from_slice(&row(pos, 2), &[1, DIM]),
        );
        let before = compile_count();
        let out = step(
            &ck,
            &cv,
            pos,
            var.bind(pos + 1).into(),
            &q,
            &k,
            &v,
            &sym_shrink,
        );
        assert_eq!(out.shape(), vec![1, DIM]);
        let got = out.to_vec::<f32>();
        compiled_after.push(compile_count() - before);
        // the same step with concrete shapes (a new kernel per length)
        let concrete = |c: &Tensor, len: &SInt| c.shrink(&[(0, len.bound_value()), (0, DIM)]);
        let want = step(&rk, &rv, pos, (pos + 1).into(), &q, &k, &v, &concrete).to_vec::<f32>();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "step {pos}[{i}]: {g} vs {w}"
            );
        }
    }
    println!("kernels compiled per step: {compiled_after:?}");
    assert!(compiled_after[0] > 0, "the first step compiles its kernels");
    assert!(
        compiled_after[2..].iter().all(|&c| c == 0),
        "kernels compiled per step: {compiled_after:?}"
    );
}
