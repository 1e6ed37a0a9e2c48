//! `Jit`: replays equal normal runs bit for bit, and each way tinygrad's `TinyJit` has been
//! seen to replay wrong (outputs aliasing inputs or overwritten by the next replay, buffers
//! reused under a user's tensors across `backward` calls, assignments not realized, inputs that
//! change shape, dtype, device or aliasing, state changed between calls, random numbers frozen)
//! gives the right answer or an error that says what differed.

use std::sync::Mutex;

use tinygrad_tensor::nn::optim::{self, Optimizer};
use tinygrad_tensor::{Axis, DType, Jit, JitError, OnMismatch, Tensor, thread_run_counts};

/// Tests that draw random numbers or make layers (random init) hold this: the random state is
/// global, and a test comparing two sequences of draws must not see another's.
static RNG: Mutex<()> = Mutex::new(());

fn input(k: usize, n: usize) -> Tensor {
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7 + k * 13) % 11) as f32 * 0.25 - 1.0)
        .collect();
    Tensor::from_slice(&v, &[n])
}

fn chain(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    for i in 0..20 {
        y = match i % 5 {
            0 => y + 1.0,
            1 => y * 0.5,
            2 => y.relu(),
            3 => y - 0.25,
            _ => -y,
        };
    }
    y
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().iter().map(|x| x.to_bits()).collect()
}

#[test]
fn replays_launch_the_captured_kernels_without_scheduling_and_equal_normal_runs() {
    let w = input(99, 16);
    let mut jit = Jit::new(|x: &[Tensor]| vec![chain(&(&x[0] * &w)).sum(Axis::All), chain(&x[0])]);
    for k in 0..8 {
        let x = input(k, 16);
        let before = thread_run_counts();
        let out = jit.call(std::slice::from_ref(&x)).unwrap();
        let after = thread_run_counts();
        if k >= 2 {
            assert_eq!(after.0, before.0, "call {k}: a replay runs no schedule");
            assert!(after.1 > before.1, "call {k}: a replay launches kernels");
        } else {
            assert!(after.0 > before.0, "call {k} runs normally");
        }
        let want = [chain(&(&x * &w)).sum(Axis::All), chain(&x)];
        for (o, e) in out.iter().zip(&want) {
            assert_eq!(bits(o), bits(e), "call {k}");
        }
    }
    assert_eq!(jit.replays(), 6);
    assert!(jit.is_captured());
}

#[test]
fn outputs_returned_earlier_keep_their_values_after_later_replays() {
    let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * 2.0]);
    let mut kept = vec![];
    for k in 0..6 {
        kept.push((k, jit.call(&[input(k, 8)]).unwrap().remove(0)));
    }
    for (k, t) in &kept {
        assert_eq!(bits(t), bits(&(input(*k, 8) * 2.0)), "output of call {k}");
    }
}

