//! The CPU GEMM path (`tinygrad_runtime::gemm`): matmul-shaped kernels of every kind — plain,
//! transposed and broadcast operands, batched, odd sizes, K not a multiple of the block, fused
//! producers and epilogues, convolutions with stride/padding/dilation/groups, forward and
//! backward — computed on `CPU` with the path forced for every eligible kernel, against the
//! `REF` interpreter on the same inputs. Each case checks that the path really ran.

use std::sync::Mutex;

use tinygrad_runtime::gemm;
use tinygrad_tensor::{Dims, Tensor};

/// The path's launch counters are process-wide: tests that assert on them run one at a time so
/// another test's launches can't satisfy them.
static SERIAL: Mutex<()> = Mutex::new(());

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::manual_seed(seed);
    let t = (Tensor::rand(shape) * 2.0 - 1.0).contiguous();
    t.realize();
    t
}

fn close(name: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{name}: shapes");
    let (g, w) = (got.to_vec::<f32>(), want.to_vec::<f32>());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-3 * b.abs(),
            "{name}: element {i}: CPU {a} vs REF {b}"
        );
    }
}

/// Runs `f` on CPU inputs and on REF copies; compares the outputs and the gradients of
/// `sum(out * r)` with respect to every input.
fn check(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor) {
    check_path(name, inputs, f, true);
}

/// [`check`]; `must_use_path`: fail if no kernel took the GEMM path (shapes it does not cover,
/// such as grouped convolutions whose output channel range mixes group and channel, are only
/// checked for correctness).
fn check_path(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Tensor, must_use_path: bool) {
    gemm::set_min_flops(0.0);
    if !gemm::enabled() {
        println!("{name}: skipped, the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    let before = gemm::launch_count();
    let cpu: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.clone().requires_grad(true))
        .collect();
    let refs: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.to("REF").requires_grad(true))
        .collect();
    let (out_c, out_r) = (f(&cpu), f(&refs));
    close(name, &out_c, &out_r);
    let r = rand(&out_c.shape(), 99);
    let gc = (&out_c * &r)
        .sum(None)
        .gradient(&cpu.iter().collect::<Vec<_>>());
    let gr = (&out_r * &r.to("REF"))
        .sum(None)
        .gradient(&refs.iter().collect::<Vec<_>>());
    for (i, (a, b)) in gc.iter().zip(&gr).enumerate() {
        close(&format!("{name}: grad of input {i}"), a, b);
    }
    assert!(
        !must_use_path || gemm::launch_count() > before,
        "{name}: no kernel took the GEMM path"
    );
}

#[test]
fn matmuls() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (m, k, n) in [
        (4, 4, 4),
        (7, 13, 5),
        (37, 129, 45),
        (64, 300, 17),
        (6, 600, 20),
        (5, 9, 33),
        // a short K block (< 64: tiles run row panel by row panel) over more column panels
        // than one L2 block of B (73 at K = 28)
        (20, 25, 1300),
        // A read in place, contiguous along K, with one column panel: streamed (each row
        // panel's K blocks in turn, the next panel's rows prefetched), K of 3 blocks
        (40, 700, 12),
    ] {
        let (a, b) = (rand(&[m, k], 1), rand(&[k, n], 2));
        check(&format!("matmul {m}x{k}x{n}"), &[a, b], |t| {
            t[0].matmul(&t[1])
        });
    }
    let (a, b) = (rand(&[20, 30], 3), rand(&[20, 40], 4));
    check("transposed A", &[a, b], |t| t[0].t().matmul(&t[1]));
    let (a, b) = (rand(&[3, 9, 10], 5), rand(&[3, 10, 11], 6));
    check("batched", &[a, b], |t| t[0].matmul(&t[1]));
    let (a, b) = (rand(&[4, 9, 10], 7), rand(&[10, 11], 8));
    check("broadcast B", &[a, b], |t| t[0].matmul(&t[1]));
    let (x, w, bias) = (rand(&[33, 20], 9), rand(&[12, 20], 10), rand(&[12], 11));
    check("linear + relu epilogue", &[x, w, bias], |t| {
        t[0].linear(&t[1].t(), Some(&t[2])).relu()
    });
    // An input whose every load is gated off (it only reaches the kernel through padding):
    // simplification removes its loads, but the launcher still binds its slot.
    let (a, b, z) = (rand(&[9, 10], 14), rand(&[10, 12], 15), rand(&[9, 12], 16));
    check("input gated off entirely", &[a, b, z], |t| {
        t[0].matmul(&t[1]) + t[2].pad(&[(0, 0), (12, 0)], 0.0).shrink(&[(0, 9), (0, 12)])
    });
    let (a, b) = (rand(&[16, 24], 12), rand(&[24, 8], 13));
    check("fused producers", &[a, b], |t| {
        (t[0].exp() * 0.5).matmul(&(&t[1] + 1.0).relu())
    });
}

