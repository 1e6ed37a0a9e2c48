//! Optimizers (`crates/tensor/src/nn/optim.rs`) against reference trajectories computed
//! independently (numpy float64, update rules from the papers / PyTorch docs) by
//! `tests/golden/gen_optim.py` into `tests/golden/optim.json`: a least-squares problem
//! `mean((X W^T + b - Y)^2)`, several steps, every parameter after every step, on CPU and REF.
//! Plus tinygrad's defaults, lr changes, bad input.

use serde_json::Value;
use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::{Axis, DType, Tensor};

const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-4;

fn golden() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/optim.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_u64().expect("an int") as usize)
        .collect()
}

fn tensor(p: &Value, key: &str, device: &str) -> Tensor {
    let v: Vec<f32> = floats(&p[key]).iter().map(|&x| x as f32).collect();
    Tensor::from_slice_on(&v, &shape(&p[format!("{key}_shape").as_str()]), device)
}

fn make(cfg: &Value, params: Vec<Tensor>) -> Box<dyn Optimizer> {
    let f = |k: &str| cfg[k].as_f64();
    let lr = f("lr").expect("lr");
    match cfg["opt"].as_str().expect("opt") {
        "sgd" => Box::new(
            optim::sgd(params, lr)
                .momentum(f("momentum").unwrap_or(0.0))
                .weight_decay(f("weight_decay").unwrap_or(0.0))
                .nesterov(cfg["nesterov"].as_bool().unwrap_or(false)),
        ),
        "lars" => Box::new(
            optim::lars(params, lr)
                .momentum(f("momentum").unwrap())
                .weight_decay(f("weight_decay").unwrap())
                .trust_coefficient(f("tcoef").unwrap()),
        ),
        "muon" => Box::new(optim::muon(params, lr).momentum(f("momentum").unwrap())),
        name @ ("adam" | "adamw" | "lamb") => {
            let o = match name {
                "adam" => optim::adam(params, lr),
                "adamw" => optim::adamw(params, lr),
                _ => optim::lamb(params, lr),
            };
            Box::new(
                o.betas(f("b1").unwrap(), f("b2").unwrap())
                    .eps(f("eps").unwrap())
                    .weight_decay(f("weight_decay").unwrap_or(0.0)),
            )
        }
        other => panic!("unknown optimizer {other}"),
    }
}

fn check(got: &[f64], want: &[f64], what: &str) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if (g - w).abs() > ATOL + RTOL * w.abs() {
            return Err(format!("{what}[{i}]: got {g}, want {w}"));
        }
    }
    Ok(())
}

fn run_case(case: &Value, problem: &Value, device: &str) -> Result<(), String> {
    let x = tensor(problem, "X", device);
    let y = tensor(problem, "Y", device);
    let w = tensor(problem, "W0", device);
    let b = tensor(problem, "b0", device);
    let mut opt = make(&case["config"], vec![w.clone(), b.clone()]);
    let _train = Tensor::train(true);
    for (step, (want_loss, want)) in floats(&case["loss"])
        .iter()
        .zip(case["params"].as_array().expect("params"))
        .enumerate()
    {
        opt.zero_grad();
        let r = x.matmul(&w.t()) + &b - &y;
        let loss = (&r * &r).mean(Axis::All);
        loss.backward();
        opt.step_with(&[&loss]);
        let l = f64::from(loss.item::<f32>());
        check(&[l], &[*want_loss], &format!("step {step} loss"))?;
        check(
            &w.to_f64_vec(),
            &floats(&want["W"]),
            &format!("step {step} W"),
        )?;
        check(
            &b.to_f64_vec(),
            &floats(&want["b"]),
            &format!("step {step} b"),
        )?;
    }
    Ok(())
}