#[test]
fn an_output_that_is_an_input_or_its_view_follows_the_new_input() {
    let mut jit = Jit::new(|x: &[Tensor]| vec![x[0].clone(), x[0].reshape(&[2, 4]), &x[1] + 1.0]);
    for k in 0..5 {
        let (a, b) = (input(k, 8), input(k + 50, 8));
        let out = jit.call(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(bits(&out[0]), bits(&a), "call {k}");
        assert_eq!(out[1].shape(), vec![2, 4]);
        assert_eq!(bits(&out[1]), bits(&a), "call {k}");
        assert_eq!(bits(&out[2]), bits(&(&b + 1.0)), "call {k}");
    }
}

#[test]
fn state_assigned_and_realized_inside_is_carried_from_replay_to_replay() {
    let count = Tensor::from_slice(&[0.0f32], &[1]);
    let total = Tensor::from_slice(&[0.0f32; 4], &[4]);
    let mut jit = Jit::new(|x: &[Tensor]| {
        count.assign(&(&count + 1.0));
        total.assign(&(&total + &x[0]));
        Tensor::try_realize_all(&[&count, &total]).unwrap();
        vec![&total * &count]
    });
    let mut sum = [0.0f32; 4];
    for k in 0..7 {
        let x = input(k, 4);
        for (s, v) in sum.iter_mut().zip(x.to_vec::<f32>()) {
            *s += v;
        }
        let out = jit.call(&[x]).unwrap();
        let n = (k + 1) as f32;
        assert_eq!(count.to_vec::<f32>(), vec![n], "call {k}");
        assert_eq!(total.to_vec::<f32>(), sum.to_vec(), "call {k}");
        let want: Vec<f32> = sum.iter().map(|s| s * n).collect();
        assert_eq!(out[0].to_vec::<f32>(), want, "call {k}");
    }
    assert_eq!(jit.replays(), 5);
}

#[test]
fn an_assignment_left_unrealized_is_an_error() {
    let state = Tensor::from_slice(&[0.0f32; 4], &[4]);
    let mut jit = Jit::new(|x: &[Tensor]| {
        state.assign(&(&state + &x[0]));
        vec![&x[0] * 2.0]
    });
    let mut err = None;
    for k in 0..3 {
        match jit.call(&[input(k, 4)]) {
            Ok(_) => {}
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    match err {
        Some(JitError::Unreplayable(m)) => assert!(m.contains("did not realize"), "{m}"),
        other => panic!("expected Unreplayable, got {other:?}"),
    }
}

#[test]
fn a_weight_changed_between_calls_is_read_by_the_next_replay() {
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * &w]);
    for k in 0..4 {
        jit.call(&[input(k, 4)]).unwrap();
    }
    assert!(jit.is_captured());
    // eager assignment, lazy assignment, replace: each is what the next call reads
    w.assign(&Tensor::from_slice(&[5.0f32, 6.0, 7.0, 8.0], &[4]))
        .realize();
    let x = input(7, 4);
    assert_eq!(
        bits(&jit.call(std::slice::from_ref(&x)).unwrap()[0]),
        bits(&(&x * &w))
    );
    w.assign(&(&w * 2.0));
    let got = jit.call(std::slice::from_ref(&x)).unwrap().remove(0);
    assert_eq!(w.to_vec::<f32>(), vec![10.0, 12.0, 14.0, 16.0]);
    assert_eq!(bits(&got), bits(&(&x * &w)));
    w.replace(&Tensor::from_slice(&[0.5f32; 4], &[4]));
    assert_eq!(
        bits(&jit.call(std::slice::from_ref(&x)).unwrap()[0]),
        bits(&(&x * 0.5))
    );
    // a weight of another dtype cannot be read by the captured kernels
    w.replace(&Tensor::from_slice(&[1i32, 2, 3, 4], &[4]));
    let e = jit.call(&[x]).unwrap_err();
    assert!(
        matches!(&e, JitError::State(m) if m.contains("int32")),
        "{e}"
    );
}

#[test]
fn inputs_of_another_shape_dtype_or_device_are_errors_or_recaptures() {
    let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] + 1.0]);
    for k in 0..3 {
        jit.call(&[input(k, 4)]).unwrap();
    }
    let shape = jit.call(&[input(0, 5)]).unwrap_err();
    assert!(
        matches!(&shape, JitError::Inputs(m) if m.contains("[5]") && m.contains("[4]")),
        "{shape}"
    );
    let dtype = jit
        .call(&[Tensor::from_slice(&[1i32, 2, 3, 4], &[4])])
        .unwrap_err();
    assert!(
        matches!(&dtype, JitError::Inputs(m) if m.contains("int")),
        "{dtype}"
    );
    let device = jit.call(&[input(0, 4).to("REF")]).unwrap_err();
    assert!(
        matches!(&device, JitError::Inputs(m) if m.contains("REF")),
        "{device}"
    );
    let count = jit.call(&[input(0, 4), input(1, 4)]).unwrap_err();
    assert!(
        matches!(&count, JitError::Inputs(m) if m.contains("2 inputs")),
        "{count}"
    );
    // the capture is kept: matching inputs still replay
    let replays = jit.replays();
    assert_eq!(
        jit.call(&[input(3, 4)]).unwrap()[0].to_vec::<f32>(),
        (input(3, 4) + 1.0).to_vec::<f32>()
    );
    assert_eq!(jit.replays(), replays + 1);

    let mut re = Jit::new(|x: &[Tensor]| vec![&x[0] * 3.0]).on_mismatch(OnMismatch::Recapture);
    for n in [4, 4, 4, 6, 6, 6, 6] {
        let x = input(n, n);
        assert_eq!(
            bits(&re.call(std::slice::from_ref(&x)).unwrap()[0]),
            bits(&(&x * 3.0))
        );
    }
    assert_eq!(
        re.replays(),
        1 + 2,
        "one replay at 4, two at 6 after the re-capture"
    );
}

