//! Tensors on several devices: `to()` between every pair of devices this build has (`CPU`,
//! `CPU:1`, `REF`, `WEBGPU`, `WEBGPU:1`, `CUDA` where a GPU is), for every dtype, bit-exact;
//! copies as lazy graph ops; device names with an index; gradients through a copy; and the
//! errors: an op across devices, a transfer to a missing device.

use tinygrad_tensor::{DType, Tensor, thread_transfer_stats};

/// The devices to test: always the host ones, the GPU ones where this machine has them (each
/// missing one is named with the reason; `TINYGRAD_REQUIRE_WEBGPU=1`, as in CI, makes a missing
/// WebGPU adapter a failure).
fn devices() -> Vec<&'static str> {
    let mut out = vec!["CPU", "CPU:1", "REF"];
    for d in ["WEBGPU", "WEBGPU:1", "CUDA", "CUDA:1"] {
        match tinygrad_tensor::get_device(d) {
            Ok(_) => out.push(d),
            Err(e) => {
                let required = d.starts_with("WEBGPU")
                    && std::env::var("TINYGRAD_REQUIRE_WEBGPU").is_ok_and(|v| v == "1");
                assert!(!required, "TINYGRAD_REQUIRE_WEBGPU is set, but: {e}");
                eprintln!("devices: {d} SKIPPED: {e}");
            }
        }
    }
    out
}

/// Bytes of `n` elements of `dtype` from a counter: every bit pattern occurs (NaN payloads,
/// negative zeros, subnormals), except for `bool`, whose only values are 0 and 1.
fn pattern(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes: Vec<u8> = (0..n * dtype.itemsize())
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    if dtype == DType::BOOL {
        bytes.iter_mut().for_each(|b| *b &= 1);
    }
    bytes
}

#[test]
fn to_round_trips_between_every_pair_of_devices_for_every_dtype_bit_exact() {
    let devs = devices();
    let mut pairs = 0;
    for (i, &a) in devs.iter().enumerate() {
        for (j, &b) in devs.iter().enumerate() {
            if i == j {
                continue;
            }
            for (k, dtype) in DType::ALL.iter().copied().enumerate() {
                // 7 elements: sizes that are no multiple of a GPU word for 1- and 2-byte dtypes
                let bytes = pattern(dtype, 7, (i * 100 + j * 10 + k) as u64);
                let t = Tensor::from_bytes(&bytes, dtype, &[7], a);
                let there = t.to(b);
                assert_eq!(there.device(), b);
                assert_eq!(there.try_to_bytes().unwrap(), bytes, "{dtype} {a} -> {b}");
                let back = there.to(a);
                assert_eq!(back.device(), a);
                assert_eq!(
                    back.try_to_bytes().unwrap(),
                    bytes,
                    "{dtype} {a} -> {b} -> {a}"
                );
                pairs += 1;
            }
        }
    }
    let n = devs.len();
    assert_eq!(pairs, n * (n - 1) * DType::ALL.len());
    eprintln!(
        "devices: {pairs} round trips bit-exact between {n} devices ({})",
        devs.join(", ")
    );
}

#[test]
fn a_copy_is_a_lazy_graph_op_scheduled_as_a_transfer() {
    for &b in devices().iter().filter(|d| **d != "CPU") {
        let a = Tensor::from_slice_on(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], "CPU");
        // the source is computed on CPU, copied, and computed on further on `b`
        let moved = (&a * 2.0).permute(&[1, 0]).to(b);
        let out = &moved + 1.0;
        // on `b`: the transfer item, then the kernel adding one
        let items = Tensor::schedule(&[&out]);
        assert_eq!(items.len(), 2, "on {b}");
        assert_eq!(items[0].ast.op(), tinygrad_tensor::Ops::Copy, "on {b}");
        assert_eq!(items[0].ast.arg().as_copy(), Some(("CPU", b)));
        assert_eq!(out.device(), b);
        assert_eq!(out.shape(), vec![2, 2]);
        assert_eq!(out.to_vec::<f32>(), vec![3.0, 7.0, 5.0, 9.0], "on {b}");
        // nothing runs or moves before the values are asked for
        let before = thread_transfer_stats();
        let lazy = (&a + 10.0).to(b);
        assert!(!is_buffer(&lazy), "to() stays a graph until realized");
        assert_eq!(thread_transfer_stats().since(&before).copies, 0, "on {b}");
        assert_eq!(lazy.to_vec::<f32>(), vec![11.0, 12.0, 13.0, 14.0]);
        if b.starts_with("WEBGPU") || b.starts_with("CUDA") {
            // then: one upload (the copy) and one download (the values)
            let moved = thread_transfer_stats().since(&before);
            assert_eq!(
                (moved.host_to_device, moved.device_to_host),
                (16, 16),
                "on {b}"
            );
        }
    }
}

/// Whether the tensor is realized: its graph is a buffer (or a reshape of one).
fn is_buffer(t: &Tensor) -> bool {
    let mut u = t.uop();
    while u.op() == tinygrad_tensor::Ops::Reshape {
        u = u.s(0).clone();
    }
    u.op() == tinygrad_tensor::Ops::Buffer
}

