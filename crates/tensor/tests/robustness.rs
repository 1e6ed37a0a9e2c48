//! What a hostile user tries: sizes that overflow, operands that don't fit, deep graphs, hostile
//! files, special values. Each case ends in a clear panic or `Err` naming the op and the shapes,
//! or in the value torch gives — never a crash, a hang or a silent wrong value.
//!
//! Cases that would abort the process if the fix regressed (stack overflow, a wild write) run in
//! a child process ([`in_child`]), so a regression is a failed test, not a dead test binary.

use std::collections::BTreeMap;
use std::process::Command;

use tinygrad_tensor::nn::state::{safe_load, safe_load_bytes, safe_save, safe_save_bytes};
use tinygrad_tensor::{DType, Ops, Tensor};

/// Runs the (ignored) test `name` of this binary in a child process and returns whether it
/// succeeded, with its output.
fn in_child(name: &str) -> (bool, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("spawn the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs `child_name` (an ignored `#[test]`) in a child process
/// and asserts that it panicked with `expected` in its message (not a signal, not an abort).
fn assert_child_panics(child_name: &str, expected: &str) {
    let (ok, out) = in_child(child_name);
    assert!(!ok, "{child_name} should have panicked:\n{out}");
    assert!(
        out.contains("panicked") && out.contains(expected),
        "{child_name}: expected a panic with `{expected}`, got:\n{out}"
    );
}

/// Asserts that `f` panics with a message containing `expected`.
fn assert_panics(expected: &str, f: impl FnOnce()) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let err = r.expect_err("expected a panic");
    let msg = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains(expected),
        "panic message `{msg}` does not contain `{expected}`"
    );
}

// ---- 1. sizes that overflow usize ----------------------------------------------------------

/// A test run only as a child process by its parent test (ignored in the normal run).
macro_rules! child_case {
    ($name:ident, $body:block) => {
        #[test]
        #[ignore = "run in a child process by its parent test"]
        fn $name() $body
    };
}

child_case!(child_empty_huge, {
    let t = Tensor::empty(&[1 << 62], DType::FLOAT32);
    (&t + 1.0).realize();
});
child_case!(child_expand_huge_contiguous, {
    let t = Tensor::from_slice(&[1.0f32], &[1]).expand(&[1isize << 62]);
    t.contiguous().realize();
});
child_case!(child_from_bytes_huge, {
    let t = Tensor::from_bytes(&[], DType::FLOAT64, &[1 << 61], "CPU");
    t.sum(0isize).realize();
});
child_case!(child_matmul_huge, {
    let a = Tensor::zeros(&[1 << 40, 1], DType::FLOAT32);
    let b = Tensor::zeros(&[1, 1 << 40], DType::FLOAT32);
    a.matmul(&b).sum(None).realize();
});
child_case!(child_pad_overflow, {
    let t = Tensor::from_slice(&[1.0f32], &[1]);
    t.pad(&[(usize::MAX, 1)], 0.0).realize();
});

#[test]
fn overflowing_sizes_panic_with_the_op_and_shape() {
    assert_child_panics(
        "child_empty_huge",
        "Tensor::empty: shape [4611686018427387904] is too large",
    );
    assert_child_panics(
        "child_expand_huge_contiguous",
        "expand: shape [1] (float32) can't become [4611686018427387904]",
    );
    assert_child_panics(
        "child_from_bytes_huge",
        "Tensor::from_bytes: shape [2305843009213693952] is too large",
    );
    assert_child_panics("child_matmul_huge", "expand: shape [1099511627776, 1, 1]");
    assert_child_panics("child_pad_overflow", "pad: padding");
}

#[test]
fn from_bytes_checks_the_byte_length() {
    assert_panics(
        "Tensor::from_bytes: 4 bytes for shape [2] of float32",
        || {
            let _ = Tensor::from_bytes(&[0u8; 4], DType::FLOAT32, &[2], "CPU");
        },
    );
}

