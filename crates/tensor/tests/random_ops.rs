//! Random sampling ops without reference values (their numbers come from the generator):
//! structural and statistical checks — `randperm` is a permutation, `multinomial` never picks a
//! zero weight and its frequencies match the weights, `randint` stays in range and covers it.

use tinygrad_tensor::{DType, Tensor};

#[test]
fn randperm_is_a_permutation() {
    for (seed, n) in [(0u64, 1usize), (1, 2), (42, 10), (7, 257)] {
        Tensor::manual_seed(seed);
        let mut p = Tensor::randperm(n).to_vec::<i32>();
        assert_eq!(Tensor::randperm(n).dtype(), DType::INT32);
        p.sort_unstable();
        assert_eq!(p, (0..n as i32).collect::<Vec<_>>(), "seed {seed}, n {n}");
    }
    // different seeds give different orders
    Tensor::manual_seed(1);
    let a = Tensor::randperm(50).to_vec::<i32>();
    Tensor::manual_seed(2);
    let b = Tensor::randperm(50).to_vec::<i32>();
    assert_ne!(a, b);
}

#[test]
fn multinomial_frequencies_follow_the_weights() {
    Tensor::manual_seed(3);
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    let n = 20_000;
    let s = w.multinomial(n, true).to_vec::<i32>();
    assert_eq!(s.len(), n);
    let mut counts = [0usize; 4];
    for i in s {
        counts[i as usize] += 1;
    }
    for (k, &c) in counts.iter().enumerate() {
        let p = c as f64 / n as f64;
        let want = (k + 1) as f64 / 10.0;
        // 5 standard deviations of a binomial proportion
        let sd = (want * (1.0 - want) / n as f64).sqrt();
        assert!(
            (p - want).abs() < 5.0 * sd,
            "index {k}: frequency {p}, expected {want}"
        );
    }
}

#[test]
fn multinomial_rows_and_zero_weights() {
    Tensor::manual_seed(4);
    let w = Tensor::from_slice(&[0.0f32, 5.0, 0.0, 0.0, 0.0, 1.0], &[2, 3]);
    let s = w.multinomial(50, true);
    assert_eq!(s.shape(), vec![2, 50]);
    let v = s.to_vec::<i32>();
    assert!(
        v[..50].iter().all(|&i| i == 1),
        "row 0 has one non-zero weight"
    );
    assert!(
        v[50..].iter().all(|&i| i == 2),
        "row 1 has one non-zero weight"
    );
    let one = w.multinomial(1, false);
    assert_eq!((one.shape(), one.to_vec::<i32>()), (vec![2, 1], vec![1, 2]));
}

#[test]
#[should_panic(
    expected = "multinomial: without replacement only num_samples = 1 is supported, got 3"
)]
fn multinomial_without_replacement_needs_one_sample() {
    let _ = Tensor::from_slice(&[1.0f32, 1.0], &[2]).multinomial(3, false);
}

#[test]
fn randint_stays_in_range_and_covers_it() {
    Tensor::manual_seed(5);
    let v = Tensor::randint(&[4000], -3, 4, DType::INT32).to_vec::<i32>();
    assert!(v.iter().all(|&x| (-3..4).contains(&x)));
    for k in -3..4 {
        assert!(v.contains(&k), "{k} never drawn in 4000 samples");
    }
    let u = Tensor::randint(&[10], 0, 256, DType::UINT8);
    assert_eq!(u.dtype(), DType::UINT8);
}
