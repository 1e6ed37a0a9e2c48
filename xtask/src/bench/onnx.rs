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