#[test]
fn buffer_new_rejects_overflowing_byte_sizes() {
    assert_panics(
        "Buffer::new: 4611686018427387904 elements of float32",
        || {
            let _ = tinygrad_runtime::Buffer::new("CPU", DType::FLOAT32, 1 << 62);
        },
    );
}

#[test]
fn zero_sized_shapes_still_count_the_other_axes() {
    // [0, 2^32, 2^32]: no elements, but its sum over axis 0 would have 2^64.
    assert_panics("is too large", || {
        let _ = Tensor::empty(&[0, 1 << 32, 1 << 32], DType::FLOAT32);
    });
    // a legitimately empty tensor is fine
    let e = Tensor::zeros(&[0, 3], DType::FLOAT32);
    assert_eq!(e.sum(0isize).to_vec::<f32>(), vec![0.0; 3]);
}

// ---- 2. Tensor::alu checks its operands ----------------------------------------------------

#[test]
fn alu_rejects_operands_of_other_shapes() {
    assert_panics(
        "alu: ADD needs operands of one shape (no broadcasting), got [1000000] int32, [2] int32",
        || {
            let a = Tensor::arange(0, 1_000_000, 1);
            let _ = a.alu(Ops::Add, &[&Tensor::arange(0, 2, 1)]);
        },
    );
}

#[test]
fn alu_rejects_mixed_dtypes() {
    assert_panics("alu: ADD of [3] int32, [3] float32", || {
        let a = Tensor::arange(0, 3, 1);
        let _ = a.alu(Ops::Add, &[&a.float()]);
    });
    assert_panics("alu: WHERE", || {
        let a = Tensor::arange(0, 3, 1);
        let _ = a.alu(Ops::Where, &[&a, &a]);
    });
    assert_panics("alu: ADD takes 2 operands, got 1", || {
        let _ = Tensor::arange(0, 3, 1).alu(Ops::Add, &[]);
    });
}

// ---- 5. accepted nonsense ------------------------------------------------------------------

#[test]
fn bitwise_not_of_floats_is_an_error() {
    assert_panics(
        "bitwise_not: needs an integer or bool tensor, got float32",
        || {
            let _ = Tensor::from_vec(vec![1.0f32]).bitwise_not();
        },
    );
    assert_eq!(
        Tensor::from_vec(vec![0i32, -1])
            .bitwise_not()
            .to_vec::<i32>(),
        vec![-1, 0]
    );
}

#[test]
fn expand_rejects_negative_sizes_other_than_minus_one() {
    assert_panics("expand: negative size in [-2, 3]", || {
        let _ = Tensor::zeros(&[1, 3], DType::FLOAT32).expand(&[-2, 3]);
    });
}

// ---- 6. files ------------------------------------------------------------------------------

#[test]
fn saving_a_tensor_named_metadata_is_an_error() {
    let sd = BTreeMap::from([(
        "__metadata__".to_string(),
        Tensor::from_slice(&[1.0f32], &[1]),
    )]);
    let e = safe_save_bytes(&sd, None).unwrap_err();
    assert_eq!(e.tensor.as_deref(), Some("__metadata__"));
    assert!(e.message.contains("reserved"), "{e}");
}

/// A safetensors file of one tensor with a handwritten header.
fn safetensors_bytes(header: &str, data_len: usize) -> Vec<u8> {
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(header.as_bytes());
    b.extend(std::iter::repeat_n(0u8, data_len));
    b
}

#[test]
fn safetensors_shapes_too_large_are_rejected() {
    let h = r#"{"x":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}"#;
    let e = safe_load_bytes(&safetensors_bytes(h, 0), "CPU").unwrap_err();
    assert_eq!(e.tensor.as_deref(), Some("x"), "{e}");
    assert!(e.message.contains("too large"), "{e}");
}

