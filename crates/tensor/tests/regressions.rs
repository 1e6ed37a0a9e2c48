//! Regression tests for bugs found by the golden suite (`tests/golden.rs`), on both devices.

use tinygrad_tensor::Tensor;

const DEVICES: [&str; 2] = ["CPU", "REF"];

#[test]
fn argmax_of_flattened_matrix() {
    let data = [
        0.5f32, -1.0, 0.5, 0.0, 0.5, -0.5, 1.0, 0.5, -0.5, -1.0, 0.5, 0.0,
    ];
    for dev in DEVICES {
        let t = Tensor::from_slice_on(&data, &[3, 4], dev);
        assert_eq!(t.argmax(None).to_vec::<i32>(), vec![6], "{dev}");
    }
}

/// `min` of ints is `~max(~x)` like tinygrad (`-x` overflows: the empty min came out INT_MIN).
#[test]
fn min_of_empty_int_reduction_is_int_max() {
    for dev in DEVICES {
        let t = Tensor::from_slice_on::<i32>(&[], &[0, 2], dev);
        assert_eq!(t.min(0isize).to_vec::<i32>(), vec![i32::MAX; 2], "{dev}");
        let t = Tensor::from_slice_on(&[i32::MIN, 5, -3], &[3], dev);
        assert_eq!(t.min(0isize).item::<i32>(), i32::MIN, "{dev}");
        assert_eq!(t.argmin(None).item::<i32>(), 0, "{dev}");
    }
}

/// A kernel whose loads from an input are all simplified away (the input is empty) still takes
/// that input's buffer.
#[test]
fn cat_with_an_empty_input() {
    for dev in DEVICES {
        let a = Tensor::from_slice_on::<f32>(&[], &[2, 0], dev);
        let b = Tensor::from_slice_on(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], dev);
        let c = Tensor::cat(&[&a, &b], 1);
        assert_eq!(
            c.to_vec::<f32>(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "{dev}"
        );
        let c = Tensor::cat(&[&b, &a], 1);
        assert_eq!(
            c.to_vec::<f32>(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "{dev}"
        );
    }
}

/// Comparisons cast to numbers in vector kernels (lane masks become 0/1 with one `and`;
/// before, each lane was extracted, converted and inserted back), and float `where` through
/// integer `cmov`s, with signs of zero and NaN kept.
#[test]
fn vector_casts_of_comparisons_and_float_selects() {
    let data = [
        1.0f32,
        -2.0,
        3.0,
        0.0,
        5.0,
        -1.0,
        0.5,
        -0.5,
        f32::NAN,
        -0.0,
        7.0,
        -7.0,
    ];
    for dev in DEVICES {
        let t = Tensor::from_slice_on(&data, &[12], dev);
        let pos = t.gt(0.0);
        let want: Vec<f32> = data.iter().map(|v| f32::from(u8::from(*v > 0.0))).collect();
        assert_eq!(
            pos.cast(tinygrad_tensor::DType::FLOAT32).to_vec::<f32>(),
            want,
            "{dev}"
        );
        let want: Vec<i32> = data.iter().map(|v| i32::from(*v > 0.0)).collect();
        assert_eq!(
            pos.cast(tinygrad_tensor::DType::INT32).to_vec::<i32>(),
            want,
            "{dev}"
        );
        let sel = pos.where_(&t, &(-&t)).to_vec::<f32>();
        for (i, (s, v)) in sel.iter().zip(&data).enumerate() {
            let w = if *v > 0.0 { *v } else { -*v };
            if w.is_nan() {
                // `-x` is `x * -1` (tinygrad): a NaN's sign bit is the hardware's choice
                assert!(s.is_nan(), "{dev}: element {i}: {s}");
            } else {
                assert_eq!(s.to_bits(), w.to_bits(), "{dev}: element {i}");
            }
        }
    }
}