/// A GEMM with many columns and a long reduction takes K blocks whose `B` panel fills 64 KiB
/// (`k_block_target`): 1024 with the AVX2 tile, longer than its `kc` (AVX-512 tiles keep
/// theirs). K = 1030 is not a multiple of 8, so the last block is zero-padded; values against
/// `f64` sums. With fewer columns, the AVX2 tile takes K blocks of up to `NARROW_K_BLOCK`.
#[test]
fn wide_gemms_take_long_k_blocks() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use tinygrad_codegen::gemm::{WIDE_B_PANEL_BYTES, WIDE_MIN_K, WIDE_MIN_N, k_block_target};
    gemm::set_min_flops(0.0);
    if !gemm::enabled() {
        println!("wide GEMMs: skipped, the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    let (m, k, n) = (WIDE_MIN_N + 2, WIDE_MIN_K + 6, WIDE_MIN_N + 4);
    let (a, b) = (rand(&[m, k], 20), rand(&[k, n], 21));
    let out = a.matmul(&b);
    let plan = only_gemm(&out, "wide matmul");
    let tile = gemm::tile_for(plan.m, plan.n);
    let target = k_block_target(tile, plan.n, plan.k);
    let want = if tile.nr == 16 {
        tile.kc.max(WIDE_B_PANEL_BYTES / (4 * tile.nr))
    } else {
        tile.kc
    };
    assert_eq!(target, want, "wide target");
    assert!(
        plan.kb <= target + 4 && 2 * plan.kb > target,
        "K block {} for K {} (target {target})",
        plan.kb,
        plan.k
    );
    if tile == gemm::TILE {
        assert_eq!(
            (plan.kb, plan.n_kb),
            (516, 2),
            "AVX2: K 1030 in 2 blocks of 516"
        );
    }
    // fewer columns: one block up to NARROW_K_BLOCK, equal blocks past it
    use tinygrad_codegen::gemm::NARROW_K_BLOCK;
    for (k, want) in [(1030, (1032, 1)), (2500, (1252, 2)), (2100, (700, 3))] {
        let narrow = only_gemm(&rand(&[40, k], 22).matmul(&rand(&[k, 32], 23)), "narrow");
        if gemm::tile_for(narrow.m, narrow.n) == gemm::TILE {
            assert_eq!(NARROW_K_BLOCK, 2048);
            assert_eq!((narrow.kb, narrow.n_kb), want, "K {k} with 32 columns");
        }
    }
    let before = gemm::launch_count();
    let got = out.to_vec::<f32>();
    assert!(
        gemm::launch_count() > before,
        "the wide matmul did not take the GEMM path"
    );
    let (av, bv) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    assert_f64_matmul(
        "wide matmul",
        &got,
        (m, k, n),
        |i, p| av[i * k + p],
        |p, j| bv[p * n + j],
    );
}

/// Asserts that `got` (`m x n`, row-major) is `sum over p of a(i, p) * b(p, j)` summed in
/// `f64`, within 1e-4 absolute plus 1e-4 relative.
fn assert_f64_matmul(
    label: &str,
    got: &[f32],
    (m, k, n): (usize, usize, usize),
    a: impl Fn(usize, usize) -> f32,
    b: impl Fn(usize, usize) -> f32,
) {
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| a(i, p) as f64 * b(p, j) as f64).sum();
            let g = got[i * n + j] as f64;
            assert!(
                (g - want).abs() <= 1e-4 + 1e-4 * want.abs(),
                "{label}: element ({i}, {j}): {g} vs {want}"
            );
        }
    }
}

/// The GEMM plan (for this CPU's tile) of the one matmul-shaped kernel scheduled for `out`.
fn only_gemm(out: &Tensor, label: &str) -> tinygrad_codegen::gemm::GemmPlan {
    let plans: Vec<_> = Tensor::schedule(&[out])
        .iter()
        .filter_map(|it| {
            let plan = tinygrad_codegen::gemm::plan_gemm(&it.ast, gemm::tile(), 0.0)?;
            let tile = gemm::tile_for(plan.m, plan.n);
            tinygrad_codegen::gemm::plan_gemm(&it.ast, tile, 0.0)
        })
        .collect();
    let n = plans.len();
    let [plan] = <[_; 1]>::try_from(plans).unwrap_or_else(|_| {
        panic!("{label}: expected one matmul-shaped kernel, got {n}");
    });
    plan
}

/// Which side of a linear layer becomes `N` (the packed side): the smaller one, unless the
/// output already runs along the larger one and packing it costs less than reading `C`
/// transposed in the epilogue (`(N - M) * K < 2 * M * N`). Both orientations computed against
/// `REF`, with a GELU epilogue.
#[test]
fn orientation_follows_the_output_when_packing_is_cheap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gelu = |x: Tensor| &x * 0.5 * ((&x * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0);
    // (tokens, in, out, whether the tokens stay M)
    for (m, k, n, keeps) in [(200, 96, 300, true), (12, 96, 300, false)] {
        let (x, w, b) = (rand(&[m, k], 60), rand(&[n, k], 61), rand(&[n], 62));
        let out = gelu(x.linear(&w.t(), Some(&b)));
        let plan = only_gemm(&out, &format!("{m}x{k}x{n}"));
        let want = if keeps { (m, n) } else { (n, m) };
        assert_eq!((plan.m, plan.n), want, "{m}x{k}x{n}: (M, N) of the GEMM");
        check(&format!("linear {m}x{k}x{n} + gelu"), &[x, w, b], |t| {
            gelu(t[0].linear(&t[1].t(), Some(&t[2])))
        });
    }
}

/// A 1x1 convolution's output pixels (the innermost output range, on the activation's side)
/// are N when they are the larger side and packing them costs less than reading `C`
/// transposed: ResNet's 3136 x 256 x 64 ran at 29 GFLOP/s with them as M. With few output
/// channels the channels stay N.
#[test]
fn convolution_pixels_are_n_when_packing_them_is_cheap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (output channels, (M, N) of the GEMM)
    for (cout, want) in [(256, (256, 1024)), (16, (1024, 16))] {
        let (x, w) = (rand(&[1, 64, 32, 32], 70), rand(&[cout, 64, 1, 1], 71));
        let out = x.conv2d(&w, None, 1, 1, 1, 0).relu();
        let plan = only_gemm(&out, &format!("cout {cout}"));
        assert_eq!((plan.m, plan.n), want, "cout {cout}: (M, N) of the GEMM");
        check(&format!("conv 1x1 64 -> {cout}, 32x32"), &[x, w], |t| {
            t[0].conv2d(&t[1], None, 1, 1, 1, 0).relu()
        });
    }
}

