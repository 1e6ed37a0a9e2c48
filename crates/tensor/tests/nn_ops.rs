//! nn ops (`crates/tensor/src/nn_ops/`): golden cases from `tests/golden/nn_cases.json`
//! (numpy float64 references by `tests/golden/gen_nn.py`; convolutions and pools by explicit
//! loops) on CPU and REF, plus kernel counts, bad-input messages, and the random generator.
//!
//! Tolerance: atol 1e-6, rtol 1e-3 (tinygrad's), except cases marked with `"atol": 1e-5` in the
//! JSON: outputs of long float32 reductions (convolutions with many taps, average pools,
//! normalizations, attention, losses), where the float32 summation order alone moves results
//! near zero by more than 1e-6.
//!
//! Debugging: `NN_FILTER=substr[,substr...]` runs only matching cases; `NN_VERBOSE=1` prints each.

mod common;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use common::{dims, int, padding, usizes};
use serde_json::Value;
use tinygrad_tensor::{DType, Dims, InterpolateMode, Padding, Reduction, Tensor};

const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-3;

fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("a number"),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => panic!("bad number string {other:?}"),
        },
        other => panic!("expected a number, got {other}"),
    }
}

fn reduction(v: &Value) -> Reduction {
    match v.as_str().expect("reduction") {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => panic!("unknown reduction {other:?}"),
    }
}

