//! The `WEBGPU` device through its WGSL-level API (no renderer needed): hand-written shaders,
//! naga validation, the device's name/caps/limits and the no-adapter path.
//!
//! Without an adapter (no Vulkan driver) every test that needs one prints `SKIPPED: <reason>`
//! and returns.
#![cfg(feature = "webgpu")]

use std::sync::Arc;
use std::time::Instant;

use tinygrad_dtype::DType;
use tinygrad_runtime::webgpu::{self, WebGpuDevice, validate_wgsl};
use tinygrad_runtime::{Buffer, Device, DeviceError, get_device};

/// The device, or `None` after printing why the test is skipped.
fn dev() -> Option<Arc<WebGpuDevice>> {
    let t0 = Instant::now();
    match webgpu::device() {
        Ok(d) => {
            eprintln!(
                "webgpu::device() took {:.1} ms (the first call in the process sets it up)",
                t0.elapsed().as_secs_f64() * 1e3
            );
            Some(d)
        }
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

fn f32_buffer(values: &[f32]) -> Arc<Buffer> {
    let b = Buffer::new("WEBGPU", DType::FLOAT32, values.len());
    b.copy_in(bytemuck::cast_slice(values));
    b
}

fn f32_values(b: &Buffer) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(&b.to_bytes())
}

/// `out[i] = a[i] + b[i]` for `n` elements, a grid-stride loop over 64-wide workgroups.
fn add_shader(n: usize) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    let stride = nwg.x * 64u;
    for (var i = gid.x; i < {n}u; i += stride) {{
        out[i] = a[i] + b[i];
    }}
}}
"
    )
}

#[test]
fn adapter_features_and_limits() {
    let Some(d) = dev() else { return };
    eprintln!("{}", d.describe());
    assert_eq!(d.name(), "WEBGPU");
    let caps = d.caps();
    assert!(!caps.transcendentals && !caps.half);
    assert!(d.limits().max_storage_buffer_binding_size > 0);
    // The registry hands out the same device.
    let reg = get_device("webgpu").expect("the registry opens WEBGPU like webgpu::device()");
    assert_eq!(reg.name(), "WEBGPU");
    assert!(tinygrad_runtime::DEVICE_NAMES.contains(&"WEBGPU"));
}

#[test]
fn add_1000_f32_grid_stride() {
    let Some(d) = dev() else { return };
    let n = 1000;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let t0 = Instant::now();
    // 4 workgroups of 64: each invocation handles ~4 elements.
    let k = d
        .wgsl_kernel("add", add_shader(n), "main", 3, 4)
        .expect("a valid shader compiles");
    let compile = t0.elapsed();
    let (out, ab, bb) = (
        Buffer::new("WEBGPU", DType::FLOAT32, n),
        f32_buffer(&a),
        f32_buffer(&b),
    );
    let bufs = [out.clone(), ab, bb];
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        k.run(&bufs, false).expect("launch");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let gpu = k.run(&bufs, true).expect("timed launch");
    eprintln!(
        "add 1000 f32: compile {:.2} ms; dispatch wall ms (first, later): {:.2?}; timestamp \
         query: {:?}",
        compile.as_secs_f64() * 1e3,
        times,
        gpu.map(|s| format!("{:.1} us", s * 1e6))
    );
    let got = f32_values(&out);
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(got, want);

    // 1M elements (12 MB read and written by the kernel), 1024 workgroups.
    let n = 1 << 20;
    let k = d
        .wgsl_kernel("add_1m", add_shader(n), "main", 3, 1024)
        .expect("compiles");
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let (out, ab) = (Buffer::new("WEBGPU", DType::FLOAT32, n), f32_buffer(&a));
    let bufs = [out.clone(), ab.clone(), ab];
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        k.run(&bufs, false).expect("launch");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let gpu = k.run(&bufs, true).expect("timed launch");
    eprintln!(
        "add 1M f32 (buffers on the device): wall ms {times:.2?}; timestamp query: {:?}",
        gpu.map(|s| format!("{:.1} us", s * 1e6))
    );
    let got = f32_values(&out);
    assert!(got.iter().zip(&a).all(|(g, x)| *g == x + x));
    if d.timestamps() {
        assert!(gpu.is_some_and(|s| s >= 0.0));
    } else {
        assert_eq!(gpu, None);
    }
}

