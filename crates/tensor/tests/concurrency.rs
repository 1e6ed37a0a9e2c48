//! Several threads building, realizing, assigning and reading shared tensors: the results equal
//! the single-threaded ones, and no update is lost.

use std::sync::{Arc, Barrier};

use tinygrad_tensor::Tensor;

const ROUNDS: usize = 10;

/// One writer increments `t` by assignment N times while readers read it: the reads only ever
/// see values the writer produced (in increasing order), and the final value has every update.
#[test]
fn assign_and_read_race_loses_no_update() {
    for _ in 0..ROUNDS {
        let n = 300;
        let t = Tensor::from_vec(vec![0.0f32; 4]);
        let barrier = Arc::new(Barrier::new(3));
        let writer = {
            let (t, b) = (t.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                for _ in 0..n {
                    t.assign(&(&t + 1.0));
                    t.realize();
                }
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (t, b) = (t.clone(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    let mut last = 0.0f32;
                    for _ in 0..n {
                        let v = t.to_vec::<f32>();
                        assert!(v.iter().all(|&x| x == v[0]), "a torn read: {v:?}");
                        assert!(v[0] >= last, "went back from {last} to {}", v[0]);
                        assert!(v[0] <= n as f32 && v[0].fract() == 0.0, "{v:?}");
                        last = v[0];
                    }
                })
            })
            .collect();
        writer.join().expect("writer");
        for r in readers {
            r.join().expect("reader");
        }
        assert_eq!(t.to_vec::<f32>(), vec![n as f32; 4]);
    }
}

/// Threads build and realize overlapping graphs over shared inputs: each thread's results equal
/// the single-threaded results.
#[test]
fn concurrent_schedules_match_the_single_threaded_results() {
    let a = Tensor::from_slice(
        &(0..64).map(|i| i as f32 * 0.25 - 3.0).collect::<Vec<_>>(),
        &[8, 8],
    );
    let b = Tensor::from_slice(
        &(0..64).map(|i| (i % 7) as f32 - 2.0).collect::<Vec<_>>(),
        &[8, 8],
    );
    let work = |a: &Tensor, b: &Tensor, k: usize| -> Vec<f32> {
        let x = (a * (k as f64 + 1.0) + b).relu();
        let y = x.matmul(&b.t()).sum(1isize) + a.max(0isize).sum(None);
        let z = (&y - y.mean(None)).mul(0.01).softmax(0);
        z.to_vec::<f32>()
    };
    let expected: Vec<Vec<f32>> = (0..4).map(|k| work(&a, &b, k)).collect();
    for _ in 0..ROUNDS {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let (a, b) = (a.clone(), b.clone());
                std::thread::spawn(move || work(&a, &b, k))
            })
            .collect();
        for (k, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().expect("worker"), expected[k], "thread {k}");
        }
    }
}

/// Several threads assign to their own tensors derived from one shared parameter and realize
/// them together with reads of the shared one.
#[test]
fn concurrent_assigns_to_distinct_tensors() {
    for _ in 0..ROUNDS {
        let shared = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]);
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let own = shared.deep_clone();
                    for _ in 0..50 {
                        own.assign(&(&own + (k as f64)));
                        Tensor::try_realize_all(&[&own, &shared]).expect("realize");
                    }
                    own.to_vec::<f32>()
                })
            })
            .collect();
        for (k, h) in handles.into_iter().enumerate() {
            let got = h.join().expect("worker");
            let want: Vec<f32> = [1.0f32, 2.0, 3.0]
                .iter()
                .map(|x| x + 50.0 * k as f32)
                .collect();
            assert_eq!(got, want, "thread {k}");
        }
        assert_eq!(shared.to_vec::<f32>(), vec![1.0, 2.0, 3.0]);
    }
}