/// The micro-kernel is chosen at run time: AVX-512F's 6x32 where the CPU has it (unless
/// `CPU_AVX512=0`, which CI sets for a second run so the AVX2 kernel is tested on such machines
/// too), else AVX2's 6x16. Every other test here runs on the chosen one.
#[test]
fn micro_kernel_follows_the_cpu() {
    let name = gemm::microkernel_name();
    println!("GEMM micro-kernel: {name} (tile {:?})", gemm::tile());
    if !gemm::enabled() {
        println!("skipped: the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    #[cfg(target_arch = "x86_64")]
    let has_512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let has_512 = false;
    let off = std::env::var("CPU_AVX512").is_ok_and(|v| v == "0");
    let want = if has_512 && !off { "avx512" } else { "avx2" };
    assert_eq!(
        name, want,
        "avx512f detected: {has_512}, CPU_AVX512=0: {off}"
    );
    assert_eq!(gemm::tile().nr, if want == "avx512" { 32 } else { 16 });
}

/// Tall operands: each task packs its own block of `A` rows (`FusedRowsJob`), the last block
/// partial and the last panel padded (3100 rows = 516 panels of 6 and 4 rows). The operands
/// are ones the GEMM cannot read in place: a product of two inputs, a padded convolution input
/// (small enough for `conv2d` not to realize its padded input).
#[test]
fn tall_operands_pack_rows_per_task() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = gemm::fused_row_jobs();
    let (a, b, c) = (
        rand(&[3100, 20], 30),
        rand(&[20, 18], 31),
        rand(&[3100, 20], 34),
    );
    check("tall matmul 3100x20x18", &[a, b, c], |t| {
        (&t[0] * &t[2]).matmul(&t[1])
    });
    let (x, w) = (rand(&[4, 3, 28, 28], 32), rand(&[5, 3, 3, 3], 33));
    check("conv2d with 3136 output rows", &[x, w], |t| {
        t[0].conv2d(&t[1], None, 1, 1, 1, 1)
    });
    if gemm::enabled() {
        assert!(gemm::fused_row_jobs() > before, "no GEMM packed A per task");
    }
}

/// The serial lock, or `None` (after saying why the test is skipped) where the GEMM path or
/// its in-place operands are off.
fn serial_in_place() -> Option<std::sync::MutexGuard<'static, ()>> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !gemm::enabled() || !gemm::in_place_enabled() {
        println!("skipped: the GEMM path or its in-place operands are off");
        return None;
    }
    Some(guard)
}

/// `A` read in place (its index is a row part plus a k part): plain, transposed and batched
/// operands, an elementwise producer applied first, a large padded convolution of a computed
/// input, and K not a multiple of the block, where the micro-kernel must stop at K. (With the
/// AVX-512 kernel an operand contiguous along K is packed instead, so the transposed cases are
/// the ones read in place there.)
#[test]
fn operands_read_in_place() {
    let Some(_serial) = serial_in_place() else {
        return;
    };
    let before = gemm::in_place_launches();
    let (a, b) = (rand(&[37, 13], 40), rand(&[13, 19], 41));
    check("matmul 37x13x19", &[a, b], |t| t[0].matmul(&t[1]));
    let (a, b) = (rand(&[3, 10, 30], 42), rand(&[3, 10, 11], 43));
    check("batched, transposed A", &[a, b], |t| {
        t[0].transpose(1, 2).matmul(&t[1])
    });
    let (a, b) = (rand(&[40, 24], 46), rand(&[24, 9], 47));
    check("elementwise producer, prepared", &[a, b], |t| {
        (&t[0] + 0.5).relu().matmul(&t[1])
    });
    let (a, b) = (rand(&[24, 40], 54), rand(&[24, 9], 55));
    check(
        "elementwise producer of a transposed A, prepared",
        &[a, b],
        |t| (&t[0] + 0.5).relu().t().matmul(&t[1]),
    );
    // A mask computed from the kernel's ranges (no buffer): not a function of the loaded value
    // alone, so A is packed (preparing it would lose the mask).
    let (a, b) = (rand(&[40, 40], 50), rand(&[40, 12], 51));
    check("operand masked by a computed triangle", &[a, b], |t| {
        (&t[0] * Tensor::ones_like(&t[0]).tril(0)).matmul(&t[1])
    });
    check(
        "tril operand",
        &[rand(&[40, 40], 52), rand(&[40, 12], 53)],
        |t| t[0].tril(0).matmul(&t[1]),
    );
    // Large enough (5 Mflop) for conv2d to realize its padded, computed input: forward, input
    // and weight gradients all read it in place.
    let (x, w) = (rand(&[2, 8, 20, 20], 48), rand(&[16, 8, 5, 5], 49));
    check("conv2d 5x5 padding 2 of a relu", &[x, w], |t| {
        (&t[0] + 0.25).relu().conv2d(&t[1], None, 1, 1, 1, 2)
    });
    let after_plain = gemm::in_place_launches();
    assert!(after_plain > before, "no GEMM read A in place");
    // A = X.T with X's last row (k = K - 1) inf and B positive: every output is +inf. A
    // micro-kernel running on past K (16 = K rounded up to the block) would multiply the
    // last k's value by B's zero padding: inf * 0 = NaN.
    let (k, m, n) = (13, 40, 18);
    let x = Tensor::cat(
        &[
            &rand(&[k - 1, m], 44),
            &Tensor::full(&[1, m], f32::INFINITY),
        ],
        0,
    );
    x.realize();
    let b = (rand(&[k, n], 45).abs() + 0.1).contiguous();
    b.realize();
    let got = x.t().matmul(&b).to_vec::<f32>();
    assert!(
        got.iter().all(|v| *v == f32::INFINITY),
        "in-place A read past K: {:?}",
        &got[..4]
    );
    assert!(
        gemm::in_place_launches() > after_plain,
        "the transposed A was packed"
    );
}