#[test]
fn inputs_aliased_differently_from_the_capture_are_errors() {
    let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0] * 2.0 + &x[1]]);
    for k in 0..3 {
        jit.call(&[input(k, 4), input(k + 1, 4)]).unwrap();
    }
    let x = input(5, 4);
    let e = jit.call(&[x.clone(), x.clone()]).unwrap_err();
    assert!(
        matches!(&e, JitError::Aliasing(m) if m.contains("input 1")),
        "{e}"
    );
    // captured with one buffer passed twice: distinct buffers would be read as one
    let mut twice = Jit::new(|x: &[Tensor]| vec![&x[0] - &x[1]]);
    for k in 0..3 {
        let x = input(k, 4);
        assert_eq!(
            twice.call(&[x.clone(), x.clone()]).unwrap()[0].to_vec::<f32>(),
            vec![0.0; 4]
        );
    }
    assert!(matches!(
        twice.call(&[input(1, 4), input(2, 4)]),
        Err(JitError::Aliasing(_))
    ));
    // an input that is also a tensor the function reads itself
    let w = input(9, 4);
    let mut both = Jit::new(|x: &[Tensor]| vec![&x[0] * &w]);
    for _ in 0..3 {
        both.call(std::slice::from_ref(&w)).unwrap();
    }
    let e = both.call(&[input(1, 4)]).unwrap_err();
    assert!(
        matches!(&e, JitError::Aliasing(m) if m.contains("reads")),
        "{e}"
    );
}

#[test]
fn a_function_returning_no_tensor_is_an_error() {
    let mut jit = Jit::new(|_x: &[Tensor]| vec![]);
    let mut errs = vec![];
    for k in 0..3 {
        if let Err(e) = jit.call(&[input(k, 4)]) {
            errs.push(e);
        }
    }
    assert!(errs.contains(&JitError::NoOutputs), "{errs:?}");
}

#[test]
fn kernels_that_keep_changing_between_calls_are_an_error() {
    let mut n = 0.0f32;
    let mut jit = Jit::new(|x: &[Tensor]| {
        n += 1.0;
        vec![&x[0] * n] // a new constant each call: a new kernel
    });
    jit.call(&[input(0, 4)]).unwrap();
    jit.call(&[input(1, 4)]).unwrap();
    let e = jit.call(&[input(2, 4)]).unwrap_err();
    assert!(
        matches!(&e, JitError::GraphChanged(m) if m.contains("launch 0")),
        "{e}"
    );
    // a function reading another tensor from call to call (same kernel)
    let (a, b) = (input(1, 4), input(2, 4));
    let mut flip = false;
    let mut jit = Jit::new(|x: &[Tensor]| {
        flip = !flip;
        vec![&x[0] * if flip { &a } else { &b }]
    });
    jit.call(&[input(0, 4)]).unwrap();
    jit.call(&[input(0, 4)]).unwrap();
    let e = jit.call(&[input(0, 4)]).unwrap_err();
    assert!(
        matches!(&e, JitError::GraphChanged(m) if m.contains("role")),
        "{e}"
    );
}

