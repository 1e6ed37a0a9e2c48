//! Real architectures run end to end and compared with onnxruntime's outputs:
//!
//! - two miniatures kept in `tests/data` (`data/gen_models.py`: a ResNet stem and basic block,
//!   a BERT encoder layer with a padding mask and exporter-style shape arithmetic), within 1e-4;
//! - the full-size ResNet-50 and a MiniLM-sized BERT encoder (`scripts/gen_full_models.py`:
//!   25.6M and 22.7M random parameters from fixed seeds), regenerated into `ONNX_FULL_DIR`
//!   (CI does, with numpy and onnx only) and checked against onnxruntime's outputs stored in
//!   `tests/data/full/`, also within 1e-4 (absolute). Without the folder the
//!   two tests skip with a message, unless `TINYGRAD_REQUIRE_ONNX_FULL=1`.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::{max_error, pb_at};
use tinygrad_onnx::OnnxModel;
use tinygrad_tensor::{DType, Tensor};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn pb(name: &str) -> Tensor {
    pb_at(&data(name))
}

fn check(model_name: &str, inputs: usize) {
    let model = OnnxModel::load(data(&format!("{model_name}.onnx"))).expect("loads");
    let feeds: HashMap<String, Tensor> = model
        .inputs()
        .iter()
        .take(inputs)
        .enumerate()
        .map(|(k, info)| (info.name.clone(), pb(&format!("{model_name}_input_{k}.pb"))))
        .collect();
    // runs 1-3 fold, warm up and capture; run 4 replays: each is compared
    for run in 1..=4 {
        let outs = model.run(&feeds).expect("runs");
        for (k, info) in model.outputs().iter().enumerate() {
            let want = pb(&format!("{model_name}_output_{k}.pb"));
            let got = &outs[&info.name];
            assert_eq!(
                got.shape(),
                want.shape(),
                "{model_name}: output {}",
                info.name
            );
            let (err, _) = max_error(got, &want);
            println!(
                "{model_name} run {run}: output {} max abs error {err:.2e} vs onnxruntime",
                info.name
            );
            assert!(
                err < 1e-4,
                "{model_name} run {run}: output {}: max abs error {err}",
                info.name
            );
        }
    }
    assert_eq!(model.replays(), 1, "{:?}", model.not_replayed());
}

#[test]
fn resnet_block_matches_onnxruntime() {
    check("resnet_tiny", 1);
}

#[test]
fn bert_layer_matches_onnxruntime() {
    check("bert_tiny", 2);
}

/// Where `gen_full_models.py` wrote the full-size models, or `None` (with the reason printed)
/// when the test should skip.
fn full_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("ONNX_FULL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/onnx-full"));
    if dir.join("resnet50.onnx").exists() && dir.join("bert.onnx").exists() {
        return Some(dir);
    }
    let why = format!(
        "no full-size models in {} (python3 crates/onnx/scripts/gen_full_models.py {0}, with \
         pip install onnx numpy; or set ONNX_FULL_DIR)",
        dir.display()
    );
    if std::env::var_os("TINYGRAD_REQUIRE_ONNX_FULL").is_some_and(|v| v == "1") {
        panic!("TINYGRAD_REQUIRE_ONNX_FULL=1 but {why}");
    }
    println!("skipped: {why}");
    None
}

/// Runs `dir/NAME.onnx` on `dir/NAME_input_K.pb` and compares every output with onnxruntime's
/// `tests/data/full/NAME_output_K.pb`: every value within 1e-4 (absolute; the relative error
/// is printed too).
fn check_full(dir: &Path, name: &str) {
    let model = OnnxModel::load(dir.join(format!("{name}.onnx"))).expect("loads");
    let feeds: HashMap<String, Tensor> = model
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, info)| {
            let t = pb_at(&dir.join(format!("{name}_input_{k}.pb")));
            (info.name.clone(), t)
        })
        .collect();
    // runs 1-3 fold, warm up and capture; run 4 replays: each is compared
    for run in 1..=4 {
        let outs = model.run(&feeds).expect("runs");
        for (k, info) in model.outputs().iter().enumerate() {
            let want = pb(&format!("full/{name}_output_{k}.pb"));
            let got = &outs[&info.name];
            assert_eq!(got.shape(), want.shape(), "{name}: output {}", info.name);
            let (err, scale) = max_error(got, &want);
            println!(
                "{name} run {run}: output {} {:?}: max abs error {err:.2e} (largest |value| \
                 {scale:.3}, relative {:.2e}) vs onnxruntime",
                info.name,
                want.shape(),
                err / scale.max(f64::MIN_POSITIVE)
            );
            assert!(
                err <= 1e-4,
                "{name} run {run}: output {}: max abs error {err} against onnxruntime \
                 (largest |value| {scale}), more than 1e-4",
                info.name
            );
        }
    }
    assert_eq!(model.replays(), 1, "{:?}", model.not_replayed());
}

/// torchvision's ResNet-50 (v1.5), batch 2, against onnxruntime.
#[test]
fn resnet50_matches_onnxruntime() {
    if let Some(dir) = full_dir() {
        check_full(&dir, "resnet50");
    }
}

/// A BERT encoder at all-MiniLM-L6-v2's size (6 layers, hidden 384, vocab 30,522) as
/// `torch.onnx.export` writes it, batch 2 with padding, against onnxruntime: both outputs.
#[test]
fn bert_encoder_matches_onnxruntime() {
    if let Some(dir) = full_dir() {
        check_full(&dir, "bert");
    }
}

/// The declared inputs: names, dtypes and symbolic batch dims.
#[test]
fn inputs_are_described() {
    let model = OnnxModel::load(data("bert_tiny.onnx")).expect("loads");
    let names: Vec<&str> = model.inputs().iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["ids", "mask"]);
    let ids = &model.inputs()[0];
    assert_eq!(ids.dtype, Some(DType::INT64));
    assert_eq!(
        ids.shape,
        Some(vec![
            tinygrad_onnx::Dim::Symbolic("batch".into()),
            tinygrad_onnx::Dim::Fixed(8)
        ])
    );
    assert_eq!(model.outputs()[0].name, "hidden_states");
    assert_eq!(model.opset(), 17);
}