/// Batched GEMMs whose `A` is read in place, with at least 4 batches per thread and K in one
/// chunk (a convolution's weight gradient split along its reduction), run one task per batch
/// (`BatchTasksJob`: each packs its batch's `B` itself). Against `REF`, forward and backward:
/// `B` of one panel and of several, K past one block, an elementwise (prepared) operand.
#[test]
fn batches_run_one_task_each() {
    let Some(_serial) = serial_in_place() else {
        return;
    };
    let threads = tinygrad_runtime::thread_pool::global_pool().threads();
    if threads < 2 {
        println!("skipped: one thread, so batches are not run as tasks");
        return;
    }
    let batch = 4 * threads;
    let before = gemm::batch_task_launches();
    let (a, b) = (rand(&[batch, 2100, 30], 60), rand(&[batch, 2100, 11], 61));
    check("batched, B of one panel, K of three blocks", &[a, b], |t| {
        t[0].transpose(1, 2).matmul(&t[1])
    });
    let (a, b) = (rand(&[batch, 40, 30], 62), rand(&[batch, 40, 37], 63));
    check("batched, prepared A", &[a, b], |t| {
        (&t[0] + 0.5).relu().transpose(1, 2).matmul(&t[1])
    });
    assert!(
        gemm::batch_task_launches() > before,
        "no batched GEMM ran one task per batch"
    );
}

/// GEMMs with at most 16 columns (a batch-1 transformer's projections: N = tokens) take the
/// 12x16 tile where the CPU has AVX-512, with `A` read along its row stride when it is
/// contiguous along K, else through its tables in 6-row halves (also the last panel when M is
/// not a multiple of 12), else packed. Each way against `REF`, forward and backward, with K
/// past one block and not a multiple of it.
#[test]
fn narrow_gemms() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !gemm::enabled() {
        println!("skipped: the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    let narrow = gemm::tile_for(384, 16) == gemm::TILE_AVX512_NARROW;
    println!("tile for 16 columns: {:?}", gemm::tile_for(384, 16));
    let before = gemm::strided_launches();
    // (tokens, in, out): N = tokens
    for (t, k, o) in [(16, 384, 384), (12, 100, 48), (5, 777, 30), (9, 64, 25)] {
        let (x, w, b) = (rand(&[t, k], 80), rand(&[o, k], 81), rand(&[o], 82));
        let out = x.linear(&w.t(), Some(&b));
        let plan = only_gemm(&out, &format!("{t}x{k}x{o}"));
        assert_eq!((plan.m, plan.n), (o, t), "{t}x{k}x{o}: (M, N)");
        assert_eq!(
            plan.tile == gemm::TILE_AVX512_NARROW,
            narrow,
            "{t}x{k}x{o}: tile"
        );
        check(&format!("linear {t}x{k}x{o}"), &[x, w, b], |t| {
            t[0].linear(&t[1].t(), Some(&t[2])).gelu()
        });
    }
    if narrow && gemm::in_place_enabled() {
        assert!(
            gemm::strided_launches() > before,
            "no narrow GEMM read A along its stride"
        );
    }
    // rows in reverse order (a negative stride), a weight stored transposed (not contiguous
    // along K): through the tables; a product of two weights: packed
    let tables = |name: &str, inputs: &[Tensor], f: &dyn Fn(&[Tensor]) -> Tensor, in_place| {
        // the forward alone (the gradients' GEMMs take their own paths)
        let (ip, st) = (gemm::in_place_launches(), gemm::strided_launches());
        f(inputs).realize();
        if narrow && gemm::in_place_enabled() {
            assert_eq!(gemm::strided_launches(), st, "{name}: read along a stride");
            assert_eq!(
                gemm::in_place_launches() > ip,
                in_place,
                "{name}: read in place"
            );
        }
        check(name, inputs, f);
    };
    let (x, w) = (rand(&[10, 70], 83), rand(&[36, 70], 84));
    tables(
        "linear of flipped weight rows",
        &[x, w],
        &|t| t[0].matmul(&t[1].flip(&[0]).t()),
        true,
    );
    let (x, w) = (rand(&[14, 50], 85), rand(&[50, 40], 86));
    tables(
        "matmul, K-major weight",
        &[x, w],
        &|t| t[0].matmul(&t[1]),
        true,
    );
    let (x, w, v) = (rand(&[8, 90], 87), rand(&[30, 90], 88), rand(&[30, 90], 89));
    tables(
        "linear of a product",
        &[x, w, v],
        &|t| t[0].matmul(&(&t[1] * &t[2]).t()),
        false,
    );
    // K not a multiple of 4 (and past one block with the AVX-512 tile), inf in the first k of
    // every row of A: each output is +inf, and a kernel reading past K would reach the next
    // row's inf times B's zero padding: NaN
    let (k, m, n) = (401, 24, 16);
    let w = Tensor::cat(
        &[
            &Tensor::full(&[m, 1], f32::INFINITY),
            &rand(&[m, k - 1], 90),
        ],
        1,
    );
    w.realize();
    let x = (rand(&[n, k], 91).abs() + 0.1).contiguous();
    x.realize();
    let st = gemm::strided_launches();
    let got = x.matmul(&w.t()).to_vec::<f32>();
    assert!(
        got.iter().all(|v| *v == f32::INFINITY),
        "narrow GEMM read past K: {:?}",
        &got[..4]
    );
    if narrow && gemm::in_place_enabled() {
        assert!(
            gemm::strided_launches() > st,
            "the inf case was not strided"
        );
    }
}

/// name, input shape, weight shape, groups, stride, dilation, padding.
type ConvCase = (
    &'static str,
    [usize; 4],
    [usize; 4],
    usize,
    usize,
    usize,
    usize,
);

#[test]
fn convolutions() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases: [ConvCase; 4] = [
        ("plain", [2, 3, 9, 9], [8, 3, 3, 3], 1, 1, 1, 0),
        (
            "stride 2 padding 1",
            [2, 4, 10, 11],
            [6, 4, 3, 3],
            1,
            2,
            1,
            1,
        ),
        ("dilation 2", [1, 3, 12, 12], [5, 3, 3, 3], 1, 1, 2, 2),
        (
            "5x5 (beautiful_mnist)",
            [3, 4, 12, 12],
            [8, 4, 5, 5],
            1,
            1,
            1,
            0,
        ),
    ];
    for (name, xs, ws, groups, stride, dilation, padding) in cases {
        let (x, w) = (rand(&xs, 20), rand(&ws, 21));
        check(&format!("conv2d {name}"), &[x, w], |t| {
            t[0].conv2d(&t[1], None, groups, stride, dilation, padding)
        });
    }
    let (x, w) = (rand(&[2, 8, 7, 7], 27), rand(&[8, 4, 3, 3], 28));
    let grouped = |t: &[Tensor]| t[0].conv2d(&t[1], None, 2, 1, 1, 1);
    check_path("conv2d groups 2", &[x, w], grouped, false);
    let (x, w) = (rand(&[2, 3, 17], 22), rand(&[4, 3, 3], 23));
    check("conv1d stride 2 padding 1", &[x, w], |t| {
        t[0].conv2d(&t[1], None, 1, 2, 1, 1)
    });
    let (x, w, b) = (
        rand(&[2, 6, 8, 8], 24),
        rand(&[6, 6, 3, 3], 25),
        rand(&[6], 26),
    );
    check("conv + bias + relu + maxpool", &[x, w, b], |t| {
        t[0].conv2d(&t[1], Some(&t[2]), 1, Dims::default(), 1, 0)
            .relu()
            .max_pool2d(2, Dims::default(), 1, 0, false)
    });
}