#[test]
fn one_time_work_in_the_first_call_is_not_replayed() {
    // lazy state realized by the first call only (an optimizer's zero moments): the capture
    // waits for two calls that agree
    let state = Tensor::zeros(&[4], DType::FLOAT32).contiguous();
    let mut jit = Jit::new(|x: &[Tensor]| {
        state.assign(&(&state + &x[0]));
        state.realize();
        vec![&state * 1.0]
    });
    let mut sum = vec![0.0f32; 4];
    for k in 0..6 {
        let x = input(k, 4);
        for (s, v) in sum.iter_mut().zip(x.to_vec::<f32>()) {
            *s += v;
        }
        assert_eq!(jit.call(&[x]).unwrap()[0].to_vec::<f32>(), sum, "call {k}");
    }
    assert!(jit.replays() >= 3);
}

#[test]
fn host_data_uploaded_inside_is_an_error() {
    let mut k = 0;
    let mut jit = Jit::new(|x: &[Tensor]| {
        k += 1;
        let v = vec![k as f32; 4];
        vec![&x[0] + &Tensor::from_slice(&v, &[4])]
    });
    let mut err = None;
    for j in 0..3 {
        if let Err(e) = jit.call(&[input(j, 4)]) {
            err = Some(e);
            break;
        }
    }
    match err {
        Some(JitError::Unreplayable(m)) => assert!(m.contains("uploads host data"), "{m}"),
        other => panic!("expected an upload error, got {other:?}"),
    }
}

#[test]
fn constant_uploads_are_replayed_and_changing_ones_are_never_captured() {
    // the same table each call: replayed, and each replay reads the capture's upload
    let mut jit = Jit::new(|x: &[Tensor]| {
        let table: Vec<f32> = (0..x[0].numel()).map(|i| i as f32 * 0.5).collect();
        vec![&x[0] + &Tensor::from_slice(&table, &[table.len()])]
    })
    .constant_uploads(true);
    for k in 0..5 {
        let x = input(k, 4);
        let want: Vec<f32> = x
            .to_vec::<f32>()
            .iter()
            .enumerate()
            .map(|(i, v)| v + i as f32 * 0.5)
            .collect();
        assert_eq!(jit.call(&[x]).unwrap()[0].to_vec::<f32>(), want, "call {k}");
    }
    assert_eq!(jit.replays(), 3);
    // a table that changes from call to call: the calls differ, so nothing is replayed
    let mut k = 0;
    let mut jit = Jit::new(|x: &[Tensor]| {
        k += 1;
        vec![&x[0] + &Tensor::from_slice(&[k as f32; 4], &[4])]
    })
    .constant_uploads(true);
    let mut err = None;
    for j in 0..4 {
        match jit.call(&[input(0, 4)]) {
            Ok(y) => {
                let want: Vec<f32> = input(0, 4)
                    .to_vec::<f32>()
                    .iter()
                    .map(|v| v + (j + 1) as f32)
                    .collect();
                assert_eq!(y[0].to_vec::<f32>(), want, "call {j}");
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert_eq!(jit.replays(), 0);
    match err {
        Some(JitError::GraphChanged(m)) => assert!(m.contains("hashed"), "{m}"),
        other => panic!("expected the calls to differ, got {other:?}"),
    }
}

#[test]
fn random_numbers_inside_are_drawn_anew_on_every_replay_as_without_the_jit() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let f = |x: &Tensor| x * &Tensor::rand(&[8]) + Tensor::rand(&[8]).dropout(0.5);
    Tensor::manual_seed(7);
    let _train = Tensor::train(true);
    let mut jit = Jit::new(|x: &[Tensor]| vec![f(&x[0])]);
    let via_jit: Vec<Vec<u32>> = (0..6)
        .map(|k| bits(&jit.call(&[input(k, 8)]).unwrap()[0]))
        .collect();
    assert_eq!(jit.replays(), 4);
    Tensor::manual_seed(7);
    let plain: Vec<Vec<u32>> = (0..6).map(|k| bits(&f(&input(k, 8)))).collect();
    assert_eq!(via_jit, plain);
    assert_ne!(via_jit[4], via_jit[5], "replays draw new numbers");
}

#[test]
fn a_contiguous_buffer_across_two_backward_calls_is_not_planned_over() {
    // tinygrad's failure: a buffer made by contiguous() inside the function, used by two
    // backward passes, had its memory reused by the planner under a later kernel
    let w = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25], &[4]).requires_grad(true);
    let step = |x: &Tensor| {
        w.set_grad(None);
        let y = (x * &w).contiguous();
        y.sum(Axis::All).backward();
        let g1 = w.grad().unwrap().contiguous();
        g1.realize();
        (&y * &y).sum(Axis::All).backward();
        let g2 = w.grad().unwrap();
        vec![y.exp(), g1, g2 * 1.0]
    };
    let mut jit = Jit::new(|x: &[Tensor]| step(&x[0]));
    for k in 0..6 {
        let x = input(k, 4);
        let got = jit.call(std::slice::from_ref(&x)).unwrap();
        let want = step(&x);
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            assert_eq!(bits(g), bits(e), "call {k}, output {i}");
        }
    }
    assert!(jit.replays() >= 3);
}