fn make_input(spec: &Value, device: &str) -> Tensor {
    let shape = usizes(&spec["shape"]);
    let data = spec["data"].as_array().expect("data");
    match spec["dtype"].as_str().expect("dtype") {
        "float32" => {
            let v: Vec<f32> = data.iter().map(|x| num(x) as f32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "int32" => {
            let v: Vec<i32> = data.iter().map(|x| int(x) as i32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "bool" => {
            let v: Vec<bool> = data.iter().map(|x| x.as_bool().expect("bool")).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        other => panic!("unknown dtype {other:?}"),
    }
}

fn f(args: &Value, key: &str) -> f64 {
    num(&args[key])
}

fn flag(args: &Value, key: &str) -> bool {
    args[key].as_bool().unwrap_or(false)
}

/// Runs one case's op on `device`.
fn run_op(case: &Value, device: &str) -> Tensor {
    let op = case["op"].as_str().expect("op");
    let a = &case["args"];
    let xs: Vec<Tensor> = case["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|s| make_input(s, device))
        .collect();
    let x = &xs[0];
    let opt = |i: usize, present: bool| if present { xs.get(i) } else { None };
    match op {
        "conv2d" => x.conv2d(
            &xs[1],
            opt(2, flag(a, "bias")),
            int(&a["groups"]) as usize,
            dims(&a["stride"]),
            dims(&a["dilation"]),
            padding(&a["padding"]),
        ),
        "conv_transpose2d" => x.conv_transpose2d(
            &xs[1],
            opt(2, flag(a, "bias")),
            int(&a["groups"]) as usize,
            dims(&a["stride"]),
            dims(&a["dilation"]),
            padding(&a["padding"]),
            dims(&a["output_padding"]),
        ),
        "max_pool2d" => x.max_pool2d(
            dims(&a["kernel"]),
            dims(&a["stride"]),
            dims(&a["dilation"]),
            padding(&a["padding"]),
            flag(a, "ceil_mode"),
        ),
        "max_pool2d_indices" => {
            x.max_pool2d_with_indices(
                dims(&a["kernel"]),
                dims(&a["stride"]),
                dims(&a["dilation"]),
                padding(&a["padding"]),
                flag(a, "ceil_mode"),
            )
            .1
        }
        "max_unpool2d" => {
            let (values, indices) = x.max_pool2d_with_indices(
                dims(&a["kernel"]),
                dims(&a["stride"]),
                dims(&a["dilation"]),
                padding(&a["padding"]),
                flag(a, "ceil_mode"),
            );
            let size = a["output_size"]
                .as_array()
                .map(|_| usizes(&a["output_size"]));
            values.max_unpool2d(
                &indices,
                dims(&a["kernel"]),
                dims(&a["stride"]),
                dims(&a["dilation"]),
                padding(&a["padding"]),
                size.as_deref(),
            )
        }
        "avg_pool2d" => x.avg_pool2d(
            dims(&a["kernel"]),
            dims(&a["stride"]),
            dims(&a["dilation"]),
            padding(&a["padding"]),
            flag(a, "ceil_mode"),
            flag(a, "count_include_pad"),
        ),
        "relu6" => x.relu6(),
        "leaky_relu" => x.leaky_relu(f(a, "neg_slope")),
        "elu" => x.elu(f(a, "alpha")),
        "celu" => x.celu(f(a, "alpha")),
        "selu" => x.selu(),
        "gelu" => x.gelu(),
        "quick_gelu" => x.quick_gelu(),
        "silu" => x.silu(),
        "swish" => x.swish(),
        "mish" => x.mish(),
        "softplus" => x.softplus(f(a, "beta")),
        "logsigmoid" => x.logsigmoid(),
        "softsign" => x.softsign(),
        "hardsigmoid" => x.hardsigmoid(f(a, "alpha"), f(a, "beta")),
        "hardswish" => x.hardswish(),
        "hardtanh" => x.hardtanh(f(a, "min_val"), f(a, "max_val")),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "asinh" => x.asinh(),
        "acosh" => x.acosh(),
        "atanh" => x.atanh(),
        "erf" => x.erf(),
        "isinf" => x.isinf(),
        "isinf_signed" => x.isinf_signed(flag(a, "pos"), flag(a, "neg")),
        "isnan" => x.isnan(),
        "isfinite" => x.isfinite(),
        "lerp" => match xs.get(2) {
            Some(w) => x.lerp(&xs[1], w),
            None => x.lerp(&xs[1], f(a, "weight")),
        },
        "layernorm" => {
            let axis: Vec<isize> = match &a["axis"] {
                Value::Array(v) => v.iter().map(|x| int(x) as isize).collect(),
                v => vec![int(v) as isize],
            };
            x.layernorm(axis, f(a, "eps"))
        }
        "batchnorm" => {
            let mut i = 1;
            let mut next = |present: bool| {
                present.then(|| {
                    i += 1;
                    &xs[i - 1]
                })
            };
            let w = next(flag(a, "weight"));
            let b = next(flag(a, "bias"));
            let mean = next(true).expect("mean");
            let invstd = next(true).expect("invstd");
            x.batchnorm(w, b, mean, invstd)
        }
        "normalize" => x.normalize(f(a, "p"), int(&a["dim"]) as isize, f(a, "eps")),
        "one_hot" => x.one_hot(int(&a["num_classes"]) as isize),
        "interpolate" => x.interpolate(
            &usizes(&a["size"]),
            match a["mode"].as_str().expect("mode") {
                "linear" => InterpolateMode::Linear,
                "nearest" => InterpolateMode::Nearest,
                "nearest-exact" => InterpolateMode::NearestExact,
                other => panic!("unknown interpolate mode {other:?}"),
            },
            flag(a, "align_corners"),
        ),
        "sdpa" => x.scaled_dot_product_attention(
            &xs[1],
            &xs[2],
            opt(3, flag(a, "mask")),
            0.0,
            flag(a, "causal"),
        ),
        "binary_crossentropy" => x.binary_crossentropy(&xs[1], reduction(&a["reduction"])),
        "binary_crossentropy_logits" => x.binary_crossentropy_logits(
            &xs[1],
            reduction(&a["reduction"]),
            opt(2, flag(a, "pos_weight")),
        ),
        "sparse_categorical_crossentropy" => x.sparse_categorical_crossentropy(
            &xs[1],
            int(&a["ignore_index"]),
            f(a, "label_smoothing"),
            reduction(&a["reduction"]),
        ),
        "cross_entropy" => {
            x.cross_entropy(&xs[1], reduction(&a["reduction"]), f(a, "label_smoothing"))
        }
        "nll_loss" => x.nll_loss(
            &xs[1],
            opt(2, flag(a, "weight")),
            a["ignore_index"].as_i64(),
            reduction(&a["reduction"]),
        ),
        other => panic!("unknown op {other:?}"),
    }
}

fn dtype_of(name: &str) -> DType {
    match name {
        "float32" => DType::FLOAT32,
        "int32" => DType::INT32,
        "bool" => DType::BOOL,
        other => panic!("unknown dtype {other:?}"),
    }
}

fn check(case: &Value, got: &Tensor, device: &str) -> Result<(), String> {
    let out = &case["out"];
    let exp_shape = usizes(&out["shape"]);
    let exp_dt = dtype_of(out["dtype"].as_str().expect("out dtype"));
    if got.shape() != exp_shape || got.dtype() != exp_dt {
        return Err(format!(
            "expected {exp_shape:?} {exp_dt}, got {:?} {}",
            got.shape(),
            got.dtype()
        ));
    }
    if got.device() != device {
        return Err(format!("device: expected {device}, got {}", got.device()));
    }
    let atol = case.get("atol").map_or(ATOL, num);
    let vals = got.to_f64_vec();
    let exp: Vec<f64> = out["data"]
        .as_array()
        .expect("out data")
        .iter()
        .map(num)
        .collect();
    let bad: Vec<usize> = (0..exp.len())
        .filter(|&i| {
            let (g, e) = (vals[i], exp[i]);
            if !exp_dt.is_float() {
                g != e
            } else if e.is_nan() {
                !g.is_nan()
            } else if e.is_infinite() {
                g != e
            } else {
                // NaN results fail too
                let close = (g - e).abs() <= atol + RTOL * e.abs();
                !close
            }
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let mut err = format!("{} of {} values differ:", bad.len(), exp.len());
    for &i in bad.iter().take(6) {
        let _ = write!(err, " [{i}] expected {} got {};", exp[i], vals[i]);
    }
    Err(err)
}

fn run_suite(device: &str) {
    common::install_quiet_hook();
    let filter: Vec<String> = std::env::var("NN_FILTER")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = std::env::var("NN_VERBOSE").is_ok_and(|v| v == "1");
    let cases = common::load_cases("nn_cases.json");
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if verbose {
            eprintln!("{device} {name}");
        }
        ran += 1;
        common::set_in_case(true);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let got = run_op(case, device);
            check(case, &got, device)
        }));
        common::set_in_case(false);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{name}: {e}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{name}: panicked: {msg}"));
            }
        }
    }
    assert!(ran > 0, "no nn cases ran");
    assert!(
        failures.is_empty(),
        "{device}: {} of {ran} nn cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
    eprintln!("{device}: {ran} nn cases passed");
}

#[test]
fn nn_golden_cpu() {
    run_suite("CPU");
}

#[test]
fn nn_golden_ref() {
    run_suite("REF");
}

/// The suite on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is skipped,
/// saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter fail.
#[test]
fn nn_golden_webgpu() {
    common::on_webgpu("nn_golden_webgpu", run_suite);
}

// ---- kernel counts ----

fn conv_relu(device: &str, pool: bool) -> Tensor {
    let x = Tensor::from_slice_on(&vec![0.5f32; 2 * 3 * 8 * 8], &[2, 3, 8, 8], device);
    let w = Tensor::from_slice_on(&vec![0.1f32; 4 * 3 * 3 * 3], &[4, 3, 3, 3], device);
    let b = Tensor::from_slice_on(&[0.0f32, 1.0, -1.0, 2.0], &[4], device);
    let y = x.conv2d(&w, Some(&b), 1, 1, 1, 1).relu();
    if pool {
        y.max_pool2d(2, Dims::Default, 1, 0, false)
    } else {
        y
    }
}

#[test]
fn conv2d_relu_is_one_kernel() {
    let y = conv_relu("CPU", false);
    assert_eq!(Tensor::schedule(&[&y]).len(), 1, "conv2d + bias + relu");
    // conv + relu + max_pool: the pool reads the conv through a window, so the conv is realized
    let z = conv_relu("CPU", true);
    let n = Tensor::schedule(&[&z]).len();
    assert!(n <= 2, "conv2d + relu + max_pool2d: {n} kernels");
    let v = y.to_vec::<f32>();
    assert_eq!(v.len(), 2 * 4 * 8 * 8);
    // interior: 27 taps of 0.5*0.1 + bias
    assert!((v[9] - 1.35).abs() < 1e-5, "got {}", v[9]);
}

#[test]
fn small_ops_fuse() {
    let _g = RNG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let x = Tensor::from_slice_on(&[1.0f32, -2.0, 3.0, 0.5, 0.0, -1.0], &[2, 3], "CPU");
    for (name, t, want) in [
        ("gelu", x.gelu(), 1),
        ("erf", x.erf(), 1),
        ("mish", x.mish(), 1),
        ("hardswish", x.hardswish(), 1),
        (
            "one_hot",
            Tensor::from_slice_on(&[0i32, 2, 1], &[3], "CPU").one_hot(3),
            1,
        ),
        ("rand", Tensor::rand_on(&[4, 5], DType::FLOAT32, "CPU"), 1),
        ("layernorm", x.layernorm(-1isize, 1e-5), 3),
    ] {
        let n = Tensor::schedule(&[&t]).len();
        assert!(n <= want, "{name}: {n} kernels, expected at most {want}");
    }
}

// ---- bad input ----

fn t(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice_on(&vec![1.0f32; n], shape, "CPU")
}

#[test]
#[should_panic(
    expected = "conv2d: input shape [1, 3, 5, 5] has 3 channels, but weight shape [4, 2, 3, 3] with groups=1 expects 2"
)]
fn conv2d_wrong_channels() {
    t(&[1, 3, 5, 5]).conv2d(&t(&[4, 2, 3, 3]), None, 1, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: kernel [5, 5] (weight shape [1, 1, 5, 5], dilation [1, 1]) is larger than the padded input: input shape [1, 1, 4, 4]"
)]
fn conv2d_kernel_too_large() {
    t(&[1, 1, 4, 4]).conv2d(&t(&[1, 1, 5, 5]), None, 1, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: kernel [3, 3] (weight shape [1, 1, 3, 3], dilation [2, 2]) is larger than the padded input"
)]
fn conv2d_dilated_kernel_too_large() {
    t(&[1, 1, 4, 4]).conv2d(&t(&[1, 1, 3, 3]), None, 1, 1, 2, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: weight shape [3, 2, 3, 3] has 3 output channels, not divisible by groups=2"
)]
fn conv2d_bad_groups_out() {
    t(&[1, 4, 5, 5]).conv2d(&t(&[3, 2, 3, 3]), None, 2, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: input shape [1, 4, 5, 5] has 4 channels, but weight shape [4, 2, 3, 3] with groups=3 expects 6"
)]
fn conv2d_bad_groups_in() {
    t(&[1, 4, 5, 5]).conv2d(&t(&[4, 2, 3, 3]), None, 3, 1, 1, 0);
}

#[test]
#[should_panic(expected = "conv2d: groups must be at least 1")]
fn conv2d_zero_groups() {
    t(&[1, 4, 5, 5]).conv2d(&t(&[4, 4, 3, 3]), None, 0, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: input shape [1, 5, 5] and weight shape [1, 1, 3, 3] need the same number of dims"
)]
fn conv2d_wrong_ndim() {
    t(&[1, 5, 5]).conv2d(&t(&[1, 1, 3, 3]), None, 1, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: bias shape [3] doesn't match the 4 output channels of weight shape [4, 1, 3, 3], expected [4]"
)]
fn conv2d_bad_bias() {
    t(&[1, 1, 5, 5]).conv2d(&t(&[4, 1, 3, 3]), Some(&t(&[3])), 1, 1, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv2d: padding must be an int or a sequence of length 2 or 4, got Flat([1, 1, 1])"
)]
fn conv2d_bad_padding() {
    t(&[1, 1, 5, 5]).conv2d(&t(&[1, 1, 3, 3]), None, 1, 1, 1, [1, 1, 1]);
}

#[test]
#[should_panic(expected = "conv2d: stride [1, 2, 3] has 3 values, expected 1 or 2")]
fn conv2d_bad_stride() {
    t(&[1, 1, 5, 5]).conv2d(&t(&[1, 1, 3, 3]), None, 1, [1, 2, 3], 1, 0);
}

#[test]
#[should_panic(expected = "conv2d: stride [0, 0] must be positive")]
fn conv2d_zero_stride() {
    t(&[1, 1, 5, 5]).conv2d(&t(&[1, 1, 3, 3]), None, 1, 0, 1, 0);
}

#[test]
#[should_panic(
    expected = "conv_transpose2d: input shape [1, 3, 4, 4] has 3 channels, weight shape [2, 1, 3, 3] expects 2"
)]
fn conv_transpose2d_wrong_channels() {
    t(&[1, 3, 4, 4]).conv_transpose2d(&t(&[2, 1, 3, 3]), None, 1, 1, 1, 0, 0);
}

