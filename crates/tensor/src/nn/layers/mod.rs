//! Layers, as tinygrad's `tinygrad.nn`, with its default initializations: Kaiming-uniform
//! weights (`a = sqrt(5)`, PyTorch's choice) and uniform biases in `±1/sqrt(fan_in)` for
//! [`Linear`] and the convolutions, ones/zeros for normalization scales/shifts, Glorot-uniform
//! embeddings, `±1/sqrt(hidden)` for [`LSTMCell`]. Random initial values come from
//! [`Tensor::rand`]: call [`Tensor::manual_seed`] first for reproducible weights.
//!
//! Each layer implements [`Module`](super::Module) (except [`LSTMCell`], whose step takes a
//! state) and [`Parameters`](super::Parameters), with PyTorch's/tinygrad's state names (`weight`,
//! `bias`, `running_mean`, ...). Fields are public: the tensors are shared handles, so
//! `layer.weight.assign(..)` changes the layer.
//!
//! Files: [`Linear`] in `linear`, the convolutions in `conv`, the normalizations in `norm`,
//! [`Embedding`] in `embedding`, [`LSTMCell`] in `lstm`; this one holds the helpers they share
//! (shapes, state-dict entries).

mod conv;
mod embedding;
mod linear;
mod lstm;
mod norm;

pub use conv::{Conv2d, ConvOptions, ConvTranspose2d};
pub use embedding::Embedding;
pub use linear::Linear;
pub use lstm::LSTMCell;
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm, LayerNorm, RMSNorm};

use std::collections::BTreeMap;

use super::StateDictError;
use crate::Tensor;

/// tinygrad's `a` for Kaiming-uniform layer weights.
const KAIMING_A: f64 = 2.236_067_977_499_79; // sqrt(5)

fn isize_shape(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&d| d as isize).collect()
}

/// `[1, -1, 1, ...]`: a per-channel vector laid along axis 1 of an `ndim`-dim tensor.
fn channel_shape(ndim: usize) -> Vec<isize> {
    let mut s = vec![1; ndim.max(2)];
    s[1] = -1;
    s
}

/// `state_dict[{prefix}.{name}]` (`prefix` may be empty or end with a dot), `None` when absent.
fn sd_entry(sd: &BTreeMap<String, Tensor>, prefix: &str, name: &str) -> (String, Option<Tensor>) {
    let p = prefix.trim_end_matches('.');
    let key = if p.is_empty() {
        name.to_string()
    } else {
        format!("{p}.{name}")
    };
    let t = sd.get(&key).cloned();
    (key, t)
}

/// `state_dict[{prefix}.{name}]`, an error naming the key when absent.
fn sd_required(
    sd: &BTreeMap<String, Tensor>,
    prefix: &str,
    name: &str,
) -> Result<(String, Tensor), StateDictError> {
    match sd_entry(sd, prefix, name) {
        (key, Some(t)) => Ok((key, t)),
        (key, None) => Err(StateDictError::Mismatch {
            missing: vec![key],
            unexpected: Vec::new(),
            wrong: Vec::new(),
        }),
    }
}

/// Checks that the entry `key` has `shape`.
fn sd_check_shape(key: &str, t: &Tensor, shape: &[usize]) -> Result<(), StateDictError> {
    if t.shape() == shape {
        Ok(())
    } else {
        Err(StateDictError::Invalid {
            key: key.to_string(),
            message: format!("expected shape {shape:?}, got {:?}", t.shape()),
        })
    }
}
