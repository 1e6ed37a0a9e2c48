//! `WEBGPU` rows of `cargo xtask bench`.
//!
//! - `webgpu_add`, `webgpu_matmul`: `a+b` on 1M f32 and a 256x256x256 matmul with their inputs
//!   on the device, vs the same on the `CPU` device.
//! - `webgpu_chain`, `webgpu_chain256`, `webgpu_mnist`: what keeping buffers on the device
//!   saves. A chain of 20 kernels on 64x64 and 256x256 f32 (each step its own kernel, reading
//!   the input and the previous step; the result read back), and a beautiful_mnist training
//!   step (batch 8, 4 with `--quick`; Adam; the loss read back), each run in two child
//!   processes of this run: one with
//!   buffers on the device, one with `WEBGPU_HOST_BUFFERS=1` (buffers in host memory, every
//!   launch uploading its buffers and reading its output back: the design before). The row is
//!   the device-resident median, the reference the host-buffer one; the note gives the bytes
//!   each moved between host and device per run (the runtime's transfer counters) and checks
//!   that both computed the same values.

use super::*;

use std::process::Command;

use tinygrad_tensor::{TransferStats, thread_transfer_stats, with_default_device};

/// The `WEBGPU` device's adapter, e.g. `llvmpipe (LLVM 15.0.6, 256 bits), Cpu`, or why there
/// is none.
fn webgpu_adapter() -> Result<String, String> {
    let d = tinygrad_runtime::webgpu::device().map_err(|e| e.to_string())?;
    let info = d.adapter_info();
    Ok(format!("{}, {:?}", info.name, info.device_type))
}

/// `a+b` on 1M f32 (`matmul`: a 256x256x256 matmul) on `WEBGPU`, inputs on the device and the
/// result left there, vs the same on this build's `CPU` device. The note names the adapter: on a
/// machine without a GPU that is the software driver (llvmpipe).
pub(super) fn bench_webgpu(matmul: bool, o: &Opts) -> Option<Row> {
    let adapter = match webgpu_adapter() {
        Ok(a) => a,
        Err(e) => {
            println!("(webgpu row skipped: {e})");
            return None;
        }
    };
    let n = if matmul { 256 } else { 1 << 20 };
    let shape: &[usize] = if matmul { &[n, n] } else { &[n] };
    let elems: usize = shape.iter().product();
    let (av, bv) = (rand_vec(elems, 10), rand_vec(elems, 11));
    let on = |dev: &str| {
        let a = Tensor::from_slice_on(&av, shape, dev);
        let b = Tensor::from_slice_on(&bv, shape, dev);
        a.realize();
        b.realize();
        (a, b)
    };
    let op = |a: &Tensor, b: &Tensor| if matmul { a.matmul(b) } else { a + b };
    let (ga, gb) = on("WEBGPU");
    let (ca, cb) = on("CPU");
    let (got, want) = (op(&ga, &gb).to_vec::<f32>(), op(&ca, &cb).to_vec::<f32>());
    let runs = reps(o.quick, 11);
    let time = |a: &Tensor, b: &Tensor, secs: u64| {
        median_time(3, runs, budget(o.quick, secs), || {
            let r = op(a, b);
            r.realize();
            black_box(&r);
        })
    };
    let ours = time(&ga, &gb, 10);
    let cpu = time(&ca, &cb, 5);
    let (name, unit) = if matmul {
        (
            format!("WEBGPU matmul {n}x{n}x{n} f32"),
            Unit::Gflops(2.0 * (n as f64).powi(3)),
        )
    } else {
        (
            format!("WEBGPU a+b {}M f32", n >> 20),
            Unit::Gbs(3.0 * 4.0 * n as f64),
        )
    };
    Some(Row {
        name,
        secs: ours,
        unit,
        refs: vec![Reference::timed(
            "tinygrad-rs CPU",
            cpu,
            unit,
            max_rel_err(&got, &want) < 1e-5,
        )],
        note: format!("adapter: {adapter}; inputs and result on the device"),
    })
}

