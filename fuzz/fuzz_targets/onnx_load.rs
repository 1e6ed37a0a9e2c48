//! Any bytes given to the ONNX loader: an `Err` or a model whose initializers read back, never a
//! panic, a crash, a hang or an allocation beyond what the input holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_onnx::OnnxModel;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = OnnxModel::from_bytes(data, "CPU") {
        // describing the graph must not panic either
        let _ = (m.inputs().len(), m.outputs().len(), m.opset());
    }
});
