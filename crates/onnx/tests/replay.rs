//! `OnnxModel::run` replays: per input signature, the values known before the run are folded,
//! the rest is captured through a `Jit`, and later runs replay it — with outputs equal to a run
//! node by node on every call, inputs of another shape recaptured, and graphs that read values
//! back to the host (never replayable) run node by node each time.

mod common;

use std::collections::HashMap;

use common::{FLOAT, INT64, floats_init, ints_init, model, node, value};
use tinygrad_onnx::OnnxModel;
use tinygrad_onnx::proto::{AttributeProto, GraphProto};
use tinygrad_tensor::Tensor;

/// An `If` branch attribute: one node `op(inputs)` giving a float vector.
fn branch(name: &str, op: &str, inputs: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(5),
        g: Some(GraphProto {
            node: vec![node(op, inputs, &[&format!("{name}_out")], vec![])],
            name: Some(name.into()),
            output: vec![value(&format!("{name}_out"), FLOAT, &[-1])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Exporter-style shape arithmetic (Shape, Gather, Unsqueeze, Concat into a Reshape), a
/// weight transposed ahead (folded), a MatMul and a Resize (whose interpolation tables are
/// uploaded from the host): `y = relu(reshape(x, [n, 2, 2]) @ w^T)`, `z = resize(x, 2x)`.
fn shape_arithmetic_model() -> OnnxModel {
    let resize_mode = AttributeProto {
        name: Some("mode".into()),
        r#type: Some(3),
        s: Some(b"linear".to_vec()),
        ..Default::default()
    };
    model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![]),
            node("Unsqueeze", &["n", "axes"], &["n1"], vec![]),
            node(
                "Concat",
                &["n1", "two_two"],
                &["shape"],
                vec![AttributeProto {
                    name: Some("axis".into()),
                    r#type: Some(2),
                    i: Some(0),
                    ..Default::default()
                }],
            ),
            node("Reshape", &["x", "shape"], &["r"], vec![]),
            node("Transpose", &["w"], &["wt"], vec![]),
            node("MatMul", &["r", "wt"], &["m"], vec![]),
            node("Relu", &["m"], &["y"], vec![]),
            node("Reshape", &["x", "four_d"], &["x4"], vec![]),
            node("Resize", &["x4", "", "scales"], &["z"], vec![resize_mode]),
        ],
        vec![
            ints_init("zero", &[0], &[]),
            ints_init("axes", &[0], &[1]),
            ints_init("two_two", &[2, 2], &[2]),
            ints_init("four_d", &[1, 1, -1, 4], &[4]),
            floats_init("w", &[0.5, -1.0, 2.0, 0.25], &[2, 2]),
            floats_init("scales", &[1.0, 1.0, 2.0, 2.0], &[4]),
        ],
        vec![value("x", FLOAT, &[-1, 4])],
        vec![
            value("y", FLOAT, &[-1, 2, 2]),
            value("z", FLOAT, &[1, 1, -1, 8]),
        ],
    )
}

fn x_of(n: usize, k: usize) -> Tensor {
    let v: Vec<f32> = (0..n * 4)
        .map(|i| ((i * 7 + k * 5) % 13) as f32 * 0.5 - 3.0)
        .collect();
    Tensor::from_slice(&v, &[n, 4])
}

fn run(m: &OnnxModel, x: &Tensor) -> (Vec<f32>, Vec<f32>) {
    let out = m
        .run(&HashMap::from([("x".to_string(), x.clone())]))
        .expect("runs");
    (out["y"].to_vec::<f32>(), out["z"].to_vec::<f32>())
}

/// `relu(reshape(x, [n, 2, 2]) @ w^T)` computed here.
fn want_y(x: &Tensor) -> Vec<f32> {
    let v = x.to_vec::<f32>();
    let w = [[0.5f32, -1.0], [2.0, 0.25]];
    v.chunks(2)
        .flat_map(|row| (0..2).map(move |j| (row[0] * w[j][0] + row[1] * w[j][1]).max(0.0)))
        .collect()
}

#[test]
fn a_model_replays_with_outputs_equal_to_runs_node_by_node() {
    let m = shape_arithmetic_model();
    for k in 0..6 {
        let x = x_of(3, k);
        let (y, z) = run(&m, &x);
        assert_eq!(y, want_y(&x), "run {k}");
        // each run's Resize equals a fresh model's first run (node by node) on the same input
        let (_, z_fresh) = run(&shape_arithmetic_model(), &x);
        assert_eq!(z, z_fresh, "run {k}");
    }
    assert_eq!(
        m.replays(),
        3,
        "runs 1-3 fold, warm up and capture; 4-6 replay"
    );
    assert!(m.not_replayed().is_empty(), "{:?}", m.not_replayed());
}

#[test]
fn inputs_of_another_shape_are_another_capture_never_a_stale_one() {
    let m = shape_arithmetic_model();
    for k in 0..12 {
        let n = if k % 2 == 0 { 3 } else { 5 };
        let x = x_of(n, k);
        let (y, z) = run(&m, &x);
        assert_eq!(y, want_y(&x), "run {k} with {n} rows");
        assert_eq!(z.len(), n * 2 * 8, "run {k}");
        let (_, z_fresh) = run(&shape_arithmetic_model(), &x);
        assert_eq!(z, z_fresh, "run {k}");
    }
    assert_eq!(
        m.replays(),
        6,
        "each shape: 3 runs to capture, then 3 replays"
    );
}

#[test]
fn a_graph_that_reads_values_back_runs_node_by_node_each_time() {
    // NonZero's output size depends on x's values: a replay would keep the first one's
    let m = model(
        vec![
            node("Relu", &["x"], &["r"], vec![]),
            node("NonZero", &["r"], &["y"], vec![]),
        ],
        vec![],
        vec![value("x", FLOAT, &[6])],
        vec![value("y", INT64, &[1, -1])],
    );
    for k in 0..6 {
        let v: Vec<f32> = (0..6)
            .map(|i| if (i + k) % 3 == 0 { 1.0 } else { -1.0 })
            .collect();
        let want: Vec<i64> = (0..6).filter(|i| v[*i as usize] > 0.0).collect();
        let out = m
            .run(&HashMap::from([(
                "x".to_string(),
                Tensor::from_slice(&v, &[6]),
            )]))
            .expect("runs");
        assert_eq!(out["y"].to_vec::<i64>(), want, "run {k}");
    }
    assert_eq!(m.replays(), 0);
    let why = m.not_replayed();
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("read"), "{why:?}");
}