#[cfg(unix)]
#[test]
fn safe_load_of_dev_zero_ends_with_an_error() {
    // zeros: header length 0, then the read must stop (it used to read until killed)
    let e = safe_load("/dev/zero").unwrap_err();
    assert!(e.path.contains("/dev/zero"), "{e}");
}

#[cfg(unix)]
#[test]
fn safe_load_reads_a_fifo_once() {
    let dir = std::env::temp_dir().join(format!("tg_fifo_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("w.safetensors");
    let _ = std::fs::remove_file(&fifo);
    let st = Command::new("mkfifo").arg(&fifo).status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo unavailable");
        return;
    }
    let sd = BTreeMap::from([("w".to_string(), Tensor::from_slice(&[1.5f32, -2.0], &[2]))]);
    let bytes = safe_save_bytes(&sd, None).unwrap();
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(&writer_path, bytes));
    let back = safe_load(&fifo).expect("a FIFO loads");
    writer.join().unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(back["w"].to_vec::<f32>(), vec![1.5, -2.0]);
}

#[test]
fn safe_save_then_load_round_trips_through_a_file() {
    let path = std::env::temp_dir().join(format!("tg_robust_rt_{}.st", std::process::id()));
    let sd = BTreeMap::from([("a".to_string(), Tensor::from_slice(&[3i64, -4], &[1, 2]))]);
    safe_save(&sd, &path).unwrap();
    let back = safe_load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back["a"].to_vec::<i64>(), vec![3, -4]);
}

// ---- 3. deep graphs ------------------------------------------------------------------------

/// Runs `f` on a thread with a 2 MiB stack (Rust's default for spawned threads).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the deep graph's thread panicked")
}

/// The issue's 1,000,000-op chain in release builds (`cargo test --release`, ~30 s each);
/// 200,000 (already 50x what overflowed the old recursive lowering) in debug builds.
const DEEP: usize = if cfg!(debug_assertions) {
    200_000
} else {
    1_000_000
};

child_case!(child_deep_chain_realizes, {
    let v = on_small_stack(|| {
        let mut x = Tensor::from_slice(&[0.0f32, 1.0], &[2]);
        for _ in 0..DEEP {
            x = &x + 1.0;
        }
        x.to_vec::<f32>()
    });
    assert_eq!(v, vec![DEEP as f32, DEEP as f32 + 1.0]);
});

child_case!(child_deep_chain_differentiates, {
    let g = on_small_stack(|| {
        let w = Tensor::from_slice(&[2.0f32], &[1]).requires_grad(true);
        let mut x = w.clone();
        for _ in 0..DEEP {
            x = &x * 1.0;
        }
        x.sum(None).backward();
        w.grad().expect("w has a gradient").to_vec::<f32>()
    });
    assert_eq!(g, vec![1.0]);
});

#[test]
fn deep_graphs_do_not_overflow_the_stack() {
    for name in [
        "child_deep_chain_realizes",
        "child_deep_chain_differentiates",
    ] {
        let (ok, out) = in_child(name);
        assert!(ok, "{name} failed:\n{out}");
    }
}

// ---- 5. silent wrong answers ---------------------------------------------------------------

#[test]
fn integer_arange_is_exact_past_float32() {
    let t = Tensor::arange(16_777_217, 16_777_220, 1);
    assert_eq!(t.to_vec::<i32>(), vec![16_777_217, 16_777_218, 16_777_219]);
    let base = (1i64 << 40) + 1;
    let t = Tensor::arange_dtype(base as f64, (base + 3) as f64, 1.0, DType::INT64);
    assert_eq!(t.to_vec::<i64>(), vec![base, base + 1, base + 2]);
    let t = Tensor::arange(10, -5, -4);
    assert_eq!(t.to_vec::<i32>(), vec![10, 6, 2, -2]);
    assert_eq!(Tensor::arange(3, 3, 1).shape(), vec![0]);
}

