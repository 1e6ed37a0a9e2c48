//! Misuse panics with a message naming the op, the operands and what was expected; recoverable
//! errors (devices, reading data) come back as `Err`.

use tinygrad_tensor::{DType, DeviceError, Tensor, TensorError};

fn t(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice(&vec![1.0f32; n], shape)
}

#[test]
#[should_panic(expected = "add: cannot broadcast shapes [2, 3] and [4] (float32 and float32)")]
fn add_incompatible_shapes() {
    let _ = t(&[2, 3]) + t(&[4]);
}

#[test]
#[should_panic(expected = "reshape: shape [2, 3] (6 elements) can't become [4, 2] (8 elements)")]
fn reshape_wrong_size() {
    let _ = t(&[2, 3]).reshape(&[4, 2]);
}

#[test]
#[should_panic(expected = "reshape: only one dimension can be -1")]
fn reshape_two_inferred() {
    let _ = t(&[2, 3]).reshape(&[-1, -1]);
}

#[test]
#[should_panic(expected = "permute: [0, 0] repeats axis 0 (shape [2, 3])")]
fn permute_repeated_axis() {
    let _ = t(&[2, 3]).permute(&[0, 0]);
}

#[test]
#[should_panic(expected = "sum: axis 2 out of range for shape [2, 3] (ndim 2)")]
fn sum_bad_axis() {
    let _ = t(&[2, 3]).sum(2isize);
}

#[test]
#[should_panic(
    expected = "matmul: inner dimensions differ: [2, 3] @ [4, 5] (3 vs 4), dtypes float32 and float32"
)]
fn matmul_inner_mismatch() {
    let _ = t(&[2, 3]).matmul(&t(&[4, 5]));
}

/// `dot` is matmul underneath, but its errors name the op the user called.
#[test]
#[should_panic(
    expected = "dot: inner dimensions differ: [2, 4] @ [1, 3] (4 vs 1), dtypes float32 and float32"
)]
fn dot_inner_mismatch() {
    let _ = t(&[2, 4]).dot(&t(&[1, 3]));
}

#[test]
#[should_panic(expected = "shrink: range 1..5 out of bounds for axis 1 of size 3 (shape [2, 3])")]
fn shrink_out_of_bounds() {
    let _ = t(&[2, 3]).shrink(&[(0, 2), (1, 5)]);
}

#[test]
#[should_panic(expected = "expand: cannot broadcast shape [2, 3] to [4, 3]")]
fn expand_non_one_axis() {
    let _ = t(&[2, 3]).expand(&[4, 3]);
}

#[test]
#[should_panic(expected = "where: condition must be bool, got float32")]
fn where_needs_bool() {
    let _ = t(&[2]).where_(1.0, 2.0);
}

#[test]
#[should_panic(expected = "bitcast: float32 (4 bytes) to int16 (2 bytes) changes the item size")]
fn bitcast_size_mismatch() {
    let _ = t(&[2]).bitcast(DType::INT16);
}

#[test]
#[should_panic(expected = "idiv: needs integer operands, got float32")]
fn idiv_on_floats() {
    let _ = t(&[2]).idiv(&t(&[2]));
}

#[test]
#[should_panic(expected = "Tensor::from_slice: 3 values for shape [2, 2] (needs 4)")]
fn from_slice_wrong_length() {
    let _ = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]);
}

#[test]
#[should_panic(expected = "item: tensor of shape [2, 3] has 6 elements, expected 1")]
fn item_of_many() {
    let _ = t(&[2, 3]).item::<f32>();
}

#[test]
fn reading_with_the_wrong_type_is_an_error() {
    let err = t(&[2]).try_to_vec::<i32>().unwrap_err();
    assert_eq!(
        err,
        TensorError::DType {
            op: "to_vec",
            expected: DType::FLOAT32,
            got: DType::INT32
        }
    );
    assert_eq!(
        err.to_string(),
        "to_vec: tensor has dtype float32, asked for int32"
    );
}

