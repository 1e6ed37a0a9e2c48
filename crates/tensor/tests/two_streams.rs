//! Large streaming kernels whose outer loop the Cranelift renderer runs as two interleaved
//! streams (`tinygrad_codegen::cranelift::two_stream_body`): each case checks that its kernel
//! qualifies and compares every element with values computed here — odd lengths (the second
//! stream one iteration shorter), a reversed read, a padded (gated) read, a select, a cast, a
//! bool and a half output.

use tinygrad_codegen::cranelift::{TWO_STREAM_MIN_BYTES, two_stream_body};
use tinygrad_codegen::to_program_with;
use tinygrad_tensor::{DType, Tensor, get_device};

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) >> 9) as f32 / (1u32 << 23) as f32 - 0.5)
        .collect()
}

/// Asserts that `t`'s last kernel runs as two streams on the CPU device (unless turned off).
fn qualifies(name: &str, t: &Tensor) {
    let items = Tensor::schedule(&[t]);
    let item = items.last().expect("a kernel");
    let dev = get_device("CPU").unwrap();
    let prog = to_program_with(&item.ast, dev.caps(), dev.optimizes());
    assert!(
        two_stream_body(&prog).is_some(),
        "{name}: kernel {} does not run as two streams",
        prog.name
    );
}

/// Elements of `itemsize` bytes just past the threshold, plus `extra`.
fn len(itemsize: usize, extra: usize) -> usize {
    TWO_STREAM_MIN_BYTES / itemsize + extra
}

#[test]
fn two_stream_kernels_match_plain_loops() {
    if std::env::var("CPU_TWO_STREAMS").is_ok_and(|v| v == "0") {
        println!("values only: two streams are off (CPU_TWO_STREAMS=0)");
    }
    for extra in [0, 1, 8, 13] {
        let n = len(4, extra);
        let (av, bv) = (data(n, 1), data(n, 2));
        let a = Tensor::from_slice(&av, &[n]);
        let b = Tensor::from_slice(&bv, &[n]);
        let sum = &a + &b;
        qualifies("a + b", &sum);
        let got = sum.to_vec::<f32>();
        for i in 0..n {
            assert_eq!(got[i], av[i] + bv[i], "a + b, {n}: element {i}");
        }
        let relu = a.relu();
        qualifies("relu", &relu);
        let got = relu.to_vec::<f32>();
        for i in 0..n {
            assert_eq!(got[i], av[i].max(0.0), "relu, {n}: element {i}");
        }
        let flipped = a.flip(&[0]) * 2.0f32;
        qualifies("flip * 2", &flipped);
        let got = flipped.to_vec::<f32>();
        for i in 0..n {
            assert_eq!(got[i], av[n - 1 - i] * 2.0, "flip, {n}: element {i}");
        }
        let select = a.gt(&b).where_(&a, &b);
        qualifies("where", &select);
        let got = select.to_vec::<f32>();
        for i in 0..n {
            assert_eq!(got[i], av[i].max(bv[i]), "where, {n}: element {i}");
        }
    }
    // a padded read: the first and last 5 elements are 0 (gated loads)
    let n = len(4, 3);
    let av = data(n - 10, 3);
    let a = Tensor::from_slice(&av, &[n - 10]);
    let padded = a.pad(&[(5, 5)], 0.0f32) + 1.0f32;
    qualifies("pad + 1", &padded);
    let got = padded.to_vec::<f32>();
    for (i, g) in got.iter().enumerate() {
        let want = if (5..n - 5).contains(&i) {
            av[i - 5] + 1.0
        } else {
            1.0
        };
        assert_eq!(*g, want, "pad: element {i}");
    }
    // a cast to int32, a bool output (1-byte elements) and a half output (2-byte)
    let n = len(1, 7);
    let av = data(n, 4);
    let a = Tensor::from_slice(&av, &[n]);
    let ints = (&a * 1000.0f32).cast(DType::INT32);
    qualifies("cast", &ints);
    let got = ints.to_vec::<i32>();
    for i in 0..n {
        assert_eq!(got[i], (av[i] * 1000.0) as i32, "cast: element {i}");
    }
    let positive = a.gt(&Tensor::from_slice(&[0.0f32], &[1]).expand(&[n as isize]));
    qualifies("a > 0", &positive);
    let got = positive.to_vec::<bool>();
    for i in 0..n {
        assert_eq!(got[i], av[i] > 0.0, "a > 0: element {i}");
    }
    let halves = a.cast(DType::FLOAT16);
    qualifies("cast to half", &halves);
    let got = halves.cast(DType::FLOAT32).to_vec::<f32>();
    for i in 0..n {
        let want = half::f16::from_f32(av[i]).to_f32();
        assert_eq!(got[i], want, "half: element {i}");
    }
}

#[test]
fn small_outputs_and_many_buffers_stay_one_stream() {
    let dev = get_device("CPU").unwrap();
    let prog_of = |t: &Tensor| {
        let items = Tensor::schedule(&[t]);
        to_program_with(&items.last().unwrap().ast, dev.caps(), dev.optimizes())
    };
    let n = len(4, 0);
    let small = Tensor::from_slice(&data(1000, 5), &[1000]) + 1.0f32;
    assert!(two_stream_body(&prog_of(&small)).is_none(), "1000 elements");
    let t: Vec<Tensor> = (0..4)
        .map(|s| Tensor::from_slice(&data(n, s), &[n]))
        .collect();
    let four_inputs = &(&(&t[0] * &t[1]) + &t[2]) - &t[3];
    assert!(
        two_stream_body(&prog_of(&four_inputs)).is_none(),
        "5 buffers"
    );
    let (w, x) = (data(n, 0), data(n, 1));
    let (y, z) = (data(n, 2), data(n, 3));
    let got = four_inputs.to_vec::<f32>();
    for i in 0..n {
        // (the multiply-add is fused: FMA)
        assert_eq!(got[i], w[i].mul_add(x[i], y[i]) - z[i], "element {i}");
    }
}