fn run_suite(device: &str) {
    let g = golden();
    let problem = &g["problem"];
    let mut failures = vec![];
    let cases = g["cases"].as_array().expect("cases");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        if let Err(e) = run_case(case, problem, device) {
            failures.push(format!("{name} on {device}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} optimizer cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn trajectories_match_reference_cpu() {
    run_suite("CPU");
}

#[test]
fn trajectories_match_reference_ref() {
    run_suite("REF");
}

#[test]
fn defaults_are_tinygrads() {
    let p = || vec![Tensor::ones(&[2], DType::FLOAT32)];
    assert_eq!(optim::sgd(p(), 0.001).lr(), 0.001);
    let mut o = optim::adam(p(), 0.001);
    o.set_lr(0.5);
    assert_eq!(o.lr(), 0.5);
    // one step of each on f(w) = sum(w): gradient 1 everywhere
    let step = |mut opt: Box<dyn Optimizer>| {
        let w = opt.params()[0].clone();
        let _t = Tensor::train(true);
        opt.zero_grad();
        w.sum(Axis::All).backward();
        opt.step();
        w.to_f64_vec()[0]
    };
    // Adam's first step moves by lr (m_hat / sqrt(v_hat) = 1)
    let a = step(Box::new(optim::adam(p(), 0.1)));
    assert!((a - 0.9).abs() < 1e-6, "{a}");
    // AdamW: default weight decay 0.01
    let a = step(Box::new(optim::adamw(p(), 0.1)));
    assert!((a - (1.0 - 0.1 * (1.0 + 0.01))).abs() < 1e-6, "{a}");
    // LARS: default tcoef 0.001, wd 1e-4: r = 0.001*|w|/(|g| + 1e-4|w|), update lr*r*(g + wd*w)
    let a = step(Box::new(optim::lars(p(), 0.1)));
    let n = 2f64.sqrt();
    let r = 0.001 * n / (n + 1e-4 * n);
    assert!((a - (1.0 - 0.1 * r * (1.0 + 1e-4))).abs() < 1e-7, "{a}");
    // SGD: plain
    let a = step(Box::new(optim::sgd(p(), 0.1)));
    assert!((a - 0.9).abs() < 1e-7, "{a}");
}

#[test]
fn changing_lr_needs_no_recompile() {
    let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    let mut opt = optim::sgd(vec![w.clone()], 0.1);
    let _t = Tensor::train(true);
    let step = |opt: &mut dyn Optimizer| {
        opt.zero_grad();
        (&w * &w).sum(Axis::All).backward();
        opt.step();
    };
    step(&mut opt);
    step(&mut opt);
    let before = tinygrad_tensor::compile_count();
    opt.set_lr(0.01);
    step(&mut opt);
    assert_eq!(
        tinygrad_tensor::compile_count(),
        before,
        "lr change recompiled"
    );
    // w <- w - lr * 2w: 0.8, 0.8, 0.98
    let want = [1.0 * 0.8 * 0.8 * 0.98, 2.0 * 0.8 * 0.8 * 0.98];
    let got = w.to_f64_vec();
    assert!(
        (got[0] - want[0]).abs() < 1e-6 && (got[1] - want[1]).abs() < 1e-6,
        "{got:?}"
    );
}

#[test]
fn newton_schulz_orthogonalizes() {
    // many iterations of the cubic (1.5, -0.5) converge to the orthogonal polar factor
    let a = Tensor::from_slice(&[2.0f32, 1.0, 0.5, 1.5, -1.0, 0.3], &[2, 3]);
    let q = a.newton_schulz(30, &[1.5, -0.5], 1e-7);
    let qqt = q.matmul(&q.t()).to_f64_vec();
    let eye = [1.0, 0.0, 0.0, 1.0];
    for (g, w) in qqt.iter().zip(eye) {
        assert!((g - w).abs() < 1e-4, "{qqt:?}");
    }
    // a tall matrix is handled through its transpose
    assert_eq!(
        a.t().newton_schulz(2, &[1.5, -0.5], 1e-7).shape(),
        vec![3, 2]
    );
}

#[test]
#[should_panic(
    expected = "adam: Tensor::training() is false; the optimizer only steps in training mode"
)]
fn step_needs_training_mode() {
    let w = Tensor::from_slice(&[1.0f32], &[1]);
    let mut opt = optim::adam(vec![w.clone()], 0.1);
    let _t = Tensor::train(false);
    w.sum(Axis::All).backward();
    opt.step();
}

#[test]
#[should_panic(
    expected = "sgd: the optimizer needs at least one float parameter to train, got none (1 buffer(s))"
)]
fn optimizer_without_params() {
    let _ = optim::sgd(vec![Tensor::zeros(&[2], DType::INT32)], 0.1);
}

#[test]
#[should_panic(expected = "adam: b1 must be in [0, 1), got 1")]
fn bad_beta() {
    let _ = optim::adam(vec![Tensor::ones(&[2], DType::FLOAT32)], 0.1).betas(1.0, 0.9);
}

#[test]
#[should_panic(expected = "sgd: lr must be a finite number >= 0, got -1")]
fn negative_lr() {
    let _ = optim::sgd(vec![Tensor::ones(&[2], DType::FLOAT32)], -1.0);
}

#[test]
#[should_panic(expected = "sgd: nesterov momentum needs momentum > 0")]
fn nesterov_without_momentum() {
    let w = Tensor::from_slice(&[1.0f32], &[1]);
    let mut opt = optim::sgd(vec![w.clone()], 0.1).nesterov(true);
    let _t = Tensor::train(true);
    w.sum(Axis::All).backward();
    opt.step();
}
