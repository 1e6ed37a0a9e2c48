//! The PTX renderer and the `CUDA` device.
//!
//! - Structural checks of small kernels' PTX (loads/stores per buffer, grid mapping, bounds
//!   check, gates, total division), not full-text comparisons.
//! - Every dtype and op class rendered and assembled by `ptxas` for `sm_80` and `sm_90` (see
//!   `ptx_check`; the golden suite's kernels are checked in `golden.rs`).
//! - The `CUDA` device: an error with a reason without a GPU (then the GPU tests skip, printing
//!   why); on a GPU, results compared with `REF`.

mod dtype_matrix;
mod ptx_check;

use dtype_matrix::{
    NOT_GROUPED, assert_device_matches_ref, close_reduction, coverage_cases, f32s,
    grouped_reduction_cases, same,
};

use tinygrad_codegen::ptx::{PtxRenderer, launch_dims};
use tinygrad_codegen::{Program, Renderer, to_program};
use tinygrad_tensor::{Axis, DeviceError, Tensor, get_device};

fn programs(t: &Tensor) -> Vec<Program> {
    let caps = PtxRenderer::default().caps();
    Tensor::schedule(&[t])
        .iter()
        .map(|item| to_program(&item.ast, caps))
        .collect()
}

/// The PTX of the single kernel computing `t`, and its program.
fn ptx_of(t: &Tensor) -> (String, Program) {
    let progs = programs(t);
    assert_eq!(progs.len(), 1, "expected one kernel");
    let p = progs.into_iter().next().expect("one kernel");
    let s = PtxRenderer::default()
        .render(&p)
        .unwrap_or_else(|e| panic!("{e}"));
    (s, p)
}

fn count(s: &str, pat: &str) -> usize {
    s.matches(pat).count()
}

#[test]
fn add_kernel_structure() {
    let a = Tensor::from_slice_on(&f32s(1000), &[1000], "REF");
    let b = Tensor::from_slice_on(&f32s(1000), &[1000], "REF");
    let (s, p) = ptx_of(&(&a + &b));
    assert!(
        s.contains(".version 8.0") && s.contains(".target sm_80"),
        "{s}"
    );
    assert!(s.contains(".address_size 64"), "{s}");
    assert_eq!(count(&s, ".param .u64"), 3, "one pointer per buffer:\n{s}");
    assert_eq!(count(&s, "ld.global"), 2, "one load per input:\n{s}");
    assert_eq!(count(&s, "st.global"), 1, "one store:\n{s}");
    assert!(s.contains("%ctaid.x") && s.contains("%tid.x") && s.contains("%ntid.x"));
    // bounds check of the grid index against the loop size, branching past the body
    assert!(s.contains(", 1000;"), "bounds check against 1000:\n{s}");
    assert!(count(&s, "setp.ge.u64") == 1 && s.contains("bra $L"), "{s}");
    assert!(s.contains("add.rn.f32"), "IEEE add, no contraction:\n{s}");
    let d = launch_dims(&p);
    assert_eq!((d.grid, d.block, d.total), (4, 256, 1000));
}

#[test]
fn nested_output_loops_flatten_into_the_grid() {
    let a = Tensor::from_slice_on(&f32s(12), &[3, 4], "REF");
    let (s, p) = ptx_of(&a.permute(&[1, 0]).contiguous());
    let d = launch_dims(&p);
    assert_eq!(d.total, 12, "both output loops are mapped to the grid");
    assert_eq!((d.grid, d.block), (1, 32));
    assert!(
        !s.contains("setp.ge.s64"),
        "no loop left in the thread:\n{s}"
    );
}

#[test]
fn long_reductions_with_few_outputs_are_grouped() {
    let a = Tensor::from_slice_on(&f32s(3 * 1000), &[3, 1000], "REF");
    let (s, p) = ptx_of(&a.sum(1isize));
    let d = launch_dims(&p);
    assert_eq!((d.grid, d.block), (3, 256), "one output per block");
    assert!(s.contains(".shared .align 8 .b32 part0[256];"), "{s}");
    assert_eq!(count(&s, "bar.sync 0;"), 2, "{s}");
    assert!(
        s.contains("st.shared.f32") && s.contains("ld.shared.f32"),
        "{s}"
    );
    // a full reduction: one block of 256 threads
    let flat = Tensor::from_slice_on(&f32s(3000), &[3000], "REF");
    let (s, p) = ptx_of(&flat.sum(Axis::All));
    let d = launch_dims(&p);
    assert_eq!((d.grid, d.block), (1, 256), "{s}");
    // a short reduction stays in the thread
    let short = Tensor::from_slice_on(&f32s(3 * 100), &[3, 100], "REF");
    let (s, _) = ptx_of(&short.sum(1isize));
    assert!(!s.contains("bar.sync"), "{s}");
}