#[test]
fn a_branch_on_a_shape_is_known_before_the_run_and_replays() {
    // If(size(x) > 8): x * 2, else -x — the condition comes from the shape only
    let m = model(
        vec![
            node("Size", &["x"], &["size"], vec![]),
            node("Greater", &["size", "eight"], &["big"], vec![]),
            node(
                "If",
                &["big"],
                &["y"],
                vec![
                    branch("then_branch", "Mul", &["x", "two"]),
                    branch("else_branch", "Neg", &["x"]),
                ],
            ),
        ],
        vec![
            ints_init("eight", &[8], &[]),
            floats_init("two", &[2.0], &[]),
        ],
        vec![value("x", FLOAT, &[-1])],
        vec![value("y", FLOAT, &[-1])],
    );
    for k in 0..12 {
        let n = if k % 2 == 0 { 6 } else { 10 };
        let v: Vec<f32> = (0..n).map(|i| (i + k) as f32 - 4.0).collect();
        let want: Vec<f32> = v.iter().map(|x| if n > 8 { x * 2.0 } else { -x }).collect();
        let out = m
            .run(&HashMap::from([(
                "x".to_string(),
                Tensor::from_slice(&v, &[n]),
            )]))
            .expect("runs");
        assert_eq!(out["y"].to_vec::<f32>(), want, "run {k} with {n} values");
    }
    assert_eq!(m.replays(), 6, "{:?}", m.not_replayed());
}

#[test]
fn a_branch_on_the_values_runs_both_branches_and_replays() {
    // If(sum(x) > 0): x * 2, else -x — both branches give [n]: selected on the device
    let m = model(
        vec![
            node("ReduceSum", &["x"], &["s"], vec![]),
            node("Greater", &["s", "zero"], &["positive"], vec![]),
            node(
                "If",
                &["positive"],
                &["y"],
                vec![
                    branch("then_branch", "Mul", &["x", "two"]),
                    branch("else_branch", "Neg", &["x"]),
                ],
            ),
        ],
        vec![
            floats_init("zero", &[0.0], &[]),
            floats_init("two", &[2.0], &[]),
        ],
        vec![value("x", FLOAT, &[4])],
        vec![value("y", FLOAT, &[4])],
    );
    for k in 0..8 {
        let sign = if k % 3 == 0 { -1.0 } else { 1.0 };
        let v: Vec<f32> = (0..4).map(|i| sign * (i + k) as f32).collect();
        let want: Vec<f32> = if v.iter().sum::<f32>() > 0.0 {
            v.iter().map(|x| x * 2.0).collect()
        } else {
            v.iter().map(|x| -x).collect()
        };
        let out = m
            .run(&HashMap::from([(
                "x".to_string(),
                Tensor::from_slice(&v, &[4]),
            )]))
            .expect("runs");
        assert_eq!(out["y"].to_vec::<f32>(), want, "run {k}");
    }
    assert_eq!(m.replays(), 5, "{:?}", m.not_replayed());
}

