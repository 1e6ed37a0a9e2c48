//! Any bytes given to the PyTorch checkpoint loader: an `Err` or tensors whose data reads back,
//! never a panic, a crash, a hang or an allocation beyond what the input holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_tensor::nn::torch::torch_load_bytes;

fuzz_target!(|data: &[u8]| {
    if let Ok(tensors) = torch_load_bytes(data, "CPU") {
        for t in tensors.values() {
            // a view with stride-0 (expanded) axes is legitimately larger than its storage: it
            // is read back only when small
            if t.nbytes() <= (1 << 20) {
                let bytes = t.try_to_bytes().expect("a loaded tensor reads back");
                assert_eq!(bytes.len(), t.nbytes());
            }
        }
    }
});
