//! Hostile or wrong input: every case an `Err` naming what is wrong, never a panic.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use common::value;
use tinygrad_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto,
};
use tinygrad_onnx::{OnnxError, OnnxModel};
use tinygrad_tensor::{DType, Tensor};

use prost::Message;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A one-node model `y = op(x)` on float32 `x` of `dims`.
fn one_node(op: &str, attrs: Vec<AttributeProto>, inits: Vec<TensorProto>) -> Vec<u8> {
    let node = NodeProto {
        input: vec!["x".into()],
        output: vec!["y".into()],
        op_type: Some(op.into()),
        attribute: attrs,
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            node: vec![node],
            name: Some("g".into()),
            initializer: inits,
            input: vec![value("x", 1, &[2, 3])],
            output: vec![value("y", 1, &[])],
            ..Default::default()
        }),
        ..Default::default()
    };
    model.encode_to_vec()
}

fn run_err(bytes: &[u8], x: Tensor) -> OnnxError {
    let model = OnnxModel::from_bytes(bytes, "CPU").expect("decodes");
    match model.run(&HashMap::from([("x".to_string(), x)])) {
        Err(e) => e,
        Ok(_) => panic!("expected an error"),
    }
}

fn x() -> Tensor {
    Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.], &[2, 3])
}

#[test]
fn malformed_and_truncated_files_are_errors() {
    let e = OnnxModel::from_bytes(b"\xff\xff\xff\xff not protobuf", "CPU")
        .err()
        .expect("an error");
    assert!(matches!(e, OnnxError::Decode { .. }), "{e}");
    let good = std::fs::read(data("resnet_tiny.onnx")).unwrap();
    // one byte: a field tag with no value
    assert!(OnnxModel::from_bytes(&good[..1], "CPU").is_err());
    for cut in [1, good.len() / 3, good.len() - 7] {
        if let Err(e) = OnnxModel::from_bytes(&good[..cut], "CPU") {
            assert!(
                matches!(e, OnnxError::Decode { .. } | OnnxError::Tensor { .. }),
                "{e}"
            );
        }
    }
    let e = OnnxModel::load("/nonexistent/model.onnx")
        .err()
        .expect("an error");
    assert!(e.to_string().contains("/nonexistent/model.onnx"), "{e}");
}

#[test]
fn unknown_op_and_unsupported_attribute_name_the_node() {
    let e = run_err(&one_node("NoSuchOp", vec![], vec![]), x());
    let s = e.to_string();
    assert!(s.contains("NoSuchOp") && s.contains("not supported"), "{s}");
    let attr = AttributeProto {
        name: Some("bogus".into()),
        r#type: Some(2),
        i: Some(1),
        ..Default::default()
    };
    let s = run_err(&one_node("Relu", vec![attr], vec![]), x()).to_string();
    assert!(s.contains("Relu") && s.contains("\"bogus\""), "{s}");
}

#[test]
fn inputs_are_checked_against_the_declaration() {
    let model = OnnxModel::from_bytes(&one_node("Relu", vec![], vec![]), "CPU").unwrap();
    let run = |m: HashMap<String, Tensor>| model.run(&m).expect_err("an error").to_string();
    let s = run(HashMap::new());
    assert!(s.contains("\"x\"") && s.contains("missing"), "{s}");
    let s = run(HashMap::from([(
        "x".into(),
        Tensor::ones(&[3, 2], DType::FLOAT32),
    )]));
    assert!(
        s.contains("shape [3, 2]") && s.contains("[\"2\", \"3\"]"),
        "{s}"
    );
    let s = run(HashMap::from([(
        "x".into(),
        Tensor::ones(&[2, 3], DType::INT32),
    )]));
    assert!(s.contains("int32") && s.contains("float32"), "{s}");
    let s = run(HashMap::from([("x".into(), x()), ("z".into(), x())]));
    assert!(s.contains("\"z\"") && s.contains("not an input"), "{s}");
}

#[test]
fn an_op_failing_on_its_shapes_is_an_error_of_the_node() {
    // Reshape of 6 elements to 4: the tensor op panics, the model returns an Err naming it
    let shape = TensorProto {
        dims: vec![1],
        data_type: Some(7),
        int64_data: vec![4],
        name: Some("s".into()),
        ..Default::default()
    };
    let mut bytes = one_node("Reshape", vec![], vec![shape]);
    let mut m = ModelProto::decode(bytes.as_slice()).unwrap();
    m.graph.as_mut().unwrap().node[0].input.push("s".into());
    bytes = m.encode_to_vec();
    let s = run_err(&bytes, x()).to_string();
    assert!(s.contains("Reshape") && s.contains("reshape"), "{s}");
}