#[test]
#[should_panic(
    expected = "max_pool2d: kernel [3, 3] with dilation [1, 1] is larger than the padded input: input shape [1, 1, 2, 5]"
)]
fn max_pool_kernel_too_large() {
    t(&[1, 1, 2, 5]).max_pool2d(3, Dims::Default, 1, 0, false);
}

#[test]
#[should_panic(expected = "avg_pool2d: input shape [4] has fewer dims than the kernel [2, 2]")]
fn avg_pool_too_few_dims() {
    t(&[4]).avg_pool2d([2, 2], Dims::Default, 1, 0, false, true);
}

#[test]
#[should_panic(
    expected = "sparse_categorical_crossentropy: labels shape [3] must be the logits shape [4, 5] without the class axis"
)]
fn sparse_ce_bad_labels() {
    let y = Tensor::from_slice_on(&[0i32, 1, 2], &[3], "CPU");
    t(&[4, 5]).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
}

#[test]
#[should_panic(expected = "one_hot: expects an integer dtype, got float32")]
fn one_hot_float() {
    t(&[3]).one_hot(4);
}

#[test]
#[should_panic(expected = "dropout: p=1.5 is out of range [0, 1]")]
fn dropout_bad_p() {
    t(&[3]).dropout(1.5);
}

#[test]
#[should_panic(expected = "rand: only float dtypes, got int32")]
fn rand_int() {
    Tensor::rand_on(&[3], DType::INT32, "CPU");
}

