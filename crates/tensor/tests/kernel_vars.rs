//! Kernels with symbolic variables (`DefineVar`) as kernel arguments: one compiled kernel runs
//! for every value of the variable, on every backend (CPU, REF, WEBGPU, and PTX through the
//! emulator and `ptxas`), loops over a variable's range, index arithmetic with it, and a
//! reduction over it; values outside the variable's bounds are refused before anything runs.

mod ptx_check;

use std::collections::HashMap;
use std::sync::Arc;

use tinygrad_codegen::ptx::{PtxRenderer, launch_dims};
use tinygrad_codegen::{Renderer, to_program};
use tinygrad_runtime::{Buffer, get_device, get_kernel, run_schedule_with_vars};
use tinygrad_schedule::ScheduleItem;
use tinygrad_tensor::DType;
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

const MAX: i64 = 64;

/// The tests compile the same kernels: one at a time, so that "compiled once" is this test's
/// cache entry (two concurrent misses would both compile).
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn var() -> UOp {
    UOp::new(
        Ops::DefineVar,
        DType::INDEX,
        vec![],
        Arg::Var("n".into(), 1, MAX),
    )
}

fn global(slot: i64) -> UOp {
    UOp::new(
        Ops::DefineGlobal,
        DType::FLOAT32.ptr(tinygrad_dtype::AddrSpace::Global),
        vec![],
        Arg::Int(slot),
    )
}

fn load(slot: i64, idx: UOp) -> UOp {
    let g = global(slot);
    let index = UOp::new(Ops::Index, g.dtype(), vec![g, idx], Arg::None);
    UOp::new(Ops::Load, DType::FLOAT32, vec![index], Arg::None)
}

fn store(idx: UOp, value: UOp) -> UOp {
    let g = global(0);
    let index = UOp::new(Ops::Index, g.dtype(), vec![g, idx], Arg::None);
    let st = UOp::new(Ops::Store, DType::VOID, vec![index, value], Arg::None);
    UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
}

/// `out[i] = in[i] * 2 + in[n - 1]` for `i < n`: a loop over the variable's range, and an
/// index computed from it. (`in[n - 1 - i]` would be refused: the range analysis cannot tell
/// that `i < n`, so that index may be negative.)
fn reversed_scaled() -> UOp {
    let r = UOp::range(var(), 0, AxisKind::Loop);
    let v = load(1, r.clone()) * UOp::cnst(DType::FLOAT32, 2.0) + load(1, var() - 1i64);
    store(r, v)
}

/// `out[0] = sum(in[j] for j < n)`: a reduction over the variable's range.
fn prefix_sum() -> UOp {
    let r = UOp::range(var(), 0, AxisKind::Reduce);
    let red = UOp::new(
        Ops::Reduce,
        DType::FLOAT32,
        vec![load(1, r.clone()), r],
        Arg::Op(Ops::Add),
    );
    store(UOp::index(0), red)
}

fn input() -> Vec<f32> {
    (0..MAX).map(|i| (i * 3 % 7) as f32 - 2.0).collect()
}

fn expected(ast: &str, n: usize, x: &[f32]) -> Vec<f32> {
    match ast {
        "reversed" => (0..n).map(|i| x[i] * 2.0 + x[n - 1]).collect(),
        _ => vec![x[..n].iter().sum()],
    }
}

fn buffers(dev: &str, x: &[f32]) -> Vec<Arc<Buffer>> {
    let out = Buffer::new(dev, DType::FLOAT32, MAX as usize);
    out.copy_in(&vec![0u8; MAX as usize * 4]);
    let inp = Buffer::new(dev, DType::FLOAT32, MAX as usize);
    inp.copy_in(&x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
    vec![out, inp]
}

fn floats(b: &Buffer, n: usize) -> Vec<f32> {
    b.to_bytes()
        .chunks_exact(4)
        .take(n)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn check_device(dev: &str) {
    let device = get_device(dev).unwrap_or_else(|e| panic!("{dev}: {e}"));
    let x = input();
    for (name, ast) in [("reversed", reversed_scaled()), ("sum", prefix_sum())] {
        let (kernel, kname, _) = get_kernel(device.as_ref(), &ast).unwrap();
        for n in [1usize, 5, 17, 63, 64] {
            let bufs = buffers(dev, &x);
            kernel.launch(&bufs, &[n as i64]);
            device.synchronize().unwrap();
            let want = expected(name, n, &x);
            assert_eq!(floats(&bufs[0], want.len()), want, "{dev} {kname} n={n}");
            if name == "reversed" {
                // nothing past the bound value is written
                assert!(
                    floats(&bufs[0], MAX as usize)[n..]
                        .iter()
                        .all(|v| *v == 0.0)
                );
            }
        }
        // one kernel for every value: the cache hands back the same compiled kernel
        let (again, _, _) = get_kernel(device.as_ref(), &ast).unwrap();
        let same = std::ptr::addr_eq(Arc::as_ptr(&kernel), Arc::as_ptr(&again));
        assert!(same, "{dev}: compiled once");
    }
}

#[test]
fn one_compiled_kernel_runs_every_value_of_a_variable_on_cpu_and_ref() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    check_device("CPU");
    check_device("REF");
}

#[test]
fn one_compiled_kernel_runs_every_value_of_a_variable_on_webgpu() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    match get_device("WEBGPU") {
        Ok(_) => check_device("WEBGPU"),
        Err(e) if std::env::var("TINYGRAD_REQUIRE_WEBGPU").is_ok() => {
            panic!("WEBGPU required: {e}")
        }
        Err(e) => eprintln!("skipped: no WEBGPU device: {e}"),
    }
}