#[test]
fn an_upload_never_overtakes_a_kernel_recorded_before_it() {
    let Some(d) = dev() else { return };
    let n = 4096;
    let k = d
        .wgsl_kernel("add_order", add_shader(n), "main", 3, 16)
        .expect("compiles");
    let (a, b): (Vec<f32>, Vec<f32>) = ((0..n).map(|i| i as f32).collect(), vec![1.0; n]);
    let (out, ab, bb) = (
        Buffer::new("WEBGPU", DType::FLOAT32, n),
        f32_buffer(&a),
        f32_buffer(&b),
    );
    // recorded into the device's batch, not yet submitted
    k.run(&[out.clone(), ab.clone(), bb], false)
        .expect("launch");
    // wgpu runs an upload at the start of the next submission: without submitting the batch
    // first, the kernel would read these values instead of `a`
    ab.copy_in(bytemuck::cast_slice(&vec![-100.0f32; n]));
    let want: Vec<f32> = a.iter().map(|x| x + 1.0).collect();
    let got = f32_values(&out);
    assert!(
        got == want,
        "the kernel read the upload made after it: out[..4] = {:?}, want {:?}",
        &got[..4],
        &want[..4]
    );
    assert!(f32_values(&ab).iter().all(|&v| v == -100.0));
}

#[test]
fn same_buffer_bound_twice() {
    let Some(d) = dev() else { return };
    // out[i] = x[i] * x[i] + out[i], with x bound at bindings 1 and 2.
    let src = "@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < arrayLength(&out)) {
        out[i] = x[i] * y[i] + out[i];
    }
}
";
    let k = d
        .wgsl_kernel("square_acc", src.into(), "main", 3, 2)
        .expect("compiles");
    let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let xb = f32_buffer(&x);
    let out = f32_buffer(&vec![1.0; 100]);
    k.run(&[out.clone(), xb.clone(), xb.clone()], false)
        .expect("one buffer at two read_write bindings is accepted");
    let want: Vec<f32> = x.iter().map(|v| v * v + 1.0).collect();
    assert_eq!(f32_values(&out), want);

    // The output bound as an input too: out = out * out + out.
    let k2 = d
        .wgsl_kernel("square_self", src.into(), "main", 3, 2)
        .expect("compiles");
    let o = f32_buffer(&x);
    k2.run(&[o.clone(), o.clone(), o.clone()], false)
        .expect("the output at all three bindings");
    let want: Vec<f32> = x.iter().map(|v| v * v + v).collect();
    assert_eq!(f32_values(&o), want);
}

#[test]
fn narrow_and_odd_sized_buffers_round_trip() {
    let Some(d) = dev() else { return };
    // 7 bytes of u8 → a 8-byte GPU buffer; the shader adds 1 to each byte of its words.
    let src = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn main() {
    for (var i = 0u; i < arrayLength(&out); i++) {
        out[i] = out[i] + 0x01010101u;
    }
}
";
    let k = d
        .wgsl_kernel("bytes", src.into(), "main", 1, 1)
        .expect("compiles");
    let b = Buffer::new("WEBGPU", DType::UINT8, 7);
    b.copy_in(&[0, 1, 2, 3, 4, 5, 254]);
    k.run(std::slice::from_ref(&b), false).expect("launch");
    assert_eq!(b.to_bytes(), vec![1, 2, 3, 4, 5, 6, 255]);
    assert_eq!(webgpu::storage_bytes(0), 4);
    assert_eq!(webgpu::storage_bytes(7), 8);
    assert_eq!(webgpu::storage_bytes(8), 8);
}

#[test]
fn validate_wgsl_reports_readably() {
    // Needs no adapter: naga alone.
    let bad = "@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main() { out[0] = undefined_thing + 1.0; }
";
    let e = validate_wgsl(bad, false, false).expect_err("an unknown identifier is rejected");
    eprintln!("{e}");
    assert!(e.contains("undefined_thing"), "{e}");
    let typed = "@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1)
fn main() { out[0] = 1u; }
";
    let e = validate_wgsl(typed, false, false).expect_err("a u32 stored to an f32 is rejected");
    eprintln!("{e}");
    assert!(e.contains("error"), "{e}");
    let i64src = "@group(0) @binding(0) var<storage, read_write> out: array<i64>;
@compute @workgroup_size(1)
fn main() { out[0] = out[0] + 1li; }
";
    assert!(validate_wgsl(i64src, false, false).is_err());
    validate_wgsl(i64src, true, false).expect("i64 with the SHADER_INT64 capability");
    validate_wgsl(&add_shader(8), false, false).expect("valid");
}