#[test]
fn hostile_tensors_are_errors() {
    let mk = |t: TensorProto| OnnxModel::from_bytes(&one_node("Relu", vec![], vec![t]), "CPU");
    // dims of 2^40 elements (4 TiB) and no data: refused without allocating; 2^62 overflows
    let huge = TensorProto {
        dims: vec![1 << 20, 1 << 20],
        data_type: Some(1),
        name: Some("w".into()),
        ..Default::default()
    };
    let e = mk(huge).err().expect("an error").to_string();
    assert!(e.contains("\"w\"") && e.contains("bytes"), "{e}");
    let overflow = TensorProto {
        dims: vec![1 << 31, 1 << 31, 1 << 31],
        data_type: Some(1),
        name: Some("w".into()),
        ..Default::default()
    };
    assert!(mk(overflow).err().unwrap().to_string().contains("overflow"));
    let wrong = TensorProto {
        dims: vec![3],
        data_type: Some(1),
        float_data: vec![1.0, 2.0],
        name: Some("w".into()),
        ..Default::default()
    };
    assert!(mk(wrong).is_err());
    let negative = TensorProto {
        dims: vec![-1],
        data_type: Some(1),
        name: Some("w".into()),
        ..Default::default()
    };
    assert!(mk(negative).err().unwrap().to_string().contains("negative"));
    let strings = TensorProto {
        dims: vec![1],
        data_type: Some(8),
        string_data: vec![b"a".to_vec()],
        name: Some("w".into()),
        ..Default::default()
    };
    assert!(mk(strings).err().unwrap().to_string().contains("STRING"));
    // external data outside the model's folder, and from bytes (no folder at all)
    let escape = TensorProto {
        dims: vec![1],
        data_type: Some(1),
        data_location: Some(1),
        external_data: vec![StringStringEntryProto {
            key: Some("location".into()),
            value: Some("../../../etc/passwd".into()),
        }],
        name: Some("w".into()),
        ..Default::default()
    };
    let e = mk(escape.clone()).err().unwrap().to_string();
    assert!(e.contains("external data"), "{e}");
    let dir = std::env::temp_dir().join(format!("tg-onnx-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.onnx");
    std::fs::write(&path, one_node("Relu", vec![], vec![escape])).unwrap();
    let e = OnnxModel::load(&path).err().unwrap().to_string();
    assert!(e.contains("outside the model's folder"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Concat of inputs that are all empty: an empty result whose axis adds up theirs (it was the
/// first input's shape).
#[test]
fn concat_of_empty_inputs_adds_up_their_axis() {
    let axis = AttributeProto {
        name: Some("axis".into()),
        r#type: Some(2),
        i: Some(1),
        ..Default::default()
    };
    let mut m = ModelProto::decode(one_node("Concat", vec![axis], vec![]).as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    g.node[0].input = vec!["x".into(), "x".into()];
    g.input[0] = value("x", 1, &[0, 3]);
    let model = OnnxModel::from_bytes(&m.encode_to_vec(), "CPU").unwrap();
    let x = Tensor::zeros(&[0, 3], DType::FLOAT32);
    let out = model.run(&HashMap::from([("x".to_string(), x)])).unwrap();
    assert_eq!(out["y"].shape(), vec![0, 6]);
}

/// A model `y = Relu(x)` over an `INT4` input: the op does not take that type.
fn int4_relu() -> Vec<u8> {
    let node = NodeProto {
        input: vec!["x".into()],
        output: vec!["y".into()],
        op_type: Some("Relu".into()),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(21),
        }],
        graph: Some(GraphProto {
            node: vec![node],
            input: vec![value("x", 22, &[3])],
            output: vec![value("y", 22, &[3])],
            ..Default::default()
        }),
        ..Default::default()
    };
    model.encode_to_vec()
}

#[test]
fn narrow_types_are_refused_by_ops_that_do_not_take_them_and_checked_on_input() {
    let device = tinygrad_tensor::default_device();
    let model = OnnxModel::from_bytes(&int4_relu(), &device).expect("decodes");
    assert_eq!(model.inputs()[0].dtype, Some(DType::INT8));
    assert_eq!(model.inputs()[0].narrow, Some(tinygrad_onnx::Narrow::Int4));
    // a value outside INT4's range in the int8 container
    let x = Tensor::from_slice_on(&[1i8, 9, -2], &[3], &device);
    let err = model
        .run(&HashMap::from([("x".to_string(), x)]))
        .expect_err("9 is not an INT4");
    assert!(
        matches!(&err, OnnxError::Input { name, .. } if name == "x"),
        "{err}"
    );
    assert!(err.to_string().contains("INT4"), "{err}");
    let x = Tensor::from_slice_on(&[1i8, 7, -8], &[3], &device);
    let err = model
        .run(&HashMap::from([("x".to_string(), x)]))
        .expect_err("Relu does not take INT4");
    assert!(
        matches!(&err, OnnxError::Node { op, message, .. } if op == "Relu" && message.contains("INT4")),
        "{err}"
    );
}

/// `one_node(op)` with initializers appended to the node's inputs after `x`.
fn with_inputs(op: &str, inits: Vec<TensorProto>) -> Vec<u8> {
    let names: Vec<String> = inits.iter().filter_map(|t| t.name.clone()).collect();
    let mut m = ModelProto::decode(one_node(op, vec![], inits).as_slice()).unwrap();
    m.graph.as_mut().unwrap().node[0].input.extend(names);
    m.encode_to_vec()
}

fn ints_init(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![v.len() as i64],
        data_type: Some(7),
        int64_data: v.to_vec(),
        name: Some(name.into()),
        ..Default::default()
    }
}

#[test]
fn grid_sample_col2im_and_dft_refuse_bad_shapes() {
    // x is (2, 3): no spatial dims for GridSample or Col2Im, a last dim of 3 for DFT
    let grid = TensorProto {
        dims: vec![2, 3],
        data_type: Some(1),
        float_data: vec![0.0; 6],
        name: Some("grid".into()),
        ..Default::default()
    };
    let s = run_err(&with_inputs("GridSample", vec![grid]), x()).to_string();
    assert!(
        s.contains("GridSample") && s.contains("must be (N, C, D1..Dk)"),
        "{s}"
    );
    let s = run_err(
        &with_inputs(
            "Col2Im",
            vec![ints_init("image", &[4, 4]), ints_init("block", &[2, 2])],
        ),
        x(),
    )
    .to_string();
    assert!(
        s.contains("Col2Im") && s.contains("(N, C * prod(block_shape), L)"),
        "{s}"
    );
    let s = run_err(&with_inputs("DFT", vec![]), x()).to_string();
    assert!(
        s.contains("DFT") && s.contains("last dim of 1 (real) or 2 (complex)"),
        "{s}"
    );
}

/// An unknown `mode` of `SpaceToDepth`/`DepthToSpace` is an error, not read as the default
/// (SpaceToDepth's `CRD` mode, new in opset 28, was once ignored: a silent wrong answer).
#[test]
fn space_to_depth_refuses_an_unknown_mode() {
    let attrs = |mode: &str| {
        vec![
            AttributeProto {
                name: Some("blocksize".into()),
                r#type: Some(2),
                i: Some(1),
                ..Default::default()
            },
            AttributeProto {
                name: Some("mode".into()),
                r#type: Some(3),
                s: Some(mode.as_bytes().to_vec()),
                ..Default::default()
            },
        ]
    };
    let x4 = x().reshape(&[1, 1, 2, 3]);
    for op in ["SpaceToDepth", "DepthToSpace"] {
        let mut m = ModelProto::decode(one_node(op, attrs("XYZ"), vec![]).as_slice()).unwrap();
        m.graph.as_mut().unwrap().input[0] = value("x", 1, &[1, 1, 2, 3]);
        let s = run_err(&m.encode_to_vec(), x4.clone()).to_string();
        assert!(s.contains(op) && s.contains("expected DCR or CRD"), "{s}");
    }
}

/// GridSample with zeros padding: a point outside the image reads 0, even next to an `inf`
/// pixel (a clamped read times a zero weight would be NaN); inside, `inf` is sampled as is.
#[test]
fn grid_sample_outside_the_image_reads_zero_next_to_inf() {
    let grid = TensorProto {
        dims: vec![1, 1, 2, 2],
        data_type: Some(1),
        // (x, y) normalized: far left of the image, then the right pixel's center
        float_data: vec![-5.0, 0.0, 0.5, 0.0],
        name: Some("grid".into()),
        ..Default::default()
    };
    let mut m = ModelProto::decode(with_inputs("GridSample", vec![grid]).as_slice()).unwrap();
    m.graph.as_mut().unwrap().input[0] = value("x", 1, &[1, 1, 1, 2]);
    let model = OnnxModel::from_bytes(&m.encode_to_vec(), "CPU").unwrap();
    let x = Tensor::from_slice(&[f32::INFINITY, 2.0], &[1, 1, 1, 2]);
    let out = model.run(&HashMap::from([("x".to_string(), x)])).unwrap();
    assert_eq!(out["y"].to_vec::<f32>(), vec![0.0, 2.0]);
}

/// A tensor whose dims hold a 0 among others whose product overflows (found by the `onnx_load`
/// fuzzer): no elements, but a shape the tensor layer refuses; the loader says so with an `Err`
/// instead of passing it on to a panic.
#[test]
fn a_zero_dim_beside_overflowing_dims_is_an_error() {
    let bytes = include_bytes!("data/fuzz/zero_dim_overflowing_shape.onnx");
    assert!(tinygrad_onnx::OnnxModel::from_bytes(bytes, "CPU").is_err());
}