/// The batch of the `WEBGPU` mnist row: small, since on a machine without a GPU the software
/// driver runs the step's kernels about 100x slower than the CPU device (a step at batch 32
/// took 17 s).
fn mnist_batch(quick: bool) -> usize {
    if quick { 4 } else { 8 }
}

/// A job timed in a child process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Job {
    /// The chain of 20 kernels on a square of this side.
    Chain(usize),
    /// A beautiful_mnist training step.
    Mnist,
}

impl Job {
    fn key(self) -> String {
        match self {
            Job::Chain(side) => format!("chain{side}"),
            Job::Mnist => "mnist".into(),
        }
    }
}

/// What a child measured: median seconds per run, host<->device bytes per run, a checksum of
/// the values computed.
struct Measured {
    secs: f64,
    bytes: u64,
    /// The largest relative error against the same job on `CPU` (0 where not checked).
    err: f64,
    values: Vec<f32>,
}

impl Measured {
    /// One line on stdout: `measured SECS BYTES ERR HASH V...` (a few of the values).
    fn line(&self) -> String {
        let hash = self.values.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, v| {
            (h ^ u64::from(v.to_bits())).wrapping_mul(0x100_0000_01b3)
        });
        let shown: Vec<String> = self.values.iter().take(8).map(|v| v.to_string()).collect();
        format!(
            "measured {} {} {} {hash:016x} {}",
            self.secs,
            self.bytes,
            self.err,
            shown.join(" ")
        )
    }

    /// Parses [`Measured::line`]: (secs, bytes, err, hash, shown values).
    fn parse(line: &str) -> Option<(f64, u64, f64, String, String)> {
        let rest = line.strip_prefix("measured ")?;
        let mut it = rest.splitn(5, ' ');
        Some((
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
            it.next()?.to_string(),
            it.next().unwrap_or("").to_string(),
        ))
    }
}

/// The child side: `xtask __device-job KEY [--quick]` measures the job on `WEBGPU` and prints
/// [`Measured::line`].
pub fn child(args: &[String]) -> Result<(), String> {
    let key = args.first().map(String::as_str).unwrap_or("");
    let job = match key.strip_prefix("chain").map(str::parse::<usize>) {
        Some(Ok(side)) if side > 0 => Job::Chain(side),
        _ if key == "mnist" => Job::Mnist,
        _ => return Err(format!("unknown device job {key:?}")),
    };
    let quick = args.iter().any(|a| a == "--quick");
    webgpu_adapter()?;
    println!("{}", measure(job, quick).line());
    Ok(())
}

/// `job` timed in a child process of this executable, buffers in host memory or not.
fn in_child(
    job: Job,
    host_buffers: bool,
    quick: bool,
) -> Result<(f64, u64, f64, String, String), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["__device-job", &job.key()]);
    if quick {
        cmd.arg("--quick");
    }
    cmd.env("WEBGPU_HOST_BUFFERS", if host_buffers { "1" } else { "0" });
    let out = cmd
        .output()
        .map_err(|e| format!("running the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().find_map(Measured::parse).ok_or_else(|| {
        format!(
            "the child measured nothing (exit {}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
    })
}

