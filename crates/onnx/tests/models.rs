//! Two small real architectures (`data/gen_models.py`: a ResNet stem and basic block, a BERT
//! encoder layer with a padding mask and exporter-style shape arithmetic) run end to end and
//! compared with onnxruntime's outputs within 1e-4.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost::Message;
use tinygrad_onnx::OnnxModel;
use tinygrad_onnx::proto::TensorProto;
use tinygrad_onnx::tensor_proto::to_tensor;
use tinygrad_tensor::{DType, Tensor};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn pb(name: &str) -> Tensor {
    let bytes = std::fs::read(data(name)).expect("reads the test data");
    let t = TensorProto::decode(bytes.as_slice()).expect("a TensorProto");
    to_tensor(&t, None, &tinygrad_tensor::default_device()).expect("makes the tensor")
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
        let (g, w) = (
            got.cast(DType::FLOAT64).to_vec::<f64>(),
            want.cast(DType::FLOAT64).to_vec::<f64>(),
        );
        let err = g
            .iter()
            .zip(&w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!(
            "{model_name}: output {} max abs error {err:.2e} vs onnxruntime",
            info.name
        );
        assert!(
            err < 1e-4,
            "{model_name}: output {}: max abs error {err}",
            info.name
        );
    }
}

#[test]
fn resnet_block_matches_onnxruntime() {
    check("resnet_tiny", 1);
}

#[test]
fn bert_layer_matches_onnxruntime() {
    check("bert_tiny", 2);
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