/// A small training step on the public API: linear layers, Adam, cross entropy.
fn train_losses(jit: bool, steps: usize) -> (Vec<u32>, Vec<Vec<u32>>) {
    use tinygrad_tensor::Reduction;
    use tinygrad_tensor::nn::{Linear, Module, get_parameters};
    struct Net {
        l1: Linear,
        l2: Linear,
    }
    tinygrad_tensor::impl_parameters!(Net { l1, l2 });
    Tensor::manual_seed(3);
    let net = Net {
        l1: Linear::new(6, 16),
        l2: Linear::new(16, 3),
    };
    let mut opt = optim::adam(get_parameters(&net), 0.01);
    let mut step = |x: &Tensor, y: &Tensor| {
        let _t = Tensor::train(true);
        opt.zero_grad();
        let loss = net
            .l2
            .forward(&net.l1.forward(x).relu())
            .sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
        loss.backward();
        opt.step_with(&[&loss]);
        loss
    };
    let batch = |k: usize| {
        let x: Vec<f32> = (0..24)
            .map(|i| ((i * 5 + k * 3) % 7) as f32 * 0.3 - 1.0)
            .collect();
        let y: Vec<i32> = (0..4).map(|i| ((i + k) % 3) as i32).collect();
        (
            Tensor::from_slice(&x, &[4, 6]),
            Tensor::from_slice(&y, &[4]),
        )
    };
    let mut losses = vec![];
    if jit {
        let mut j = Jit::new(|io: &[Tensor]| vec![step(&io[0], &io[1])]);
        for k in 0..steps {
            let (x, y) = batch(k);
            losses.push(j.call(&[x, y]).unwrap()[0].item::<f32>().to_bits());
        }
        assert_eq!(
            j.replays(),
            steps - 3,
            "Adam's lazy moments: captured at the third call"
        );
    } else {
        for k in 0..steps {
            let (x, y) = batch(k);
            losses.push(step(&x, &y).item::<f32>().to_bits());
        }
    }
    let params = get_parameters(&net).iter().map(bits).collect();
    (losses, params)
}

#[test]
fn a_training_step_through_the_jit_equals_the_plain_step_bit_for_bit() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let plain = train_losses(false, 8);
    let jitted = train_losses(true, 8);
    assert_eq!(jitted.0, plain.0, "losses");
    assert_eq!(jitted.1, plain.1, "parameters after the last step");
    assert!(plain.0.windows(2).any(|w| w[0] != w[1]), "the loss moves");
}

