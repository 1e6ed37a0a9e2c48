//! Helpers the ONNX test files share: graphs built from prost structs, stored tensors read,
//! outputs compared. (Each test binary uses a part of them.)
#![allow(dead_code)]

use std::path::Path;

use prost::Message;
use tinygrad_onnx::OnnxModel;
use tinygrad_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_shape_proto, type_proto,
};
use tinygrad_onnx::tensor_proto::to_tensor;
use tinygrad_tensor::{DType, Tensor};

/// ONNX element types by number.
pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT8: i32 = 3;
pub const INT32: i32 = 6;
pub const INT64: i32 = 7;

/// A graph value of element type `elem`: `dims` < 0 are symbolic (named `d<k>`).
pub fn value(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(k, &d)| tensor_shape_proto::Dimension {
            value: Some(if d < 0 {
                tensor_shape_proto::dimension::Value::DimParam(format!("d{k}"))
            } else {
                tensor_shape_proto::dimension::Value::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node of `op` from `inputs` to `outputs`.
pub fn node(
    op: &str,
    inputs: &[&str],
    outputs: &[&str],
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        op_type: Some(op.into()),
        attribute,
        ..Default::default()
    }
}

/// An int64 initializer.
pub fn ints_init(name: &str, v: &[i64], dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(INT64),
        dims: dims.to_vec(),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// A float32 initializer.
pub fn floats_init(name: &str, v: &[f32], dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(FLOAT),
        dims: dims.to_vec(),
        float_data: v.to_vec(),
        ..Default::default()
    }
}

/// The bytes of a model (opset 17) of one graph.
pub fn model_bytes(
    nodes: Vec<NodeProto>,
    initializer: Vec<TensorProto>,
    input: Vec<ValueInfoProto>,
    output: Vec<ValueInfoProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: nodes,
            name: Some("g".into()),
            initializer,
            input,
            output,
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// [`model_bytes`] loaded on the CPU.
pub fn model(
    nodes: Vec<NodeProto>,
    initializer: Vec<TensorProto>,
    input: Vec<ValueInfoProto>,
    output: Vec<ValueInfoProto>,
) -> OnnxModel {
    OnnxModel::from_bytes(&model_bytes(nodes, initializer, input, output), "CPU").expect("decodes")
}

/// A stored `TensorProto` file as a tensor on the default device.
pub fn pb_at(path: &Path) -> Tensor {
    let bytes = std::fs::read(path)
        .unwrap_or_else(|e| panic!("reads the test data {}: {e}", path.display()));
    let t = TensorProto::decode(bytes.as_slice()).expect("a TensorProto");
    to_tensor(&t, None, &tinygrad_tensor::default_device()).expect("makes the tensor")
}

/// The largest absolute difference between `got` and `want` (infinite where one has a NaN and
/// the other not), and `want`'s largest magnitude.
pub fn max_error(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let (g, w) = (
        got.cast(DType::FLOAT64).to_vec::<f64>(),
        want.cast(DType::FLOAT64).to_vec::<f64>(),
    );
    assert_eq!(g.len(), w.len());
    let err = g
        .iter()
        .zip(&w)
        .map(|(a, b)| {
            if a.is_nan() != b.is_nan() {
                f64::INFINITY
            } else if a.is_nan() {
                0.0
            } else {
                (a - b).abs()
            }
        })
        .fold(0.0, f64::max);
    (err, w.iter().map(|v| v.abs()).fold(0.0, f64::max))
}