/// Grouped reductions in the PTX emulator (shared memory, barriers, threads of a block run
/// cooperatively) against `REF`; each case's schedule has a grouped kernel (but the bool one).
#[test]
fn emulated_grouped_reductions_match_ref() {
    let mut failures = Vec::new();
    for (label, t) in grouped_reduction_cases("REF") {
        let grouped = programs(&t).iter().any(|p| {
            PtxRenderer::default()
                .render(p)
                .unwrap_or_else(|e| panic!("{label}: {e}"))
                .contains("bar.sync")
        });
        assert_eq!(grouped, !NOT_GROUPED.contains(&label), "{label}: grouped?");
        let got = ptx_check::emulate(&t);
        let want = t.to_f64_vec();
        match got {
            Ok(Some((got, _))) if close_reduction(&got, &want) => {}
            Ok(Some((got, _))) => failures.push(format!("{label}: PTX {got:?}\n    REF {want:?}")),
            Ok(None) => failures.push(format!("{label}: no kernel")),
            Err(e) => failures.push(format!(
                "{label}: {}",
                e.chars().take(3000).collect::<String>()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two reductions over the same range share one loop and both accumulators are grouped
/// (`part0`, `part1`): rendered, assembled, and run in the emulator; the WGSL validated by naga.
#[test]
fn grouped_loop_with_two_accumulators() {
    use tinygrad_dtype::{AddrSpace, DType};
    use tinygrad_uop::{Arg, AxisKind, Ops, UOp};
    let (n, m) = (3usize, 1000usize);
    let ptr = DType::FLOAT32.ptr(AddrSpace::Global);
    let (out, x) = (
        UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(0)),
        UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(1)),
    );
    let i = UOp::range(n as i64, 0, AxisKind::Loop);
    let r = UOp::range(m as i64, 1, AxisKind::Reduce);
    let idx = |b: &UOp, e: UOp| UOp::new(Ops::Index, ptr, vec![b.clone(), e], Arg::None);
    let v = UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![idx(&x, &i * m as i64 + &r)],
        Arg::None,
    );
    let red = |op: Ops| {
        UOp::new(
            Ops::Reduce,
            DType::FLOAT32,
            vec![v.clone(), r.clone()],
            Arg::Op(op),
        )
    };
    let value = red(Ops::Add).alu(Ops::Add, &[red(Ops::Max)]);
    let st = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![idx(&out, i.clone()), value],
        Arg::None,
    );
    let ast = UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None);
    let prog = to_program(&ast, PtxRenderer::default().caps());
    let ptx = PtxRenderer::default()
        .render(&prog)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.contains("part0") && ptx.contains("part1"), "{ptx}");
    let xs: Vec<f32> = (0..n * m)
        .map(|k| ((k * 37) % 101) as f32 * 0.5 - 20.0)
        .collect();
    let mut mem = vec![
        vec![0u8; n * 4],
        xs.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    ];
    let d = launch_dims(&prog);
    ptx_check::emu::Kernel::parse(&ptx)
        .and_then(|k| k.run(d.grid, d.block, &mut mem, &[0, 1]))
        .unwrap_or_else(|e| panic!("{e}\n{ptx}"));
    for row in 0..n {
        let vals = &xs[row * m..(row + 1) * m];
        let want = vals.iter().map(|&v| f64::from(v)).sum::<f64>()
            + f64::from(vals.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        let got = f32::from_le_bytes(mem[0][row * 4..row * 4 + 4].try_into().expect("4 bytes"));
        assert!(
            (f64::from(got) - want).abs() <= 1e-3 * want.abs().max(1.0),
            "row {row}: {got} vs {want}"
        );
    }
    let mut k = ptx_check::Kernels::default();
    k.add_ast("two accumulators", &ast);
    k.check("two accumulators");
    let wr = tinygrad_codegen::wgsl::WgslRenderer::new(false, false);
    let prog = to_program(&ast, wr.caps());
    let wgsl = wr.render(&prog).unwrap_or_else(|e| panic!("{e}"));
    assert!(wgsl.contains("part1"), "{wgsl}");
    tinygrad_runtime::webgpu::validate_wgsl(&wgsl, false, false)
        .unwrap_or_else(|e| panic!("{e}\n{wgsl}"));
}