#[test]
fn copies_between_gpu_devices_and_chains_of_devices() {
    let devs = devices();
    // CPU -> every other device in turn -> CPU, each hop adding one
    let mut t = Tensor::from_slice_on(&[0i32, 10, 20], &[3], "CPU");
    for d in devs.iter().skip(1).chain(std::iter::once(&"CPU")) {
        t = t.to(d) + 1;
    }
    let hops = devs.len() as i32;
    assert_eq!(t.device(), "CPU");
    assert_eq!(t.to_vec::<i32>(), vec![hops, 10 + hops, 20 + hops]);
}

#[test]
fn device_names_take_an_index_and_are_canonical() {
    let t = Tensor::from_slice_on(&[1u8, 2], &[2], "cpu:0");
    assert_eq!(t.device(), "CPU");
    let t1 = t.to("cpu:1");
    assert_eq!(t1.device(), "CPU:1");
    assert_eq!(t1.to_vec::<u8>(), vec![1, 2]);
    assert_eq!(
        tinygrad_tensor::canonical_device("webgpu:2").as_deref(),
        Some("WEBGPU:2")
    );
    assert_eq!(tinygrad_tensor::canonical_device("CPU:x"), None);
    assert_eq!(tinygrad_tensor::canonical_device("TPU"), None);
    // each index is its own device
    let (d0, d1) = (
        tinygrad_tensor::get_device("CPU").unwrap(),
        tinygrad_tensor::get_device("CPU:1").unwrap(),
    );
    assert_eq!((d0.name(), d1.name()), ("CPU", "CPU:1"));
    // the default device follows with_default_device, on this thread
    let made = tinygrad_tensor::with_default_device("cpu:1", || Tensor::arange(0, 3, 1));
    assert_eq!(made.device(), "CPU:1");
    assert_eq!(made.to_vec::<i32>(), vec![0, 1, 2]);
}

#[test]
fn realizing_tensors_of_several_devices_together_realizes_each_on_its_own() {
    let a = Tensor::arange(0, 4, 1) * 2;
    let b = Tensor::from_slice_on(&[5i32, 6], &[2], "CPU:1") + 1;
    Tensor::try_realize_all(&[&a, &b]).unwrap();
    assert_eq!(a.to_vec::<i32>(), vec![0, 2, 4, 6]);
    assert_eq!(b.to_vec::<i32>(), vec![6, 7]);
}

#[test]
fn gradients_flow_back_through_a_copy() {
    for &d in devices().iter().filter(|d| **d != "CPU") {
        let x = Tensor::from_slice_on(&[1.0f32, -2.0, 3.0], &[3], "CPU");
        x.requires_grad_();
        let loss = (x.to(d) * 3.0).square().sum(None);
        loss.backward();
        let g = x.grad().expect("x has a gradient");
        assert_eq!(g.device(), "CPU", "the gradient lives where x does");
        // d/dx (3x)^2 = 18x
        assert_eq!(g.to_vec::<f32>(), vec![18.0, -36.0, 54.0], "through {d}");
    }
}

#[test]
#[should_panic(expected = "different devices")]
fn an_op_on_tensors_of_two_devices_panics() {
    let a = Tensor::from_slice_on(&[1.0f32], &[1], "CPU");
    let b = Tensor::from_slice_on(&[1.0f32], &[1], "CPU:1");
    let _ = &a + &b;
}

#[test]
fn a_transfer_to_a_missing_device_is_an_error_naming_it() {
    let t = Tensor::from_slice_on(&[1.0f32], &[1], "CPU");
    let e = t.try_to("NOSUCHDEVICE").unwrap_err().to_string();
    assert!(e.contains("NOSUCHDEVICE"), "{e}");
    // CUDA:7: a GPU this machine does not have (or no CUDA at all)
    let e = t.try_to("CUDA:7").unwrap_err().to_string();
    assert!(e.contains("CUDA:7") && e.contains("not available"), "{e}");
}

#[test]
fn host_devices_move_no_bytes_over_the_bus() {
    let before = thread_transfer_stats();
    let t = Tensor::from_slice_on(&[1.0f32; 64], &[64], "CPU");
    let u = (t.to("CPU:1") * 2.0).to("REF");
    assert_eq!(u.to_vec::<f32>(), vec![2.0; 64]);
    assert_eq!(
        thread_transfer_stats().since(&before).host_device_bytes(),
        0
    );
}

#[test]
fn a_tensor_and_its_copy_realized_together_in_either_order() {
    for &d in devices().iter().filter(|d| **d != "CPU") {
        for copy_first in [false, true] {
            let a = Tensor::from_slice_on(&[1.0f32, 2.0], &[2], "CPU") * 3.0;
            let b = a.to(d);
            let all = if copy_first { [&b, &a] } else { [&a, &b] };
            Tensor::try_realize_all(&all).unwrap();
            // both are buffers now: the copy reused a's result
            assert!(is_buffer(&a) && is_buffer(&b));
            assert_eq!(a.to_vec::<f32>(), vec![3.0, 6.0]);
            assert_eq!(b.to_vec::<f32>(), vec![3.0, 6.0], "on {d}");
        }
    }
}
