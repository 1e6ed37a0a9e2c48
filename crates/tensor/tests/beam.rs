//! BEAM search (`BEAM=n`): kernels built with the opts it finds give the same results as REF,
//! winners are cached on disk and reused, and a corrupt cache entry or writers racing on one
//! entry never break anything. BEAM's settings are per process, so one test drives them in
//! order.

use std::path::PathBuf;

use tinygrad_codegen::opt::KernelOpts;
use tinygrad_runtime::beam;
use tinygrad_tensor::{Tensor, beam_stats, set_beam, set_beam_cache_dir};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tinygrad-beam-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A reduce kernel (with an elementwise prologue) and an elementwise one.
fn work(dev: &str) -> (Vec<f32>, Vec<f32>) {
    let data: Vec<f32> = (0..48 * 37)
        .map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let x = Tensor::from_slice_on(&data, &[48, 37], dev);
    let r = (&x * 2.0 + 1.0).exp().sum(1isize).to_vec::<f32>();
    let e = (&x * &x - 0.5).relu().to_vec::<f32>();
    (r, e)
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 + 1e-4 * y.abs())
}

fn entries(dir: &PathBuf) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "beam"));
    v
}

#[test]
fn beam_search_results_cache_and_corrupt_entries() {
    let dir = temp_dir("search");
    set_beam_cache_dir(Some(dir.clone()));
    let want = work("REF");

    // a search per new kernel; the results match REF; the winners are on disk
    set_beam(Some(2));
    let (s0, h0) = beam_stats();
    let got = work("CPU");
    let (s1, h1) = beam_stats();
    assert!(
        close(&got.0, &want.0) && close(&got.1, &want.1),
        "BEAM kernels differ from REF"
    );
    assert!(s1 >= s0 + 2, "expected a search per kernel ({s0} -> {s1})");
    assert_eq!(h1, h0, "nothing cached yet");
    let files = entries(&dir);
    assert!(files.len() >= 2, "{files:?}");

    // another width is another compiled kernel, but the disk entries answer: no new search
    set_beam(Some(3));
    let got = work("CPU");
    let (s2, h2) = beam_stats();
    assert!(close(&got.0, &want.0) && close(&got.1, &want.1));
    assert_eq!(s2, s1, "the cache should have answered");
    assert!(h2 >= h1 + 2);

    // corrupt entries are ignored (with a warning) and replaced by a new search
    for f in &files {
        std::fs::write(f, b"\xff\x00 not a beam entry").expect("corrupt an entry");
    }
    set_beam(Some(4));
    let got = work("CPU");
    let (s3, _) = beam_stats();
    assert!(close(&got.0, &want.0) && close(&got.1, &want.1));
    assert!(s3 >= s2 + 2, "corrupt entries must be searched again");
    for f in &files {
        let text = std::fs::read_to_string(f).expect("rewritten entry");
        assert!(
            text.starts_with("tinygrad-rs beam 1\n"),
            "{f:?} not rewritten: {text:?}"
        );
    }

    // off again: the heuristic, same results
    set_beam(Some(0));
    let got = work("CPU");
    assert!(close(&got.0, &want.0) && close(&got.1, &want.1));
    set_beam(None);
    set_beam_cache_dir(None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writers racing on one entry (as processes sharing the cache directory would): a reader
/// sees the whole entry every time, never a torn one.
#[test]
fn concurrent_writers_never_leave_a_partial_entry() {
    let dir = temp_dir("race");
    let ast = "SINK\n  STORE ...\n".repeat(200);
    let a = KernelOpts::parse("s1:4x2:v s0:4").expect("opts");
    let b = KernelOpts::parse("s0:8 o1,0").expect("opts");
    beam::store(&dir, "CPU", &ast, &a);
    std::thread::scope(|s| {
        for w in 0..4 {
            let (dir, ast, a, b) = (&dir, &ast, &a, &b);
            s.spawn(move || {
                for i in 0..200 {
                    beam::store(dir, "CPU", ast, if (i + w) % 2 == 0 { a } else { b });
                }
            });
        }
        for _ in 0..400 {
            let got = beam::load(&dir, "CPU", &ast).expect("a whole entry every time");
            assert!(got == a || got == b, "{got}");
        }
    });
    assert_eq!(
        std::fs::read_dir(&dir).expect("dir").count(),
        1,
        "temporary files left"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