#[test]
fn reduce_kernel_loops_inside_the_thread() {
    let a = Tensor::from_slice_on(&f32s(64), &[4, 16], "REF");
    let (s, p) = ptx_of(&a.sum(1isize));
    assert_eq!(launch_dims(&p).total, 4);
    assert_eq!(count(&s, "setp.ge.s64"), 1, "one reduction loop:\n{s}");
    assert_eq!(count(&s, "st.global"), 1, "{s}");
    // a full reduction has no output loop: one thread
    let (_, p) = ptx_of(&a.sum(Axis::All));
    let d = launch_dims(&p);
    assert_eq!((d.grid, d.block), (1, 1));
}

#[test]
fn gated_loads_are_predicated() {
    let a = Tensor::from_slice_on(&f32s(8), &[8], "REF");
    let (s, _) = ptx_of(&a.pad(&[(2, 3)], 0.0f32));
    let gated = s
        .lines()
        .filter(|l| l.trim_start().starts_with("@%p") && l.contains("ld.global"))
        .count();
    assert_eq!(gated, 1, "the padded load is predicated:\n{s}");
}

#[test]
fn integer_division_is_guarded() {
    let a = Tensor::from_slice_on(&[7i32, -7, 5, i32::MIN], &[4], "REF");
    let b = Tensor::from_slice_on(&[2i32, 0, -1, -1], &[4], "REF");
    let (s, _) = ptx_of(&a.idiv(&b));
    assert!(s.contains("div.s32"), "{s}");
    assert!(
        s.contains(", 0;") && s.contains(", -1;"),
        "zero and -1 guards:\n{s}"
    );
}

#[test]
fn targets_and_versions() {
    let a = Tensor::from_slice_on(&f32s(4), &[4], "REF");
    let p = programs(&a.neg()).remove(0);
    let s90 = PtxRenderer::new(90).render(&p).expect("sm_90");
    assert!(s90.contains(".target sm_90") && s90.contains(".version 8.0"));
    let v88 = PtxRenderer::new(80)
        .with_version(8, 8)
        .render(&p)
        .expect("8.8");
    assert!(v88.contains(".version 8.8"));
    let too_new = PtxRenderer::new(80).with_version(8, 9).render(&p);
    assert!(too_new.is_err_and(|e| e.message.contains("newer than 8.8")));
    assert!(PtxRenderer::new(75).render(&p).is_err());
    assert!(PtxRenderer::new(90).with_version(7, 0).render(&p).is_err());
}

#[test]
fn every_dtype_and_op_class_renders_and_assembles() {
    let mut k = ptx_check::Kernels::default();
    for (label, t) in coverage_cases("REF") {
        k.add(&label, &t);
    }
    for (label, t) in grouped_reduction_cases("REF") {
        k.add(&format!("grouped {label}"), &t);
    }
    k.check("dtypes");
}