/// `A` read in place from rows 8 KiB apart (every other element of rows of 2048 floats: not
/// contiguous along K, so read in place with every micro-kernel) is multiplied in small row
/// blocks that stay in cache although the rows' slices share cache sets, against `f64` sums.
/// 600 rows make tasks of ten row panels on 2 threads (see `task_grid`), so each task walks
/// several blocks (eight panels with the AVX2 kernel's K blocks of 256, five with AVX-512's
/// 384), and K = 1024 is several K blocks.
#[test]
fn aliasing_rows_of_a_read_in_place() {
    let Some(_serial) = serial_in_place() else {
        return;
    };
    gemm::set_min_flops(0.0);
    let (m, k, n) = (600, 1024, 40);
    let (x, w) = (rand(&[m, 2 * k], 70), rand(&[k, n], 71));
    let every_other = x
        .reshape(&[m as isize, k as isize, 2])
        .shrink(&[(0, m), (0, k), (0, 1)])
        .reshape(&[m as isize, k as isize]);
    let before = gemm::aliased_launches();
    let got = every_other.matmul(&w).to_vec::<f32>();
    assert!(
        gemm::aliased_launches() > before,
        "A's rows 8 KiB apart were not read as aliasing"
    );
    let (xv, wv) = (x.to_vec::<f32>(), w.to_vec::<f32>());
    assert_f64_matmul(
        "every other element",
        &got,
        (m, k, n),
        |i, p| xv[i * 2 * k + 2 * p],
        |p, j| wv[p * n + j],
    );
}

