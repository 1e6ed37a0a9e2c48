//! Any bytes given to the GGUF loader: an `Err` or tensors whose data reads back, never a panic,
//! a crash, a hang or an allocation beyond what the input holds. Loaded keeping quantized
//! matrices as blocks, too: the CPU's native dequantization equals the IR's bit for bit (NaN and
//! infinite scales included), and the native product runs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_tensor::Tensor;
use tinygrad_tensor::nn::gguf::{gguf_load_bytes, gguf_load_quantized_bytes};

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
    if let Ok(g) = gguf_load_quantized_bytes(data, "CPU") {
        assert_eq!(g.tensors.len() + g.quantized.len(), g.tensor_order.len());
        for q in g.quantized.values() {
            let bits = |t: &Tensor| -> Vec<u32> {
                t.to_vec::<f32>()
                    .iter()
                    .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                    .collect()
            };
            let native = q.dequantized().expect("dequantizes");
            assert_eq!(bits(&native), bits(&q.dequantize()), "{} blocks", q.ty.name());
            let x = Tensor::ones(&[1, q.cols], tinygrad_tensor::DType::FLOAT32);
            let y = q.linear(&x).expect("multiplies");
            assert_eq!(y.shape(), vec![1, q.rows]);
        }
    }
});