#[test]
fn bad_shader_is_a_compile_error() {
    let Some(d) = dev() else { return };
    let bad = "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }";
    match d.wgsl_kernel("bad", bad.into(), "main", 0, 1) {
        Err(DeviceError::Compile { kernel, message }) => {
            assert_eq!(kernel, "bad");
            assert!(message.contains("invalid WGSL"), "{message}");
            assert!(message.contains(bad), "the source is included: {message}");
        }
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(_) => panic!("a bad shader compiled"),
    }
    // Valid WGSL but a missing entry point: wgpu's own validation, caught by the error scope.
    match d.wgsl_kernel("noentry", add_shader(4), "nope", 3, 1) {
        Err(DeviceError::Compile { message, .. }) => {
            eprintln!("{message}");
            assert!(message.contains("wgpu rejected"), "{message}");
        }
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(_) => panic!("a missing entry point compiled"),
    }
    // Too many workgroups for one dimension.
    let too_many = d.limits().max_compute_workgroups_per_dimension + 1;
    assert!(matches!(
        d.wgsl_kernel("big", add_shader(4), "main", 3, too_many),
        Err(DeviceError::Compile { .. })
    ));
}

#[test]
fn check_buffer_names_the_limit() {
    let Some(d) = dev() else { return };
    let limit = d.limits().max_storage_buffer_binding_size;
    assert_eq!(d.check_buffer(DType::FLOAT32, 1000), Ok(()));
    let elems = (limit / 4) as usize + 1;
    let e = d
        .check_buffer(DType::FLOAT32, elems)
        .expect_err("a buffer over the binding limit");
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(matches!(e, DeviceError::Launch { .. }));
    assert!(msg.contains(&limit.to_string()), "{msg}");
    assert!(
        msg.contains("max_storage_buffer_binding_size") || msg.contains("max_buffer_size"),
        "{msg}"
    );
}

/// A program the WGSL renderer refuses (a vector-typed buffer) is a `Compile` error naming the
/// kernel and the reason, never a panic; an empty program is a valid shader that does nothing.
#[test]
fn compile_goes_through_the_renderer() {
    let Some(d) = dev() else { return };
    let out = Buffer::new("WEBGPU", DType::FLOAT32, 4);
    let prog = |dt: DType| tinygrad_codegen::Program {
        vars: vec![],
        name: "E_4".into(),
        ast: out.uop(),
        uops: vec![],
        globals: vec![dt],
        extents: vec![4],
        outer_size: Some(4),
        opts: Default::default(),
    };
    match d.compile(&prog(DType::FLOAT32.vec(4))) {
        Err(DeviceError::Compile { kernel, message }) => {
            assert_eq!(kernel, "E_4");
            assert!(
                message.contains("not supported by the WGSL renderer"),
                "{message}"
            );
        }
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(_) => panic!("a vector-typed buffer compiled"),
    }
    let k = d
        .compile(&prog(DType::FLOAT32))
        .expect("an empty program compiles");
    assert!(k.source().contains("fn main("), "{}", k.source());
}

/// Run only as a child of [`no_adapter_is_unavailable`], with `WGPU_BACKEND=gl` (a backend this
/// build lacks): prints what opening the device gives.
#[test]
fn no_adapter_child() {
    if std::env::var_os("TINYGRAD_WEBGPU_CHILD").is_none() {
        return;
    }
    match get_device("WEBGPU") {
        Ok(d) => println!("CHILD-OPENED {}", d.name()),
        Err(e) => println!("CHILD-ERR {e}"),
    }
}

#[test]
fn no_adapter_is_unavailable() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "no_adapter_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TINYGRAD_WEBGPU_CHILD", "1")
        .env("WGPU_BACKEND", "gl")
        .output()
        .expect("the child runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(
        text.contains("CHILD-ERR device WEBGPU is not available"),
        "expected WEBGPU unavailable:\n{text}"
    );
    eprintln!(
        "{}",
        text.lines().find(|l| l.contains("CHILD-ERR")).unwrap_or("")
    );
}