// ---- extra semantics ----

#[test]
fn pool_view_shape() {
    let x = t(&[2, 3, 7, 9]);
    assert_eq!(
        x.pool([3, 2], [2, 3], [1, 2]).shape(),
        vec![2, 3, 3, 3, 3, 2]
    );
    assert_eq!(x.pool(2, 2, 1).shape(), vec![2, 3, 3, 4, 2, 2]);
    // the example of tinygrad's docs: t = arange(9).reshape(1,1,3,3); t.conv2d(ones(1,1,2,2))
    let a: Vec<f32> = (0..9).map(|v| v as f32).collect();
    let a = Tensor::from_slice_on(&a, &[1, 1, 3, 3], "CPU");
    let w = Tensor::from_slice_on(&[1.0f32; 4], &[1, 1, 2, 2], "CPU");
    assert_eq!(
        a.conv2d(&w, None, 1, 1, 1, 0).to_vec::<f32>(),
        vec![8.0, 12.0, 20.0, 24.0]
    );
    assert_eq!(
        a.conv_transpose2d(&w, None, 1, 1, 1, 0, 0).to_vec::<f32>(),
        vec![
            0.0, 1.0, 3.0, 2.0, 3.0, 8.0, 12.0, 7.0, 9.0, 20.0, 24.0, 13.0, 6.0, 13.0, 15.0, 8.0
        ]
    );
    // pairs padding (dimension order) equals the flat form (last dimension first)
    let p1 = a.conv2d(&w, None, 1, 1, 1, Padding::Pairs(vec![(1, 0), (0, 2)]));
    let p2 = a.conv2d(&w, None, 1, 1, 1, [0, 2, 1, 0]);
    assert_eq!(p1.shape(), vec![1, 1, 3, 4]);
    assert_eq!(p1.to_vec::<f32>(), p2.to_vec::<f32>());
}