/// The `webgpu_chain` and `webgpu_mnist` rows: `job` with buffers on the device, vs the same
/// with `WEBGPU_HOST_BUFFERS=1`, each in its own child process.
pub(super) fn bench_resident(job: Job, o: &Opts) -> Option<Row> {
    let adapter = match webgpu_adapter() {
        Ok(a) => a,
        Err(e) => {
            println!("(webgpu row skipped: {e})");
            return None;
        }
    };
    let name = match job {
        Job::Chain(side) => format!("WEBGPU 20-kernel chain {side}x{side} f32, read back"),
        Job::Mnist => format!(
            "WEBGPU beautiful_mnist train step, bs {}",
            mnist_batch(o.quick)
        ),
    };
    let after = in_child(job, false, o.quick);
    let before = in_child(job, true, o.quick);
    let (secs, bytes, err, hash, shown) = match after {
        Ok(m) => m,
        Err(e) => {
            return Some(Row {
                name,
                secs: f64::NAN,
                unit: Unit::Ms,
                refs: vec![],
                note: format!("FAILED: {e}"),
            });
        }
    };
    let mut note = format!("adapter: {adapter}; {} host<->device bytes per run", bytes);
    if matches!(job, Job::Chain(_)) {
        let checked = check(err < 1e-4, "vs CPU");
        if !checked.is_empty() {
            note = format!("{checked}; {note}");
        }
    } else {
        note = format!("{note}; losses {shown}");
    }
    let refs = match before {
        Ok((b_secs, b_bytes, _, b_hash, _)) => {
            note = format!("{note}, {b_bytes} with host buffers");
            vec![Reference::timed(
                "WEBGPU_HOST_BUFFERS=1",
                b_secs,
                Unit::Ms,
                b_hash == hash,
            )]
        }
        Err(e) => vec![Reference {
            name: "WEBGPU_HOST_BUFFERS=1".into(),
            measured: None,
            note: e,
        }],
    };
    Some(Row {
        name,
        secs,
        unit: Unit::Ms,
        refs,
        note,
    })
}

/// The chain: 20 kernels, each reading the input and the previous step.
fn chain20(x: &Tensor) -> Tensor {
    let mut h = x.clone();
    for i in 0..20 {
        let step = match i % 4 {
            0 => (&h * 1.5 + 0.25).relu(),
            1 => (&h - x).abs().sqrt(),
            2 => &h * &h + x,
            _ => (&h + 1.0).log() - (x * 0.5),
        };
        h = step.contiguous();
    }
    h
}

/// Runs `job` on `WEBGPU` in this process (the child's side).
fn measure(job: Job, quick: bool) -> Measured {
    let per_run = |before: TransferStats, runs: usize| {
        thread_transfer_stats().since(&before).host_device_bytes() / runs.max(1) as u64
    };
    with_default_device("WEBGPU", || match job {
        Job::Chain(side) => {
            let xv: Vec<f32> = rand_vec(side * side, 21).iter().map(|v| v.abs()).collect();
            let x = Tensor::from_slice(&xv, &[side, side]);
            x.realize();
            let values = chain20(&x).to_vec::<f32>();
            let want = chain20(&Tensor::from_slice_on(&xv, &[side, side], "CPU")).to_vec::<f32>();
            let runs = reps(quick, 15);
            let before = thread_transfer_stats();
            let mut done = 0;
            let secs = median_time(3, runs, budget(quick, 10), || {
                done += 1;
                black_box(chain20(&x).to_vec::<f32>());
            });
            Measured {
                secs,
                bytes: per_run(before, done),
                err: max_rel_err(&values, &want),
                values,
            }
        }
        Job::Mnist => {
            let bs = mnist_batch(quick);
            Tensor::manual_seed(42);
            let model = models::MnistModel::new();
            let mut opt = optim::adam(get_parameters(&model), 1e-3);
            let xv: Vec<f32> = rand_vec(bs * 784, 100)
                .iter()
                .map(|v| (v + 1.0) / 2.0)
                .collect();
            let yv: Vec<i32> = rand_vec(bs, 200)
                .iter()
                .map(|v| (((v + 1.0) * 5.0) as i32).clamp(0, 9))
                .collect();
            let x = Tensor::from_slice(&xv, &[bs, 1, 28, 28]);
            let y = Tensor::from_slice(&yv, &[bs]);
            let mut step = || -> f32 {
                let _train = Tensor::train(true);
                opt.zero_grad();
                let loss =
                    model
                        .forward(&x)
                        .sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
                loss.backward();
                opt.step_with(&[&loss]);
                loss.item::<f32>()
            };
            // warm-up: compiles, creates the optimizer state, then the steady graph once
            let mut values = vec![step(), step()];
            let runs = if quick { 1 } else { 3 };
            let before = thread_transfer_stats();
            let mut times = vec![];
            for _ in 0..runs {
                let t0 = Instant::now();
                values.push(step());
                times.push(t0.elapsed().as_secs_f64());
            }
            Measured {
                secs: median(times),
                bytes: per_run(before, runs),
                err: 0.0,
                values,
            }
        }
    })
}
