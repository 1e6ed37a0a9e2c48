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