#[test]
fn dropout_edges() {
    let x = t(&[4, 4]);
    // outside training mode dropout is the identity
    assert_eq!(x.dropout(0.5).to_vec::<f32>(), vec![1.0; 16]);
    let _train = Tensor::train(true);
    assert_eq!(x.dropout(0.0).to_vec::<f32>(), vec![1.0; 16]);
    assert_eq!(x.dropout(1.0).to_vec::<f32>(), vec![0.0; 16]);
}

// ---- random numbers ----

/// `manual_seed` and the call counter are global: tests that depend on them take this lock.
static RNG_LOCK: Mutex<()> = Mutex::new(());

fn threefry_scalar(c: [u32; 2], k: [u32; 2]) -> [u32; 2] {
    const R: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    let ks = [k[0], k[1], k[0] ^ k[1] ^ 0x1BD1_1BDA];
    let (mut x0, mut x1) = (c[0].wrapping_add(ks[0]), c[1].wrapping_add(ks[1]));
    for r in 0..20 {
        x0 = x0.wrapping_add(x1);
        x1 = x1.rotate_left(R[r % 8]) ^ x0;
        if r % 4 == 3 {
            let j = (r + 1) / 4;
            x0 = x0.wrapping_add(ks[j % 3]);
            x1 = x1.wrapping_add(ks[(j + 1) % 3]).wrapping_add(j as u32);
        }
    }
    [x0, x1]
}