#[test]
fn ptx_kernels_read_the_variable_from_their_parameters() {
    let caps = PtxRenderer::default().caps();
    let x = input();
    let mut texts = vec![];
    for (name, ast) in [("reversed", reversed_scaled()), ("sum", prefix_sum())] {
        let prog = to_program(&ast, caps);
        assert_eq!(prog.vars.len(), 1);
        let ptx = PtxRenderer::default().render(&prog).unwrap();
        assert!(ptx.contains("_var_0"), "{ptx}");
        let kernel = ptx_check::emu::Kernel::parse(&ptx).unwrap();
        let dims = launch_dims(&prog);
        for n in [1usize, 9, 64] {
            let mut mem = vec![
                vec![0u8; MAX as usize * 4],
                x.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ];
            kernel
                .run_with_vars(dims.grid, dims.block, &mut mem, &[0, 1], &[n as i64])
                .unwrap_or_else(|e| panic!("{name} n={n}: {e}\n{ptx}"));
            let got: Vec<f32> = mem[0]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let want = expected(name, n, &x);
            assert_eq!(&got[..want.len()], &want[..], "PTX {name} n={n}");
        }
        texts.push(ptx);
    }
    match ptx_check::find_ptxas() {
        Ok(ptxas) => {
            let dir = std::env::temp_dir().join(format!("kernel_vars_{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            for (i, t) in texts.iter().enumerate() {
                let p = dir.join(format!("k{i}.ptx"));
                std::fs::write(&p, t).unwrap();
                for sm in [80, 90] {
                    ptx_check::assemble(&ptxas, &p, sm).unwrap_or_else(|e| panic!("{e}\n{t}"));
                }
            }
            println!(
                "ptx [kernel_vars]: {} kernels assembled for sm_80 and sm_90",
                texts.len()
            );
        }
        Err(why) => println!("ptx [kernel_vars]: ptxas not found, not assembled: {why}"),
    }
}

#[test]
fn a_value_outside_the_bounds_or_missing_is_refused_before_anything_runs() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = get_device("CPU").unwrap();
    let x = input();
    let bufs = buffers("CPU", &x);
    let item = ScheduleItem {
        ast: reversed_scaled(),
        bufs: bufs.iter().map(Buffer::uop).collect(),
    };
    let vals = |v: i64| HashMap::from([(Arc::<str>::from("n"), v)]);
    for bad in [0, MAX + 1, -3] {
        let e = run_schedule_with_vars(dev.as_ref(), std::slice::from_ref(&item), &vals(bad))
            .unwrap_err();
        assert!(e.to_string().contains("outside its bounds [1, 64]"), "{e}");
    }
    let e = run_schedule_with_vars(dev.as_ref(), std::slice::from_ref(&item), &HashMap::new())
        .unwrap_err();
    assert!(e.to_string().contains("variable n has no value"), "{e}");
    assert!(
        floats(&bufs[0], MAX as usize).iter().all(|v| *v == 0.0),
        "nothing ran"
    );
    run_schedule_with_vars(dev.as_ref(), std::slice::from_ref(&item), &vals(3)).unwrap();
    assert_eq!(floats(&bufs[0], 3), expected("reversed", 3, &x));
    // a direct launch outside the bounds panics naming the variable (its extents assume them)
    let (kernel, _, _) = get_kernel(dev.as_ref(), &item.ast).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kernel.launch(&bufs, &[65])));
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("variable n = 65 is outside its bounds"),
        "{msg}"
    );
}