#[test]
fn check_mode_reruns_each_replay_without_the_jit() {
    let state = Tensor::from_slice(&[1.0f32; 4], &[4]);
    let mut jit = Jit::new(|x: &[Tensor]| {
        state.assign(&(&state * &x[0] + 1.0));
        state.realize();
        vec![state.sum(Axis::All)]
    })
    .check_replays(true);
    let mut want = vec![1.0f32; 4];
    for k in 0..6 {
        let x = input(k, 4);
        for (s, v) in want.iter_mut().zip(x.to_vec::<f32>()) {
            *s = *s * v + 1.0;
        }
        jit.call(&[x]).unwrap();
        // the check ran the step twice from the same state, and kept one result
        assert_eq!(state.to_vec::<f32>(), want, "call {k}");
    }
    assert_eq!(jit.replays(), 4);
}

#[test]
fn an_empty_tensor_inside_is_replayed_not_refused() {
    // found by the differential proptest: an empty shrink made a zero-byte "upload"
    let mut jit = Jit::new(|x: &[Tensor]| vec![&x[0].shrink(&[(1, 1)]) * 2.0, &x[0] + 1.0]);
    for k in 0..4 {
        let x = input(k, 4);
        let out = jit.call(std::slice::from_ref(&x)).unwrap();
        assert_eq!(out[0].shape(), vec![0]);
        assert_eq!(bits(&out[1]), bits(&(&x + 1.0)), "call {k}");
    }
    assert_eq!(jit.replays(), 2);
}

#[test]
fn a_function_copying_between_devices_replays_its_copies() {
    let w = Tensor::from_slice(&[1.0f32, -2.0, 3.0, 0.5], &[4]).to("REF");
    let mut jit = Jit::new(|x: &[Tensor]| {
        let on_ref = x[0].to("REF") * &w + 1.0;
        vec![on_ref.to("CPU").relu(), on_ref]
    });
    for k in 0..5 {
        let x = input(k, 4);
        let out = jit.call(std::slice::from_ref(&x)).unwrap();
        assert_eq!(out[0].device(), "CPU");
        assert_eq!(out[1].device(), "REF");
        let want = (x.to("REF") * &w + 1.0).to_vec::<f32>();
        assert_eq!(out[1].to_vec::<f32>(), want, "call {k}");
        let relu: Vec<f32> = want.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(out[0].to_vec::<f32>(), relu, "call {k}");
    }
    assert_eq!(jit.replays(), 3);
}

#[test]
fn inputs_kept_alive_by_the_caller_and_assigned_inputs_replay_right() {
    // the caller holds every input it passed (earlier ones must not be taken for tensors the
    // function reads), and the function assigns to its input (the caller's tensor of this call
    // takes the value, earlier calls' inputs keep theirs)
    let mut jit = Jit::new(|x: &[Tensor]| {
        x[0].assign(&(&x[0] * 2.0));
        x[0].realize();
        vec![&x[0] + 1.0]
    });
    let mut kept = vec![];
    for k in 0..6 {
        let x = input(k, 4);
        let before = x.to_vec::<f32>();
        let out = jit.call(std::slice::from_ref(&x)).unwrap();
        let doubled: Vec<f32> = before.iter().map(|v| v * 2.0).collect();
        assert_eq!(
            x.to_vec::<f32>(),
            doubled,
            "call {k}: the input was assigned"
        );
        let plus: Vec<f32> = doubled.iter().map(|v| v + 1.0).collect();
        assert_eq!(out[0].to_vec::<f32>(), plus, "call {k}");
        kept.push((x, doubled));
    }
    assert_eq!(jit.replays(), 4);
    for (k, (x, want)) in kept.iter().enumerate() {
        assert_eq!(&x.to_vec::<f32>(), want, "input of call {k} kept its value");
    }
}