#[test]
fn threefry_known_answers() {
    // Random123's known-answer vectors for threefry2x32_20
    let kat: [([u32; 2], [u32; 2], [u32; 2]); 3] = [
        ([0, 0], [0, 0], [0x6b20_0159, 0x99ba_4efe]),
        (
            [0xffff_ffff, 0xffff_ffff],
            [0xffff_ffff, 0xffff_ffff],
            [0x1cb9_96fc, 0xbb00_2be7],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3],
            [0x1319_8a2e, 0x0370_7344],
            [0xc492_3a9c, 0x483d_f7a0],
        ),
    ];
    for (c, k, want) in kat {
        assert_eq!(threefry_scalar(c, k), want, "scalar reference");
    }
    for dev in ["CPU", "REF"] {
        let col = |i: usize, j: usize| {
            let v: Vec<u32> = kat.iter().map(|r| [r.0, r.1][i][j]).collect();
            Tensor::from_slice_on(&v, &[3], dev)
        };
        let (x0, x1) = Tensor::threefry2x32(&col(0, 0), &col(0, 1), &col(1, 0), &col(1, 1));
        let w0: Vec<u32> = kat.iter().map(|r| r.2[0]).collect();
        let w1: Vec<u32> = kat.iter().map(|r| r.2[1]).collect();
        assert_eq!(x0.to_vec::<u32>(), w0, "{dev} word 0");
        assert_eq!(x1.to_vec::<u32>(), w1, "{dev} word 1");
    }
}