/// What the GPU would compute, without one: every case's PTX run by the PTX emulator
/// (`ptx_check::emu`, PTX semantics incl. undefined behaviour as errors) matches `REF`.
#[test]
fn emulated_ptx_matches_ref_on_every_dtype_and_op_class() {
    let cases = coverage_cases("REF");
    let mut failures = Vec::new();
    for (label, t) in &cases {
        // emulate first: realizing on REF replaces the tensor's graph by its buffer
        let got = ptx_check::emulate(t);
        let want = t.to_f64_vec();
        match got {
            Ok(Some((got, _))) if same(&got, &want, t.dtype()) => {}
            Ok(Some((got, _))) => failures.push(format!("{label}: PTX {got:?}\n    REF {want:?}")),
            // the same lazy tensor as an earlier case, realized by it
            Ok(None) => {}
            Err(e) => failures.push(format!(
                "{label}: {}",
                e.chars().take(3000).collect::<String>()
            )),
        }
    }
    eprintln!(
        "emulated PTX vs REF: {} of {} cases match",
        cases.len() - failures.len(),
        cases.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The emulator reports undefined behaviour instead of computing a value, so the renderer's
/// guards are what the emulated tests rely on.
#[test]
fn emulator_rejects_undefined_behaviour() {
    let kernel = |body: &str| {
        let ptx = format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(\n\t.param .u64 \
             k_param_0\n)\n{{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t\
             ld.param.u64 %rd0, [k_param_0];\n{body}\tret;\n}}\n"
        );
        let k = ptx_check::emu::Kernel::parse(&ptx).expect("parses");
        let mut mem = vec![vec![0u8; 8]];
        k.run(1, 1, &mut mem, &[0]).map(|()| mem[0].clone())
    };
    let ok = kernel("\tmov.b32 %r0, 7;\n\tst.global.b32 [%rd0+4], %r0;\n");
    assert_eq!(ok, Ok(vec![0, 0, 0, 0, 7, 0, 0, 0]));
    let div0 = kernel("\tmov.b32 %r0, 7;\n\tmov.b32 %r1, 0;\n\tdiv.s32 %r2, %r0, %r1;\n");
    assert!(div0.is_err_and(|e| e.contains("division by zero")));
    let min = kernel("\tmov.b32 %r0, 0x80000000;\n\tmov.b32 %r1, -1;\n\trem.s32 %r2, %r0, %r1;\n");
    assert!(min.is_err_and(|e| e.contains("MIN / -1")));
    let oob = kernel("\tld.global.b32 %r0, [%rd0+8];\n");
    assert!(oob.is_err_and(|e| e.contains("offset 8")));
    let unset = kernel("\tadd.s32 %r0, %r1, 1;\n");
    assert!(unset.is_err_and(|e| e.contains("read before it is written")));
    // defined corner cases: clamped shifts, NaN-ignoring max, saturating cvt
    let shifts = kernel(
        "\tmov.b32 %r0, -8;\n\tmov.b32 %r1, 40;\n\tshr.s32 %r2, %r0, %r1;\n\
         \tst.global.b32 [%rd0], %r2;\n\tshl.b32 %r2, %r0, %r1;\n\tst.global.b32 [%rd0+4], %r2;\n",
    );
    assert_eq!(shifts, Ok(vec![255, 255, 255, 255, 0, 0, 0, 0]));
}

/// The `CUDA` device, or why it is not there (printed: the test skips, visibly). With
/// `TINYGRAD_REQUIRE_CUDA=1` (`scripts/gpu-check.sh`) a missing device fails instead.
fn cuda() -> Option<()> {
    match get_device("CUDA") {
        Ok(_) => Some(()),
        Err(e) => {
            assert!(
                matches!(e, DeviceError::Unavailable { .. }),
                "CUDA must be a known device that is unavailable here, got: {e}"
            );
            assert!(
                std::env::var("TINYGRAD_REQUIRE_CUDA").map_or(true, |v| v.is_empty() || v == "0"),
                "TINYGRAD_REQUIRE_CUDA is set, but: {e}"
            );
            eprintln!("SKIPPED CUDA test: {e}");
            None
        }
    }
}

#[test]
fn cuda_is_an_error_without_a_gpu_and_never_panics() {
    if cuda().is_none() {
        let t = Tensor::from_slice_on(&[1.0f32, 2.0], &[2], "CUDA") * 2.0f32;
        let e = t.try_realize().expect_err("no CUDA device here");
        assert!(e.to_string().contains("CUDA"), "{e}");
    }
}

#[test]
fn cuda_matches_ref_on_every_dtype_and_op_class() {
    if cuda().is_none() {
        return;
    }
    assert_device_matches_ref("CUDA");
}

#[test]
fn cuda_large_launch_uses_many_blocks() {
    if cuda().is_none() {
        return;
    }
    let n = 3 * 1024 * 1024 + 7;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let a = Tensor::from_slice_on(&x, &[n], "CUDA");
    let got = (&a * 2.0f32 + 1.0f32).to_vec::<f32>();
    assert!(got.iter().enumerate().all(|(i, &g)| g == x[i] * 2.0 + 1.0));
    let s = a.sum(Axis::All).to_vec::<f32>()[0] as f64;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    assert!((s - want).abs() <= 1e-3 * want, "{s} vs {want}");
}