/// A plain matmul's epilogue only copies `C`: its whole row panels are written straight into
/// the output and the rows of the last, partial panel copied after (plain, batched with one
/// task per batch, K in several blocks, B packed several panels at a time); a fused activation
/// or bias, columns that are not whole panels or a transposed output keep the epilogue. Each
/// case against `REF`, and the launch counter says which way it ran. The column counts are
/// multiples of this CPU's tile (`nr`: 16 with AVX2, 32 with AVX-512), so each case is what it
/// names on every tile (`launch_decisions_of_every_tile` checks both tiles' decisions on any
/// machine).
#[test]
fn plain_matmuls_write_the_output_directly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    gemm::set_min_flops(0.0);
    if !gemm::enabled() {
        println!("skipped: the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    // (forward only: the gradients' matmuls would move the counter for every case)
    let direct = |name: &str, inputs: &[Tensor], f: &dyn Fn(&[Tensor]) -> Tensor, want: bool| {
        let refs: Vec<Tensor> = inputs.iter().map(|t| t.to("REF")).collect();
        let (before, launches) = (gemm::direct_launches(), gemm::launch_count());
        let got = f(inputs);
        got.realize();
        assert!(
            gemm::launch_count() > launches,
            "{name}: the GEMM path did not run"
        );
        let took = gemm::direct_launches() > before;
        close(name, &got, &f(&refs));
        assert_eq!(
            took, want,
            "{name}: written directly: {took}, expected {want}"
        );
    };
    // (the tile of GEMMs with more than 16 columns, whose panels the column counts fill)
    let nr = gemm::tile_for(50, 17).nr;
    let (a, b) = (rand(&[50, 64], 1), rand(&[64, 3 * nr], 2));
    // plain matmuls, written directly (each row count leaves a partial last panel or none on
    // the 6-row tiles; the narrow AVX-512 tile of 16 columns has 12 rows)
    let matmuls = [
        ("50 rows (2 in the last panel)", a.clone(), b.clone()),
        ("48 rows (no partial panel)", rand(&[48, 64], 3), b.clone()),
        (
            "K of 2500 (two blocks)",
            rand(&[80, 2500], 5),
            rand(&[2500, 2 * nr], 6),
        ),
        (
            "batched, 40 rows",
            rand(&[9, 40, 64], 7),
            rand(&[9, 64, 16], 8),
        ),
        // (K of 300 and 4 column panels: B is packed 4 panels per k, see
        // `gemm::launch::PACK_B_PANEL_GROUP`; fewer columns than rows, so that the rows stay
        // M: see `orientation_follows_the_output_when_packing_is_cheap`)
        (
            "B packed 4 panels at a time",
            rand(&[70, 300], 13),
            rand(&[300, 4 * nr], 14),
        ),
        (
            "batched, B packed 4 panels at a time",
            rand(&[9, 80, 300], 15),
            rand(&[9, 300, 4 * nr], 16),
        ),
    ];
    for (name, x, y) in matmuls {
        direct(name, &[x, y], &|t| t[0].matmul(&t[1]), true);
    }
    direct(
        "transposed B",
        &[a.clone(), rand(&[3 * nr, 64], 4)],
        &|t| t[0].matmul(&t[1].t()),
        true,
    );
    // not a plain copy of C into C's layout: the epilogue runs
    type Case<'a> = (&'a str, Vec<Tensor>, &'a dyn Fn(&[Tensor]) -> Tensor);
    let kept: [Case; 4] = [
        ("with relu", vec![a.clone(), b.clone()], &|t| {
            t[0].matmul(&t[1]).relu()
        }),
        (
            "with bias",
            vec![a.clone(), b.clone(), rand(&[3 * nr], 9)],
            &|t| t[0].matmul(&t[1]) + &t[2],
        ),
        ("40 columns", vec![a.clone(), rand(&[64, 40], 10)], &|t| {
            t[0].matmul(&t[1])
        }),
        ("transposed output", vec![a.clone(), b.clone()], &|t| {
            t[0].matmul(&t[1]).t().contiguous()
        }),
    ];
    for (name, inputs, f) in kept {
        direct(name, &inputs, f, false);
    }
    // Assigned to its own operand (`a.assign(a @ b)`): tiles written early must not change the
    // rows later tiles read (the schedule gives the product its own buffer; the launcher
    // would keep the epilogue if the output overlapped an input).
    let (a, b) = (rand(&[96, 96], 11), rand(&[96, 96], 12));
    let want = a.to("REF").matmul(&b.to("REF"));
    want.realize();
    a.assign(&a.matmul(&b));
    a.realize();
    close("assigned to A", &a, &want);
}

/// A GEMM kernel launched with its output bound over its `A` operand (possible at the runtime's
/// level; the schedule always gives a matmul its own output): the tasks must not write rows of
/// the output while other tasks still read them as `A`, so the launch falls back to the scratch
/// `C` and the epilogue, and the result is `A @ B` of the values before the launch. Bound to a
/// buffer of its own, the same kernel writes directly.
#[test]
fn an_output_bound_over_an_input_is_not_written_directly() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    gemm::set_min_flops(0.0);
    if !gemm::enabled() {
        println!("skipped: the GEMM path is off (CPU_GEMM=0 or no AVX2/FMA)");
        return;
    }
    use tinygrad_runtime::{Buffer, get_device};
    // C and A have one shape: 50 x 64 (a partial last panel), B 64 x 64
    let (a, b) = (rand(&[50, 64], 31), rand(&[64, 64], 32));
    let want = a.to("REF").matmul(&b.to("REF")).to_vec::<f32>();
    let items = Tensor::schedule(&[&a.matmul(&b)]);
    let [item] = &items[..] else {
        panic!("one kernel expected, got {}", items.len())
    };
    let (kernel, name, _) = get_device("CPU")
        .unwrap()
        .compile_ast(&item.ast)
        .expect("a matmul-shaped kernel")
        .unwrap();
    let slots: Vec<std::sync::Arc<Buffer>> = item
        .bufs
        .iter()
        .map(|u| Buffer::of(u).expect("a buffer"))
        .collect();
    // A is the input of 50 x 64 floats (B has 64 x 64)
    let a_slot = (1..slots.len())
        .find(|&s| slots[s].size == 50 * 64)
        .expect("A is bound to a slot");
    let bytes: Vec<u8> = a
        .to_vec::<f32>()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for over_a in [true, false] {
        let out = Buffer::new("CPU", slots[0].dtype, 50 * 64);
        let x = Buffer::new("CPU", slots[0].dtype, 50 * 64);
        x.copy_in(&bytes);
        let mut bufs = slots.clone();
        bufs[a_slot] = x.clone();
        bufs[0] = if over_a { x.clone() } else { out.clone() };
        let (before, launches) = (gemm::direct_launches(), gemm::launch_count());
        kernel.launch(&bufs, &[]);
        assert!(
            gemm::launch_count() > launches,
            "{name}: the GEMM path did not run"
        );
        let direct = gemm::direct_launches() > before;
        assert_eq!(
            direct, !over_a,
            "{name}: over A {over_a}: written directly {direct}"
        );
        let got: Vec<f32> = bufs[0]
            .to_bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 + 1e-3 * w.abs(),
                "over A {over_a}: element {i}: {g} vs {w}"
            );
        }
    }
}

