//! One-hot sums collapse into indexed loads (`crates/schedule/src/gather.rs`): `Embedding`,
//! `gather` and tensor indexing read the selected elements instead of summing over the whole
//! indexed axis, with the same results — out-of-range indices included — on every backend.

mod common;

use tinygrad_tensor::nn::{Embedding, Module};
use tinygrad_tensor::{DType, Idx, Ops, Tensor};

/// Whether any kernel scheduled for `t` still has a reduction.
fn has_reduce(t: &Tensor) -> bool {
    Tensor::schedule(&[t])
        .iter()
        .any(|k| k.ast.toposort().iter().any(|u| u.op() == Ops::Reduce))
}

fn table(vocab: usize, dim: usize) -> Vec<f32> {
    (0..vocab * dim)
        .map(|i| {
            if i % 7 == 3 {
                -0.0
            } else {
                ((i * 37 % 101) as f32 - 50.0) / 8.0
            }
        })
        .collect()
}

/// Row `i` of the table, zeros for an index outside it (tinygrad's one-hot semantics; `-0.0`:
/// the sum of unselected `-0.0`s).
fn expected_rows(t: &[f32], dim: usize, vocab: usize, idx: &[i32]) -> Vec<f32> {
    idx.iter()
        .flat_map(|&i| {
            if (0..vocab as i32).contains(&i) {
                t[i as usize * dim..(i as usize + 1) * dim].to_vec()
            } else {
                vec![-0.0; dim]
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn embedding_suite(dev: &str) {
    let (vocab, dim) = (1000, 6);
    let t = table(vocab, dim);
    let emb = Embedding {
        weight: Tensor::from_slice(&t, &[vocab, dim]).to(dev),
    };
    emb.weight.realize();
    let idx = [3i32, 0, 999, 1000, -1, 7, 123_456, i32::MIN, 3];
    let x = Tensor::from_slice(&idx, &[3, 3]).to(dev);
    x.realize();
    let y = emb.forward(&x);
    assert!(
        !has_reduce(&y),
        "{dev}: the embedding lookup is still a reduction"
    );
    assert_eq!(y.shape(), vec![3, 3, dim]);
    let expected = expected_rows(&t, dim, vocab, &idx);
    // exact, signs of zero included
    let got = y.to_vec::<f32>();
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(
            g.to_bits(),
            e.to_bits(),
            "{dev}: element {k} (index {}): {g} vs {e}",
            idx[k / dim]
        );
    }
    // a vocabulary large enough that the one-hot sum would be split into two reductions
    // (49152 rows of 2: 49152 elements per output, past the split threshold) is still one load:
    // split first, the gather was no longer recognized, and a 135M-parameter LLM's decode step
    // spent 65 of its ~100 ms summing the embedding table
    let (big_vocab, big_dim) = (49152, 2);
    let big_t = table(big_vocab, big_dim);
    let big = Embedding {
        weight: Tensor::from_slice(&big_t, &[big_vocab, big_dim]).to(dev),
    };
    big.weight.realize();
    let big_idx = [49151i32, 0, 7, 49152];
    let xb = Tensor::from_slice(&big_idx, &[1, 4]).to(dev);
    xb.realize();
    let yb = big.forward(&xb);
    assert!(
        !has_reduce(&yb),
        "{dev}: the lookup in a vocabulary of {big_vocab} is still a reduction"
    );
    assert_eq!(
        bits(&yb.to_vec::<f32>()),
        bits(&expected_rows(&big_t, big_dim, big_vocab, &big_idx)),
        "{dev}: the large vocabulary's rows"
    );
    // int64 and int8 index tensors select the same rows
    for dt in [DType::INT64, DType::INT8] {
        let small = [5i32, -3, 2, 100];
        let xi = Tensor::from_slice(&small, &[4]).cast(dt).to(dev);
        let yi = emb.forward(&xi);
        assert!(!has_reduce(&yi), "{dev}: {dt} lookup is still a reduction");
        assert_eq!(
            bits(&yi.to_vec::<f32>()),
            bits(&expected_rows(&t, dim, vocab, &small)),
            "{dev}: {dt} indices"
        );
    }
}

#[test]
fn embedding_is_a_load_on_cpu() {
    embedding_suite("CPU");
}

#[test]
fn embedding_is_a_load_on_ref() {
    embedding_suite("REF");
}

#[test]
fn embedding_is_a_load_on_webgpu() {
    common::on_webgpu("embedding_is_a_load_on_webgpu", embedding_suite);
}

fn gather_and_index_suite(dev: &str) {
    let data: Vec<f32> = (0..4 * 5).map(|i| i as f32 - 7.5).collect();
    let x = Tensor::from_slice(&data, &[4, 5]).to(dev);
    x.realize();
    // gather along dim 1: out[i][j] = x[i][index[i][j]]
    let index = [4i32, 0, 2, 1, 1, 3, 0, 0, 4, 2, 2, 2];
    let it = Tensor::from_slice(&index, &[4, 3]).to(dev);
    let g = x.gather(1, &it);
    assert!(!has_reduce(&g), "{dev}: gather is still a reduction");
    let want: Vec<f32> = (0..12)
        .map(|k| data[(k / 3) * 5 + index[k] as usize])
        .collect();
    assert_eq!(g.to_vec::<f32>(), want, "{dev}: gather");
    // two index tensors: x[rows, cols]
    let (rows, cols) = ([3i32, 0, 2, 1], [4i32, 1, 0, 3]);
    let r = Tensor::from_slice(&rows, &[4]).to(dev);
    let c = Tensor::from_slice(&cols, &[4]).to(dev);
    let p = x.getitem(&[r.into(), c.into()]);
    assert!(!has_reduce(&p), "{dev}: x[rows, cols] is still a reduction");
    let want: Vec<f32> = rows
        .iter()
        .zip(&cols)
        .map(|(&i, &j)| data[i as usize * 5 + j as usize])
        .collect();
    assert_eq!(p.to_vec::<f32>(), want, "{dev}: x[rows, cols]");
    // an integer table, indexed along axis 0 with a slice on axis 1
    let xi = Tensor::from_slice(&(0..20).collect::<Vec<i32>>(), &[4, 5]).to(dev);
    let sel = Tensor::from_slice(&[2i32, 2, 0], &[3]).to(dev);
    let q = xi.getitem(&[sel.into(), Idx::range(1, 3)]);
    assert!(
        !has_reduce(&q),
        "{dev}: int x[idx, 1:3] is still a reduction"
    );
    assert_eq!(
        q.to_vec::<i32>(),
        vec![11, 12, 11, 12, 1, 2],
        "{dev}: int x[idx, 1:3]"
    );
}

#[test]
fn gather_and_tensor_index_are_loads_on_cpu() {
    gather_and_index_suite("CPU");
}

#[test]
fn gather_and_tensor_index_are_loads_on_ref() {
    gather_and_index_suite("REF");
}

#[test]
fn gather_and_tensor_index_are_loads_on_webgpu() {
    common::on_webgpu(
        "gather_and_tensor_index_are_loads_on_webgpu",
        gather_and_index_suite,
    );
}

#[test]
fn embedding_gradient_flows_to_the_selected_rows() {
    // the backward pass (a scatter-add over tokens) is not a one-hot over the table: it stays a
    // reduction and must still be right
    let (vocab, dim) = (10, 3);
    let w = Tensor::from_slice(&table(vocab, dim), &[vocab, dim]).requires_grad(true);
    let emb = Embedding { weight: w.clone() };
    let idx = Tensor::from_slice(&[2i32, 7, 2, 11], &[4]);
    let y = emb.forward(&idx);
    let up = Tensor::from_slice(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[4, 3]);
    (y * &up).sum(None).backward();
    let g = w.grad().expect("gradient").to_vec::<f32>();
    let mut want = vec![0.0f32; vocab * dim];
    for (t, &i) in [2usize, 7, 2].iter().enumerate() {
        for d in 0..dim {
            want[i * dim + d] += (t * dim + d) as f32;
        }
    }
    assert_eq!(g, want);
}