#[test]
fn index_ramp_is_64_bit_past_2_31_elements() {
    // element 2.5e9 of a 3e9-element arange (only that element is computed: a shrink)
    let t = Tensor::arange_dtype(0.0, 3e9, 1.0, DType::INT64);
    let v = t.shrink(&[(2_500_000_000, 2_500_000_002)]);
    assert_eq!(v.to_vec::<i64>(), vec![2_500_000_000, 2_500_000_001]);
}

#[test]
fn sort_with_nan_is_a_permutation_with_nan_last() {
    let t = Tensor::from_vec(vec![2.0f32, f32::NAN, 1.0, -0.0, 0.0, f32::NEG_INFINITY]);
    let (v, i) = t.sort(0, false);
    let v = v.to_vec::<f32>();
    assert_eq!(i.to_vec::<i32>(), vec![5, 3, 4, 2, 0, 1]);
    assert_eq!(v[..5], [f32::NEG_INFINITY, 0.0, 0.0, 1.0, 2.0]);
    assert!(v[1].is_sign_negative() && v[2].is_sign_positive(), "{v:?}");
    assert!(v[5].is_nan());
    // descending: NaN first (torch)
    let (v, i) = t.sort(0, true);
    assert_eq!(i.to_vec::<i32>(), vec![1, 0, 2, 3, 4, 5]);
    assert!(v.to_vec::<f32>()[0].is_nan());
    assert_eq!(t.argsort(0, false).to_vec::<i32>(), vec![5, 3, 4, 2, 0, 1]);
    let (tv, ti) = t.topk(2, 0, true, true);
    assert!(tv.to_vec::<f32>()[0].is_nan());
    assert_eq!(ti.to_vec::<i32>(), vec![1, 0]);
}

#[test]
fn argmax_treats_nan_as_the_maximum() {
    let t = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, f32::NAN]);
    assert_eq!(t.argmax(None).item::<i32>(), 1);
    assert_eq!(t.argmin(None).item::<i32>(), 1);
    let t = Tensor::from_slice(&[1.0f32, 5.0, 3.0, f32::NAN, 0.0, 2.0], &[2, 3]);
    assert_eq!(t.argmax(Some(1)).to_vec::<i32>(), vec![1, 0]);
    assert_panics("argmax/argmin: axis 0 of shape [0] is empty", || {
        let _ = Tensor::zeros(&[0], DType::FLOAT32).argmax(Some(0));
    });
}

#[test]
fn mean_and_var_of_many_float16_values() {
    let n = 70_000;
    let t = Tensor::ones(&[n], DType::FLOAT16);
    assert_eq!(t.mean(None).cast(DType::FLOAT32).item::<f32>(), 1.0);
    let t = Tensor::arange_dtype(0.0, n as f64, 1.0, DType::FLOAT32)
        .lt(n as f64 / 2.0)
        .cast(DType::FLOAT16); // half ones, half zeros: var 0.25 (correction 0)
    let v = t.var(None, 0).cast(DType::FLOAT32).item::<f32>();
    assert!((v - 0.25).abs() < 1e-3, "{v}");
}

#[test]
fn var_with_correction_of_at_least_n_divides_by_zero() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0]);
    assert_eq!(t.var(None, 2).item::<f32>(), f32::INFINITY);
    assert!(
        Tensor::from_vec(vec![1.0f32])
            .var(None, 1)
            .item::<f32>()
            .is_nan()
    );
}

