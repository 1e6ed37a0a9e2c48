//! Any bytes given to the safetensors loader: an `Err` or tensors whose data reads back, never a
//! panic, a crash, a hang or an allocation beyond what the input holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_tensor::nn::state::safe_load_bytes;

fuzz_target!(|data: &[u8]| {
    if let Ok(tensors) = safe_load_bytes(data, "CPU") {
        for t in tensors.values() {
            // a loaded tensor's bytes are the file's: at most its length
            let bytes = t.try_to_bytes().expect("a loaded tensor reads back");
            assert!(bytes.len() <= data.len());
            assert_eq!(bytes.len(), t.nbytes());
        }
    }
});