/// `A` contiguous along K with rows 4 KiB apart (the first 1022 or 2046 columns of rows of
/// 1024 or 2048 floats): read where it lies, but each task copies its row blocks into its
/// thread's buffer before multiplying them (`InPlaceA::repacked`). K not a multiple of the
/// copy's groups of 4 (zero padding), a partial last row panel, and with 256 columns K blocks
/// of 1024 (the second one 1022 long), against `f64` sums.
#[test]
fn aliasing_rows_contiguous_along_k_are_copied_per_row_block() {
    let Some(_serial) = serial_in_place() else {
        return;
    };
    gemm::set_min_flops(0.0);
    for (m, width, k, n) in [(601, 1024, 1022, 40), (300, 2048, 2046, 256)] {
        let (x, w) = (rand(&[m, width], 72), rand(&[k, n], 73));
        let a = x.shrink(&[(0, m), (0, k)]);
        let (aliased, repacked) = (gemm::aliased_launches(), gemm::repacked_a_blocks());
        let got = a.matmul(&w).to_vec::<f32>();
        // (the AVX-512 tile packs an operand contiguous along K instead: only the values count)
        if gemm::tile() == gemm::TILE {
            assert!(
                gemm::aliased_launches() > aliased && gemm::repacked_a_blocks() > repacked,
                "{m}x{k}x{n}: A's rows 4 KiB apart were not read in place and copied per block ({} aliased launches, {} copied blocks)",
                gemm::aliased_launches() - aliased,
                gemm::repacked_a_blocks() - repacked
            );
        } else {
            println!(
                "{m}x{k}x{n}: the {:?} tile packs A: only the values are checked",
                gemm::tile()
            );
        }
        let (xv, wv) = (x.to_vec::<f32>(), w.to_vec::<f32>());
        assert_f64_matmul(
            &format!("{m}x{k}x{n}"),
            &got,
            (m, k, n),
            |i, p| xv[i * width + p],
            |p, j| wv[p * n + j],
        );
    }
}