#[test]
fn integer_pow_is_exact() {
    let t = Tensor::from_vec(vec![3i32, -3, 2, 1, -1, 0]);
    // 3^40 wraps in int32 as torch computes it
    let wrap = |b: i32, e: u32| b.wrapping_pow(e);
    assert_eq!(
        t.pow(40).to_vec::<i32>(),
        [3, -3, 2, 1, -1, 0].map(|b| wrap(b, 40)).to_vec()
    );
    let x = Tensor::from_vec(vec![7i64, 11, -13]);
    assert_eq!(
        x.pow(7).to_vec::<i64>(),
        vec![823_543, 19_487_171, -62_748_517]
    );
    let e = Tensor::from_vec(vec![0i32, 1, 5, -1, -2, -1]);
    assert_eq!(
        Tensor::from_vec(vec![5i32, 5, 2, 1, -1, 4])
            .pow(&e)
            .to_vec::<i32>(),
        vec![1, 5, 32, 1, 1, 0]
    );
    assert_eq!(
        Tensor::from_vec(vec![200u8, 3]).pow(2).to_vec::<u8>(),
        vec![200u8.wrapping_pow(2), 9]
    );
}

#[test]
fn float_to_int_casts_are_the_same_on_cpu_and_ref() {
    let vals = [
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        3e9,
        -3e9,
        2.9,
        -2.9,
        1e20,
    ];
    for dt in [
        DType::INT32,
        DType::INT8,
        DType::UINT8,
        DType::INT64,
        DType::UINT32,
    ] {
        let on = |dev: &str| {
            Tensor::from_slice_on(&vals, &[vals.len()], dev)
                .cast(dt)
                .to_f64_vec()
        };
        assert_eq!(on("CPU"), on("REF"), "{dt}");
    }
    // the documented rule: truncate, saturate to 64 bits, wrap
    let t = Tensor::from_vec(vals.to_vec())
        .cast(DType::INT32)
        .to_vec::<i32>();
    assert_eq!(t, vec![-1, 0, 0, -1_294_967_296, 1_294_967_296, 2, -2, -1]);
}

// ---- 1. (cont.) kernels never run on buffers smaller than they index ------------------------

#[test]
fn a_kernel_launched_on_too_small_buffers_panics_instead_of_running() {
    use tinygrad_runtime::{Buffer, get_device, get_kernel};
    // the kernel of `x + 1` over 1024 elements, launched on 16-element buffers
    let x = Tensor::from_slice(&[0.0f32; 1024], &[1024]);
    let sched = Tensor::schedule(&[&(&x + 1.0)]);
    let dev = get_device("CPU").unwrap();
    let (kernel, _, _) = get_kernel(dev.as_ref(), &sched[0].ast).unwrap();
    let small = vec![
        Buffer::new("CPU", DType::FLOAT32, 16),
        Buffer::new("CPU", DType::FLOAT32, 16),
    ];
    assert_panics("slot 0 reaches 1024 elements", move || {
        kernel.launch(&small, &[])
    });
}

// ---- 7. allocation failures and unknown devices --------------------------------------------

