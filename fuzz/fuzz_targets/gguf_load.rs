//! Any bytes given to the GGUF loader: an `Err` or tensors whose data reads back, never a panic,
//! a crash, a hang or an allocation beyond what the input holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_tensor::nn::gguf::gguf_load_bytes;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = gguf_load_bytes(data, "CPU") {
        assert_eq!(g.tensors.len(), g.tensor_order.len());
        for t in g.tensors.values() {
            // dequantized blocks give at most 8 f32 bytes per input byte (Q4: 32 values in 18)
            assert!(t.nbytes() <= data.len().saturating_mul(8));
            let bytes = t.try_to_bytes().expect("a loaded tensor reads back");
            assert_eq!(bytes.len(), t.nbytes());
        }
    }
});