#[test]
fn small_integer_inputs_are_part_of_the_signature() {
    // y = expand(x, shape): the shape input's values decide the output's shape
    let m = model(
        vec![node("Expand", &["x", "shape"], &["y"], vec![])],
        vec![],
        vec![value("x", FLOAT, &[1, 3]), value("shape", INT64, &[2])],
        vec![value("y", FLOAT, &[-1, 3])],
    );
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[1, 3]);
    for k in 0..14 {
        let rows = if k % 2 == 0 { 2 } else { 4 };
        let shape = Tensor::from_slice(&[rows as i64, 3], &[2]);
        let out = m
            .run(&HashMap::from([
                ("x".to_string(), x.clone()),
                ("shape".to_string(), shape),
            ]))
            .expect("runs");
        assert_eq!(out["y"].shape(), vec![rows, 3], "run {k}");
        assert_eq!(
            out["y"].to_vec::<f32>(),
            [1.0, 2.0, 3.0].repeat(rows),
            "run {k}"
        );
    }
    // runs 0-2 share a signature whose capture fails (Expand reads the shape input back); from
    // then on the shape input's values are keyed: each value folds, warms up and captures in 3
    // of its runs (runs 3-8), and runs 9-13 replay
    assert_eq!(m.replays(), 5, "{:?}", m.not_replayed());
    assert!(m.not_replayed().is_empty());
}

#[test]
fn the_shape_of_a_value_sized_by_the_data_is_never_folded() {
    // y = shape(nonzero(x)): the count of nonzeros changes from run to run
    let m = model(
        vec![
            node("NonZero", &["x"], &["nz"], vec![]),
            node("Shape", &["nz"], &["y"], vec![]),
        ],
        vec![],
        vec![value("x", FLOAT, &[6])],
        vec![value("y", INT64, &[2])],
    );
    for k in 0..6usize {
        let v: Vec<f32> = (0..6).map(|i| if i < k { 1.0 } else { 0.0 }).collect();
        let out = m
            .run(&HashMap::from([(
                "x".to_string(),
                Tensor::from_slice(&v, &[6]),
            )]))
            .expect("runs");
        assert_eq!(out["y"].to_vec::<i64>(), vec![1, k as i64], "run {k}");
    }
}

#[test]
fn a_shape_inside_a_loop_body_follows_each_iteration() {
    // a loop-carried vector grows by one each iteration; the body's Shape of it is a scan
    // output: [[1], [2], [3]] — never one iteration's value for all
    const BOOL: i32 = 9;
    let body = GraphProto {
        node: vec![
            node("Identity", &["cond"], &["cond_out"], vec![]),
            node("Shape", &["v"], &["s"], vec![]),
            node(
                "Concat",
                &["v", "one"],
                &["v_next"],
                vec![AttributeProto {
                    name: Some("axis".into()),
                    r#type: Some(2),
                    i: Some(0),
                    ..Default::default()
                }],
            ),
        ],
        name: Some("body".into()),
        input: vec![
            value("i", INT64, &[]),
            value("cond", BOOL, &[]),
            value("v", FLOAT, &[-1]),
        ],
        output: vec![
            value("cond_out", BOOL, &[]),
            value("v_next", FLOAT, &[-1]),
            value("s", INT64, &[1]),
        ],
        ..Default::default()
    };
    let m = model(
        vec![node(
            "Loop",
            &["trips", "", "x"],
            &["v_out", "shapes"],
            vec![AttributeProto {
                name: Some("body".into()),
                r#type: Some(5),
                g: Some(body),
                ..Default::default()
            }],
        )],
        vec![
            ints_init("trips", &[3], &[]),
            floats_init("one", &[1.0], &[1]),
        ],
        vec![value("x", FLOAT, &[1])],
        vec![value("v_out", FLOAT, &[4]), value("shapes", INT64, &[3, 1])],
    );
    for k in 0..5 {
        let out = m
            .run(&HashMap::from([(
                "x".to_string(),
                Tensor::from_slice(&[k as f32], &[1]),
            )]))
            .expect("runs");
        assert_eq!(out["shapes"].to_vec::<i64>(), vec![1, 2, 3], "run {k}");
        assert_eq!(
            out["v_out"].to_vec::<f32>(),
            vec![k as f32, 1.0, 1.0, 1.0],
            "run {k}"
        );
    }
}