#[test]
fn try_realize_returns_out_of_memory_as_an_err() {
    // 4 TB of float32: more than any machine this runs on lets a process reserve
    let t = Tensor::zeros(&[1_000_000_000_000], DType::FLOAT32);
    let e = t.try_realize().map(|_| ()).unwrap_err();
    assert!(
        matches!(
            e,
            tinygrad_runtime::DeviceError::OutOfMemory {
                bytes: 4_000_000_000_000,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("cannot allocate 4000000000000 bytes"),
        "{e}"
    );
}

#[test]
fn an_unknown_device_is_reported_when_the_tensor_is_made() {
    assert_panics("Tensor: unknown device \"NOSUCH\"", || {
        let _ = Tensor::zeros_on(&[2], DType::FLOAT32, "NOSUCH");
    });
    assert_panics("unknown device \"GPU9\"", || {
        let _ = Tensor::from_slice_on(&[1.0f32], &[1], "GPU9");
    });
}

// ---- 8. the kernel cache is bounded --------------------------------------------------------

child_case!(child_kernel_cache_is_bounded, {
    assert_eq!(tinygrad_runtime::kernel_cache_capacity(), 50);
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    for i in 0..200 {
        // a new constant is a new kernel
        let v = (&x * (i as f64 + 0.5)).to_vec::<f32>();
        assert_eq!(v, vec![i as f32 + 0.5, 2.0 * (i as f32 + 0.5)]);
        assert!(tinygrad_runtime::kernel_cache_len() <= 50);
    }
    // a scalar tensor operand instead of a constant compiles once for every value
    let before = tinygrad_runtime::compile_count();
    for i in 0..20 {
        let lr = Tensor::from_slice(&[i as f32], &[1]);
        let _ = (&x * &lr).to_vec::<f32>();
    }
    assert!(tinygrad_runtime::compile_count() - before <= 1);
});

#[test]
fn the_kernel_cache_is_bounded_by_kernel_cache_size() {
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new(exe)
        .args([
            "child_kernel_cache_is_bounded",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KERNEL_CACHE_SIZE", "50")
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- mutation test: corrupted safetensors files are errors, never panics ----------------------

/// A small deterministic generator (xorshift), so the mutations are the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn mutated_safetensors_files_load_or_fail_cleanly() {
    let sd = BTreeMap::from([
        (
            "a".to_string(),
            Tensor::from_slice(&[1.5f32, -2.0, 3.0, 4.0], &[2, 2]),
        ),
        ("b".to_string(), Tensor::from_slice(&[7i64, -8], &[2])),
        (
            "c".to_string(),
            Tensor::from_slice(&[true, false, true], &[3]),
        ),
    ]);
    let good = safe_save_bytes(&sd, None).unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut loaded, mut refused) = (0, 0);
    for case in 0..3000 {
        let mut b = good.clone();
        match case % 4 {
            // flip a byte
            0 => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            // overwrite a header byte with a JSON-significant character
            1 => {
                let i = 8 + rng.below(b.len() - 8);
                b[i] = b"{}[],:\"0123456789-e"[rng.below(19)];
            }
            // truncate
            2 => b.truncate(rng.below(b.len())),
            // append or duplicate a span
            _ => {
                let i = rng.below(b.len());
                let j = (i + rng.below(16)).min(b.len());
                let span = b[i..j].to_vec();
                b.splice(i..i, span);
            }
        }
        let r = std::panic::catch_unwind(|| safe_load_bytes(&b, "CPU"));
        match r {
            Ok(Ok(tensors)) => {
                loaded += 1;
                for t in tensors.values() {
                    assert_eq!(t.try_to_bytes().unwrap().len(), t.nbytes());
                }
            }
            Ok(Err(e)) => {
                refused += 1;
                assert!(!e.message.is_empty());
            }
            Err(_) => panic!("case {case}: the loader panicked on {b:?}"),
        }
    }
    // both outcomes happen (flipped data bytes still load)
    assert!(
        loaded > 0 && refused > 0,
        "loaded {loaded}, refused {refused}"
    );
}

// ---- 5. (cont.) writes through views -------------------------------------------------------

#[test]
fn assign_to_a_shrunk_view_writes_through() {
    let x = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]);
    let v = x.shrink(&[(0, 2), (1, 3)]);
    v.assign(&Tensor::from_slice(&[10i32, 11, 12, 13], &[2, 2]));
    assert_eq!(x.to_vec::<i32>(), vec![0, 10, 11, 3, 12, 13]);
    assert_eq!(v.to_vec::<i32>(), vec![10, 11, 12, 13]);
    // again, through the realized base (the graph does not grow)
    v.assign(&(&v * 2));
    assert_eq!(x.to_vec::<i32>(), vec![0, 20, 22, 3, 24, 26]);
}

#[test]
fn assign_to_a_transposed_or_reshaped_view_writes_through() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    x.t()
        .assign(&Tensor::from_slice(&[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0], &[3, 2]).neg());
    assert_eq!(x.to_vec::<f32>(), vec![-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
    // a view of a view: a row of the flattened, flipped tensor
    let row = x.flip(&[1]).reshape(&[6]).shrink(&[(0, 3)]);
    row.assign(&Tensor::from_slice(&[7.0f32, 8.0, 9.0], &[3]));
    assert_eq!(x.to_vec::<f32>(), vec![9.0, 8.0, 7.0, -4.0, -5.0, -6.0]);
}

#[test]
fn setitem_on_a_slice_view_writes_through() {
    use tinygrad_tensor::Idx;
    let x = Tensor::zeros(&[3, 4], DType::INT32);
    let rows = x.shrink(&[(1, 3), (0, 4)]);
    rows.setitem(&[Idx::all(), Idx::Int(2)], 5);
    assert_eq!(x.to_vec::<i32>(), vec![0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 5, 0]);
}

#[test]
fn assign_to_an_expanded_view_is_an_error() {
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[1, 2]);
    let e = x.expand(&[3, 2]);
    assert_panics("is an expanded view of a tensor of shape [1, 2]", || {
        e.assign(&Tensor::zeros(&[3, 2], DType::FLOAT32));
    });
    assert_eq!(x.to_vec::<f32>(), vec![1.0, 2.0]);
}

#[test]
fn run_schedule_refuses_buffers_smaller_than_the_kernel_reaches_on_every_device() {
    use tinygrad_runtime::{Buffer, get_device, run_schedule};
    for dev_name in ["REF", "CPU"] {
        let x = Tensor::from_slice_on(&[0.0f32; 256], &[256], dev_name);
        let mut item = Tensor::schedule(&[&(&x * 3.0)]).remove(0);
        item.bufs = vec![
            Buffer::new(dev_name, DType::FLOAT32, 256).uop(),
            Buffer::new(dev_name, DType::FLOAT32, 8).uop(), // the input, too small
        ];
        let dev = get_device(dev_name).unwrap();
        let e = run_schedule(dev.as_ref(), &[item]).unwrap_err();
        assert!(
            e.to_string().contains("slot 1 reaches 256 elements"),
            "{dev_name}: {e}"
        );
    }
}

#[test]
fn compound_results_are_new_tensors_not_views() {
    // torch's repeat and reductions copy: assigning to their result leaves the input alone
    let x = Tensor::from_slice(&[1i32, 2], &[2]);
    let r = x.repeat(&[2]);
    r.assign(&Tensor::from_slice(&[0i32, 0, 0, 0], &[4]));
    assert_eq!(
        (x.to_vec::<i32>(), r.to_vec::<i32>()),
        (vec![1, 2], vec![0; 4])
    );
    let s = x.sum(tinygrad_tensor::Axis::Some(vec![]));
    s.assign(&Tensor::from_slice(&[5i32, 6], &[2]));
    assert_eq!(
        (x.to_vec::<i32>(), s.to_vec::<i32>()),
        (vec![1, 2], vec![5, 6])
    );
}

#[test]
fn assigning_to_a_view_of_a_dropped_base_is_a_plain_assignment() {
    let v = {
        let base = Tensor::from_slice(&[1.0f32; 64], &[8, 8]) * 3.0;
        base.shrink(&[(0, 2), (0, 8)])
    };
    v.realize();
    // the realized view is its own buffer; assigning to it is a plain assignment now
    v.assign(&Tensor::zeros(&[2, 8], DType::FLOAT32));
    assert_eq!(v.to_vec::<f32>(), vec![0.0; 16]);
}

#[cfg(unix)]
#[test]
fn a_stream_claiming_huge_data_is_a_truncation_error() {
    let dir = std::env::temp_dir().join(format!("tg_fifo_big_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("big.safetensors");
    let _ = std::fs::remove_file(&fifo);
    if !Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: mkfifo unavailable");
        return;
    }
    // 2^40 bytes of data claimed, 4 given
    let h = r#"{"x":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}"#;
    let bytes = safetensors_bytes(h, 4);
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(&writer_path, bytes));
    let e = safe_load(&fifo).unwrap_err();
    writer.join().unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!e.message.contains("cannot allocate"), "{e}");
}