/// The launch decisions of each CPU tile (AVX2's 6x16 and AVX-512's 6x32 with its narrow
/// 12x16), taken on any machine: `gemm::launch_plan_for` plans the kernel for a given tile and
/// computes `A`'s tables with the generic kernels, as `GemmKernel::new` does, so only the
/// micro-kernels need the CPU's features (the other tests here run them on this CPU's tile).
/// Two threads, as on the machines measured.
#[test]
fn launch_decisions_of_every_tile() {
    use gemm::launch::{ARoute, LaunchPlan, PACK_B_PANEL_GROUP};
    use tinygrad_codegen::gemm::GemmPlan;
    let dev = tinygrad_runtime::cpu::CpuDevice::new("CPU").expect("the CPU device");
    let decide = |out: &Tensor, cpu, label: &str| -> (GemmPlan, LaunchPlan) {
        let plans: Vec<_> = Tensor::schedule(&[out])
            .iter()
            .filter_map(|it| {
                gemm::launch_plan_for(&dev, &it.ast, cpu, 2).expect("the tables build")
            })
            .collect();
        let n = plans.len();
        <[_; 1]>::try_from(plans)
            .unwrap_or_else(|_| panic!("{label}: expected one matmul-shaped kernel, got {n}"))
            .into_iter()
            .next()
            .unwrap()
    };
    for cpu in [gemm::TILE, gemm::TILE_AVX512] {
        let avx512 = cpu == gemm::TILE_AVX512;
        let nr = cpu.nr;
        // AVX-512: the 12x32 tile unless its padding rows cost more than it gains, the 12x16
        // one for at most 16 columns
        let tall = if avx512 {
            gemm::TILE_AVX512_TALL
        } else {
            gemm::TILE
        };
        for (m, n, tile) in [
            (50, 48, tall),
            (64, 100, tall),
            (30, 100, cpu),
            (13, 40, cpu),
            (1024, 1024, tall),
            (
                384,
                16,
                if avx512 {
                    gemm::TILE_AVX512_NARROW
                } else {
                    cpu
                },
            ),
        ] {
            assert_eq!(
                gemm::launch::tile_for_cpu(cpu, m, n),
                tile,
                "{cpu:?}: {m}x{n}"
            );
        }
        // Direct output: whole column panels of the tile, whatever the CPU running the test
        // (the AVX-512 run of `plain_matmuls_write_the_output_directly` once expected 48
        // columns to be whole panels of 32).
        let a = rand(&[50, 64], 1);
        for n in [48, 64, 40, 96] {
            let out = a.matmul(&rand(&[64, n], 2));
            let (plan, l) = decide(&out, cpu, &format!("50x64x{n}"));
            assert_eq!(
                (plan.m, plan.n, plan.tile),
                (50, n, tall),
                "{cpu:?}: 50x64x{n}"
            );
            let whole = n % nr == 0;
            assert_eq!(l.direct_rows, whole.then_some(48), "{cpu:?}: 50x64x{n}");
            // ... never with an activation
            let (_, l) = decide(&out.relu(), cpu, "relu");
            assert_eq!(l.direct_rows, None, "{cpu:?}: 50x64x{n} + relu");
        }
        // B packed 4 panels per k where the panel count is a multiple of 4 and K >= 256
        for (n, k, group) in [(4 * nr, 300, 4), (2 * nr, 300, 1), (4 * nr, 100, 1)] {
            let out = rand(&[200, k], 3).matmul(&rand(&[k, n], 4));
            let (plan, l) = decide(&out, cpu, &format!("200x{k}x{n}"));
            assert_eq!((plan.m, plan.n), (200, n), "{cpu:?}: 200x{k}x{n}");
            assert_eq!(l.b_panel_group, group, "{cpu:?}: 200x{k}x{n}");
            assert!(group == 1 || group == PACK_B_PANEL_GROUP);
        }
        // Matmul 1024: AVX2 reads A in place in small row blocks (its rows 4 KiB apart alias in
        // the caches), copying each block first; AVX-512 packs it (contiguous along K), each
        // task its own rows. K blocks: AVX2's wide 1024, AVX-512's 384 evened to 256.
        let sq = rand(&[1024, 1024], 5);
        let (plan, l) = decide(&sq.matmul(&sq), cpu, "matmul 1024");
        if avx512 {
            assert_eq!(l.in_place, None, "{cpu:?}: matmul 1024 reads A in place");
            assert_eq!(l.a, ARoute::PackedPerTask, "{cpu:?}: matmul 1024");
            assert_eq!(
                (plan.kb, plan.n_kb),
                (256, 4),
                "{cpu:?}: matmul 1024 K blocks"
            );
        } else {
            let walk = l.in_place.expect("AVX2: matmul 1024 reads A in place");
            assert!(
                walk.rows_alias && walk.repacked && !walk.streamed,
                "{walk:?}"
            );
            assert_eq!(
                walk.stride, None,
                "only the narrow tile reads along a stride"
            );
            assert_eq!(l.a, ARoute::InPlace);
            assert_eq!(
                (plan.kb, plan.n_kb),
                (1024, 1),
                "{cpu:?}: matmul 1024 K blocks"
            );
        }
        assert_eq!(plan.tile, tall, "{cpu:?}: matmul 1024");
        assert_eq!(
            l.direct_rows,
            Some(1020),
            "{cpu:?}: matmul 1024 (170 panels of 6, 85 of 12)"
        );
        // A batch-1 projection (16 tokens: N = 16): AVX-512 takes the narrow 12x16 tile and
        // reads the weight along its row stride; AVX2 reads it in place, streamed (one column
        // panel).
        let (x, w) = (rand(&[16, 384], 6), rand(&[384, 384], 7));
        let (plan, l) = decide(&x.linear(&w.t(), None), cpu, "projection");
        let walk = l.in_place.expect("a projection's weight is read in place");
        assert_eq!((plan.m, plan.n), (384, 16), "{cpu:?}: projection (M, N)");
        assert!(
            walk.streamed && walk.k_contiguous && !walk.rows_alias,
            "{walk:?}"
        );
        if avx512 {
            assert_eq!(plan.tile, gemm::TILE_AVX512_NARROW);
            assert_eq!(walk.stride, Some(384), "{cpu:?}: projection");
        } else {
            assert_eq!((plan.tile, walk.stride), (gemm::TILE, None));
        }
        // A transposed operand (not contiguous along K) is read in place on every tile; with
        // 8 batches of one K chunk on 2 threads, one task per batch
        let (a, b) = (rand(&[8, 2100, 30], 8), rand(&[8, 2100, 11], 9));
        let (plan, l) = decide(&a.transpose(1, 2).matmul(&b), cpu, "batched");
        assert_eq!(
            (plan.batch, plan.m, plan.n),
            (8, 30, 11),
            "{cpu:?}: batched"
        );
        let walk = l.in_place.expect("a transposed operand is read in place");
        assert!(!walk.k_contiguous && !walk.repacked, "{walk:?}");
        assert_eq!(l.a, ARoute::BatchTasks, "{cpu:?}: batched");
        // ... with 3 batches: in place, batch by batch
        let (a, b) = (rand(&[3, 2100, 30], 8), rand(&[3, 2100, 11], 9));
        let (_, l) = decide(&a.transpose(1, 2).matmul(&b), cpu, "3 batches");
        assert_eq!(l.a, ARoute::InPlace, "{cpu:?}: 3 batches");
        // A product of two inputs cannot be read in place: 517 row panels of 6 (259 of 12),
        // packed per task in blocks of 384 rows; 60 rows: packed in blocks by the packing
        // kernel
        for (m, route) in [(3100, ARoute::PackedPerTask), (60, ARoute::Packed)] {
            let (a, c, b) = (rand(&[m, 20], 10), rand(&[m, 20], 11), rand(&[20, 18], 12));
            let (plan, l) = decide(&(&a * &c).matmul(&b), cpu, "product");
            assert_eq!(
                (plan.m, plan.n, plan.tile),
                (m, 18, tall),
                "{cpu:?}: product"
            );
            assert_eq!(
                (l.a, l.in_place),
                (route, None),
                "{cpu:?}: product of {m} rows"
            );
        }
    }
}
