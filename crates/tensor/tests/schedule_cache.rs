//! The schedule cache: a graph built again with the same structure — on the same or other input
//! buffers of the same sizes — reuses its schedule (with fresh output buffers, reading the
//! inputs it is given), and anything else — other constants, other sizes — is scheduled anew. (Its own test binary: the hit counter is process-wide, and the
//! tests take a lock so they don't count each other's hits.)

use std::sync::Mutex;

use tinygrad_tensor::{Axis, Tensor, schedule_cache_hits};

static SERIAL: Mutex<()> = Mutex::new(());

fn chain(x: &Tensor, c: f64) -> Tensor {
    let y = (x * 0.5 + c).relu();
    (&y * &y).sum(Axis::Some(vec![1])) - 1.0
}

fn expect(xv: &[f32], c: f32) -> Vec<f32> {
    xv.chunks(3)
        .map(|r| {
            r.iter()
                .map(|&v| (v * 0.5 + c).max(0.0).powi(2))
                .sum::<f32>()
                - 1.0
        })
        .collect()
}

#[test]
fn same_graph_again_hits_and_computes_into_fresh_buffers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let xv = [1.0f32, -2.0, 3.0, 4.0, 0.5, -6.0];
    let x = Tensor::from_slice(&xv, &[2, 3]);
    let first = chain(&x, 1.0);
    let before = schedule_cache_hits();
    assert_eq!(first.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(
        schedule_cache_hits(),
        before,
        "the first schedule is a miss"
    );
    // the first graph is gone (realized into a buffer); an equal one is built from scratch
    let second = chain(&x, 1.0);
    assert_eq!(second.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(
        schedule_cache_hits(),
        before + 1,
        "same structure and inputs: a hit"
    );
    // both results live in their own buffers
    let third = chain(&x, 1.0);
    third.realize();
    assert_eq!(first.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(third.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(schedule_cache_hits(), before + 2);
}

#[test]
fn other_input_buffers_hit_other_constants_miss() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let xv = [0.5f32, 1.5, -2.5, 3.5, -4.5, 5.5];
    let x = Tensor::from_slice(&xv, &[2, 3]);
    chain(&x, 2.0).realize();
    let before = schedule_cache_hits();
    // another input buffer with the same shape: a hit, computing from the new input
    let zv = [2.0f32, 2.0, 2.0, -1.0, -1.0, -1.0];
    let z = Tensor::from_slice(&zv, &[2, 3]);
    assert_eq!(chain(&z, 2.0).to_vec::<f32>(), expect(&zv, 2.0));
    assert_eq!(
        schedule_cache_hits(),
        before + 1,
        "same structure on another buffer: a hit"
    );
    // one buffer in both places is another graph than two buffers: a miss, right values
    let y = &x * 0.5 + &z;
    let yy = &x * 0.5 + &x;
    assert_eq!(
        y.to_vec::<f32>(),
        xv.iter()
            .zip(&zv)
            .map(|(a, b)| a * 0.5 + b)
            .collect::<Vec<_>>()
    );
    let hits = schedule_cache_hits();
    assert_eq!(
        yy.to_vec::<f32>(),
        xv.iter().map(|a| a * 0.5 + a).collect::<Vec<_>>()
    );
    assert_eq!(schedule_cache_hits(), hits, "an aliased input must not hit");
    // another constant, another size: misses
    let hits = schedule_cache_hits();
    assert_eq!(chain(&x, 3.0).to_vec::<f32>(), expect(&xv, 3.0));
    let wv = [1.0f32, 2.0, 3.0];
    let w = Tensor::from_slice(&wv, &[1, 3]);
    assert_eq!(chain(&w, 2.0).to_vec::<f32>(), expect(&wv, 2.0));
    assert_eq!(schedule_cache_hits(), hits, "different graphs must not hit");
}

#[test]
fn a_hit_reads_the_inputs_current_contents() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // a parameter updated in place keeps its buffer: the same graph, new values
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    w.realize();
    let out = |w: &Tensor| (w * 2.0 + 1.0).to_vec::<f32>();
    assert_eq!(out(&w), vec![3.0, 5.0, 7.0]);
    w.assign(&(&w + 10.0)).realize();
    let before = schedule_cache_hits();
    assert_eq!(out(&w), vec![23.0, 25.0, 27.0]);
    assert_eq!(out(&w), vec![23.0, 25.0, 27.0]);
    assert!(
        schedule_cache_hits() > before,
        "the repeated graph must hit"
    );
}