#[test]
fn rand_is_deterministic_and_uniform() {
    let _g = RNG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    Tensor::manual_seed(42);
    let a = Tensor::rand_on(&[100, 100], DType::FLOAT32, "CPU").to_vec::<f32>();
    let b = Tensor::rand_on(&[100, 100], DType::FLOAT32, "CPU").to_vec::<f32>();
    Tensor::manual_seed(42);
    let a2 = Tensor::rand_on(&[100, 100], DType::FLOAT32, "CPU").to_vec::<f32>();
    let b2 = Tensor::rand_on(&[100, 100], DType::FLOAT32, "CPU").to_vec::<f32>();
    assert!(a == a2, "same seed, same first call");
    assert!(b == b2, "same seed, same second call");
    assert!(a != b, "two calls differ");
    // the same values on another device (REF is slow: a smaller call on both)
    Tensor::manual_seed(42);
    let c = Tensor::rand_on(&[20, 25], DType::FLOAT32, "CPU").to_vec::<f32>();
    Tensor::manual_seed(42);
    let r = Tensor::rand_on(&[20, 25], DType::FLOAT32, "REF").to_vec::<f32>();
    assert!(r == c, "REF vs CPU");
    // the values, tinygrad's layout: the call key is threefry(counter 0, device key), the
    // device key (low 32 bits of sha256 of device index 0, seed); element i < n/2 is word 0 of
    // threefry((i, i + n/2), call key), element n/2 + i its word 1
    let call_key = threefry_scalar([0, 0], [0x14b8_1119, 42]);
    for i in [0usize, 1, 2, 777, 4999, 5000, 9999] {
        let (j, word) = if i < 5000 { (i, 0) } else { (i - 5000, 1) };
        let bits = threefry_scalar([j as u32, (j + 5000) as u32], call_key)[word];
        let want = f32::from_bits((bits >> 9) | 0x3f80_0000) - 1.0;
        assert_eq!(a[i], want, "element {i}");
    }
    for v in [&a, &b] {
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "in [0, 1)");
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        let var = v
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.005, "variance {var}");
        // buckets of 0.1: each within 15% of the expected 1000
        let mut hist = [0usize; 10];
        for &x in v.iter() {
            hist[((x * 10.0) as usize).min(9)] += 1;
        }
        assert!(hist.iter().all(|&h| (850..=1150).contains(&h)), "{hist:?}");
    }
    // other float dtypes
    Tensor::manual_seed(7);
    for dt in [DType::FLOAT64, DType::FLOAT16] {
        let r = Tensor::rand_on(&[1000], dt, "CPU");
        assert_eq!(r.dtype(), dt);
        let v = r.to_f64_vec();
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dt} in [0, 1)");
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{dt} mean {mean}");
    }
    assert_eq!(
        Tensor::rand_on(&[0, 3], DType::FLOAT32, "CPU").shape(),
        vec![0, 3]
    );
}

#[test]
fn rand_calls_share_one_kernel() {
    let _g = RNG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // the seed and call number are loaded from a buffer: every call has the same kernel AST (so
    // the compiled kernel is reused), only the buffers differ
    let a = Tensor::rand_on(&[37], DType::FLOAT32, "CPU");
    let b = Tensor::rand_on(&[37], DType::FLOAT32, "CPU");
    let (sa, sb) = (Tensor::schedule(&[&a]), Tensor::schedule(&[&b]));
    assert_eq!(sa.len(), 1);
    assert_eq!(sb.len(), 1);
    assert!(
        sa[0].ast == sb[0].ast,
        "two rand calls build different kernels"
    );
}

#[test]
fn dropout_statistics() {
    let _g = RNG_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _train = Tensor::train(true);
    Tensor::manual_seed(1);
    let x = Tensor::from_slice_on(&vec![2.0f32; 20000], &[100, 200], "CPU");
    let y = x.dropout(0.25).to_vec::<f32>();
    let zeros = y.iter().filter(|&&v| v == 0.0).count();
    assert!(
        y.iter().all(|&v| v == 0.0 || (v - 2.0 / 0.75).abs() < 1e-6),
        "survivors scaled by 1/(1-p)"
    );
    let frac = zeros as f64 / y.len() as f64;
    assert!((frac - 0.25).abs() < 0.02, "dropped fraction {frac}");
}