#[test]
fn unknown_device_is_an_error() {
    let err = t(&[2]).try_to("TPU").unwrap_err();
    assert_eq!(err, DeviceError::Unknown { name: "TPU".into() });
    assert!(err.to_string().contains("available: CPU, REF"), "{err}");
}

#[test]
#[should_panic(expected = "einsum: \"ij,jk->ik\": letter 'j' labels axes of sizes 3 and 4")]
fn einsum_size_mismatch() {
    let _ = Tensor::einsum("ij,jk->ik", &[&t(&[2, 3]), &t(&[4, 2])]);
}

#[test]
#[should_panic(expected = "einsum: \"ij,jk->ik\" has 2 operands, got 1")]
fn einsum_operand_count() {
    let _ = Tensor::einsum("ij,jk->ik", &[&t(&[2, 3])]);
}

#[test]
#[should_panic(expected = "einsum: \"ij->k\": output letter 'k' labels no input axis")]
fn einsum_unknown_output_letter() {
    let _ = Tensor::einsum("ij->k", &[&t(&[2, 3])]);
}

#[test]
#[should_panic(expected = "einsum: \"ijk\": operand \"ijk\" has 3 letters but shape [2, 3]")]
fn einsum_wrong_rank() {
    let _ = Tensor::einsum("ijk", &[&t(&[2, 3])]);
}

#[test]
#[should_panic(expected = "diagonal: only 2-D square tensors are supported, got shape [2, 3]")]
fn diagonal_not_square() {
    let _ = t(&[2, 3]).diagonal();
}

#[test]
#[should_panic(expected = "pad_to: can't shrink axis of size 3 to 2 (shape [2, 3])")]
fn pad_to_smaller() {
    let _ = t(&[2, 3]).pad_to(&[None, Some(2)]);
}

#[test]
#[should_panic(
    expected = "CPU: cannot allocate 281474976710656 bytes for a buffer of 70368744177664 float32 elements"
)]
fn buffer_larger_than_memory_names_its_size() {
    // 2^46 floats = 256 TiB: more than the address space, so the allocation fails (instead of
    // Rust's default abort, a panic that says what did not fit)
    let big = Tensor::zeros_on(&[1 << 46], DType::FLOAT32, "CPU") + 1.0;
    big.realize();
}

#[test]
#[should_panic(expected = "interpolate: size [] for shape [2, 3]: expected 1 to 2 non-zero sizes")]
fn interpolate_without_sizes() {
    let _ = t(&[2, 3]).interpolate(&[], tinygrad_tensor::InterpolateMode::Linear, false);
}

#[test]
#[should_panic(
    expected = "interpolate: align_corners is only for InterpolateMode::Linear, got Nearest"
)]
fn interpolate_align_corners_needs_linear() {
    let _ = t(&[2, 3]).interpolate(&[4], tinygrad_tensor::InterpolateMode::Nearest, true);
}

#[test]
#[should_panic(expected = "rearrange: need exactly one \"->\" in \"a b\"")]
fn rearrange_without_arrow() {
    let _ = t(&[2, 3]).rearrange("a b", &[]);
}

#[test]
#[should_panic(expected = "rearrange: name mismatch in \"a b -> a c\"")]
fn rearrange_name_mismatch() {
    let _ = t(&[2, 3]).rearrange("a b -> a c", &[]);
}

#[test]
#[should_panic(
    expected = "rearrange: axis 0 of shape [6, 3] cannot be split into [\"h\", \"w\"] with sizes [(\"h\", 4)]"
)]
fn rearrange_split_that_does_not_divide() {
    let _ = t(&[6, 3]).rearrange("(h w) c -> h w c", &[("h", 4)]);
}

#[test]
#[should_panic(expected = "rearrange: \"a b c -> c b a\" names 3 axes, shape [2, 3] has 2")]
fn rearrange_wrong_axis_count() {
    let _ = t(&[2, 3]).rearrange("a b c -> c b a", &[]);
}