// ---- gradients (autograd through the composed ops) ----

fn lcg(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale
        })
        .collect()
}

/// A small CNN loss: grouped, strided, dilated, padded conv2d -> gelu -> avg_pool2d ->
/// sparse_categorical_crossentropy (smooth, so finite differences apply).
fn cnn_loss(x: &[f32], w: &Tensor) -> Tensor {
    let x = Tensor::from_slice_on(x, &[2, 2, 7, 7], "CPU");
    let b = Tensor::from_slice_on(&[0.1f32, -0.2, 0.05, 0.0], &[4], "CPU");
    let y = Tensor::from_slice_on(&[3i32, 12], &[2], "CPU");
    x.conv2d(w, Some(&b), 2, 2, 2, 2)
        .gelu()
        .avg_pool2d(2, Dims::Default, 1, 0, false, true)
        .reshape(&[2, 16])
        .sparse_categorical_crossentropy(&y, -1, 0.1, Reduction::Mean)
}

#[test]
fn conv_pool_loss_gradient_matches_finite_differences() {
    let x = lcg(2 * 2 * 7 * 7, 1, 1.0);
    let wv = lcg(4 * 9, 2, 0.8);
    let w = Tensor::from_slice_on(&wv, &[4, 1, 3, 3], "CPU").requires_grad(true);
    let loss = cnn_loss(&x, &w);
    let g = loss.gradient(&[&w]).remove(0).to_vec::<f32>();
    let f = |wv: &[f32]| {
        let w = Tensor::from_slice_on(wv, &[4, 1, 3, 3], "CPU");
        f64::from(cnn_loss(&x, &w).item::<f32>())
    };
    let h = 1e-2f32;
    for i in [0usize, 4, 9, 17, 22, 35] {
        let (mut p, mut m) = (wv.clone(), wv.clone());
        p[i] += h;
        m[i] -= h;
        let fd = (f(&p) - f(&m)) / (2.0 * f64::from(h));
        let got = f64::from(g[i]);
        assert!(
            (got - fd).abs() <= 2e-3 + 2e-2 * fd.abs(),
            "d loss / d w[{i}]: autograd {got}, finite differences {fd}"
        );
    }
}

#[test]
fn max_pool_gradient_routes_to_the_maximum() {
    // 1x1x4x4 with distinct values: each 2x2 window's maximum gets the gradient 1
    let v: Vec<f32> = vec![
        1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 8.0, 7.0, 9.0, 1.5, 0.5, 2.5, 6.0, 7.5, 3.5, 4.5,
    ];
    let x = Tensor::from_slice_on(&v, &[1, 1, 4, 4], "CPU").requires_grad(true);
    let y = x
        .max_pool2d(2, Dims::Default, 1, 0, false)
        .sum(tinygrad_tensor::Axis::All);
    let g = y.gradient(&[&x]).remove(0).to_vec::<f32>();
    let want: Vec<f32> = vec![
        0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    assert_eq!(g, want);
}

/// max_unpool2d derives the output size from the kernel: tinygrad has a default kernel (2, 2),
/// Rust needs it given, and `Dims::Default` is an error, not a kernel of 1.
#[test]
#[should_panic(expected = "max_unpool2d: a kernel size is required (input [1, 1, 2, 2])")]
fn max_unpool2d_needs_a_kernel_size() {
    let x = Tensor::from_slice(&[1.0f32, 2., 3., 4.], &[1, 1, 2, 2]);
    let i = Tensor::from_slice(&[0i32, 1, 2, 3], &[1, 1, 2, 2]);
    let _ = x.max_unpool2d(&i, Dims::Default, Dims::Default, 1, 0, None);
}
