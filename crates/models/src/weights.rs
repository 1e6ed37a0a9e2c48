//! A checkpoint's tensors by name, and the checked accessors the models build their layers with:
//! every weight is looked up by its checkpoint name and its shape checked against the one the
//! configuration implies, so a missing or misshapen weight is an `Err` naming the tensor and the
//! shape expected — never a silently random or broadcast weight.
//!
//! Sources: a Hugging Face directory (`model.safetensors`, or the shards listed by
//! `model.safetensors.index.json`) and GGUF files (through `tinygrad_tensor::nn::gguf`). Weights
//! keep their dtype (f16 and bf16 stay half-size in memory); layers cast them to f32 inside the
//! kernels that use them.

use std::collections::BTreeMap;
use std::path::Path;

use tinygrad_tensor::nn::quant::QuantizedTensor;
use tinygrad_tensor::nn::state::safe_load_on;
use tinygrad_tensor::nn::{Embedding, LayerNorm, Linear, RMSNorm};
use tinygrad_tensor::{DType, Tensor};

use crate::config::JsonConfig;
use crate::error::{ModelError, Result};

/// A checkpoint's tensors, and where they came from (for errors).
pub struct Weights {
    /// The file or directory the tensors were read from.
    pub path: String,
    /// The tensors by checkpoint name.
    pub tensors: BTreeMap<String, Tensor>,
    /// Weight matrices kept as quantized blocks (a GGUF file's), by checkpoint name: projections
    /// read them as blocks ([`Proj::Quantized`]), embeddings dequantize the rows they select.
    pub quantized: BTreeMap<String, QuantizedTensor>,
}

/// A projection `x W^T (+ b)` computing in float32: a float weight, or one kept as quantized
/// blocks (whose product reads the blocks: `QuantizedTensor::linear`).
pub enum Proj {
    /// A float weight (any float dtype, cast inside the kernel).
    Dense(Linear),
    /// Quantized blocks, and a float bias.
    Quantized {
        /// The weight, `(out, in)`.
        weight: QuantizedTensor,
        /// The bias, `(out,)`.
        bias: Option<Tensor>,
    },
}

impl Proj {
    /// `x W^T (+ b)` in float32, for `x` of `[..., in]`.
    ///
    /// # Errors
    /// If the device fails (a quantized product on the CPU runs at once).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::Dense(l) => Ok(linear_f32(l, x)),
            Proj::Quantized { weight, bias } => {
                let y = weight.linear(x)?;
                Ok(match bias {
                    Some(b) => y + as_f32(b),
                    None => y,
                })
            }
        }
    }

    /// [`Proj::forward`] as a kernel of its own (the GEMM path's, or the quantized product's),
    /// not fused into what reads it: a dense product is made `contiguous`, a quantized one
    /// already is a buffer.
    ///
    /// # Errors
    /// As [`Proj::forward`].
    pub fn forward_own(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::Quantized { bias: None, .. } => self.forward(x),
            _ => Ok(self.forward(x)?.contiguous()),
        }
    }

    /// Whether the product reads its input from a buffer (a quantized product on the CPU
    /// realizes a lazy input first: an input shared by several projections is better realized
    /// once by the caller).
    pub fn reads_realized_input(&self) -> bool {
        matches!(self, Proj::Quantized { .. })
    }

    /// Output rows `lo..hi` (a fused projection's part: Phi-3's qkv and gate/up).
    pub fn rows(&self, lo: usize, hi: usize) -> Proj {
        match self {
            Proj::Dense(l) => {
                let inp = l.weight.shape()[1];
                Proj::Dense(Linear {
                    weight: l.weight.shrink(&[(lo, hi), (0, inp)]),
                    bias: l.bias.as_ref().map(|b| b.shrink(&[(lo, hi)])),
                })
            }
            Proj::Quantized { weight, bias } => Proj::Quantized {
                weight: weight.rows_range(lo, hi),
                bias: bias.as_ref().map(|b| b.shrink(&[(lo, hi)])),
            },
        }
    }
}

/// Projections of one input, told apart by their output rows (a block's query, key and value;
/// its gate and up): where every part is quantized alike, one product over their rows stacked
/// (one kernel and one pass over the input instead of one per part: a decode step's products
/// are short, so their launches and thread hand-offs weigh); else one product per part. Each
/// output is the same either way: a row's product does not depend on the rows around it.
pub enum ProjStack {
    /// One projection whose output rows are the parts', in order, of these sizes.
    Fused {
        /// The stacked projection.
        proj: Proj,
        /// Each part's rows.
        sizes: Vec<usize>,
    },
    /// One projection per part.
    Parts(Vec<Proj>),
}

impl ProjStack {
    /// The parts, stacked when they are all quantized with one block type and width and
    /// either all have a bias or none has (the stacked blocks are copied into a buffer of their
    /// own; the parts' are freed when dropped).
    ///
    /// # Errors
    /// If the device fails copying the blocks.
    pub fn new(parts: Vec<Proj>) -> Result<ProjStack> {
        let quantized: Vec<(&QuantizedTensor, &Option<Tensor>)> = parts
            .iter()
            .filter_map(|p| match p {
                Proj::Quantized { weight, bias } => Some((weight, bias)),
                Proj::Dense(_) => None,
            })
            .collect();
        let Some(&(first, first_bias)) = quantized.first() else {
            return Ok(ProjStack::Parts(parts));
        };
        let alike = parts.len() > 1
            && quantized.len() == parts.len()
            && quantized.iter().all(|(w, b)| {
                w.ty == first.ty
                    && w.cols == first.cols
                    && w.device() == first.device()
                    && b.is_some() == first_bias.is_some()
            });
        if !alike {
            return Ok(ProjStack::Parts(parts));
        }
        let blocks: Vec<Tensor> = quantized.iter().map(|(w, _)| w.blocks.clone()).collect();
        let stacked = Tensor::cat(&blocks.iter().collect::<Vec<_>>(), 0).contiguous();
        stacked.try_realize()?;
        let bias = if first_bias.is_some() {
            let biases: Vec<Tensor> = quantized
                .iter()
                .filter_map(|(_, b)| b.as_ref().map(as_f32))
                .collect();
            let b = Tensor::cat(&biases.iter().collect::<Vec<_>>(), 0).contiguous();
            b.try_realize()?;
            Some(b)
        } else {
            None
        };
        let sizes: Vec<usize> = quantized.iter().map(|(w, _)| w.rows).collect();
        let weight = QuantizedTensor {
            blocks: stacked,
            ty: first.ty,
            rows: sizes.iter().sum(),
            cols: first.cols,
        };
        Ok(ProjStack::Fused {
            proj: Proj::Quantized { weight, bias },
            sizes,
        })
    }

    /// A checkpoint's fused projection whose output rows are parts of `sizes` (Phi-3's qkv and
    /// gate/up): kept whole when quantized, else split into parts (each a dense product of its
    /// own, as the GEMM path takes them).
    pub fn from_fused(proj: Proj, sizes: Vec<usize>) -> ProjStack {
        if matches!(proj, Proj::Quantized { .. }) {
            return ProjStack::Fused { proj, sizes };
        }
        let mut lo = 0;
        let parts = sizes
            .iter()
            .map(|&n| {
                lo += n;
                proj.rows(lo - n, lo)
            })
            .collect();
        ProjStack::Parts(parts)
    }

    /// Each part's [`Proj::forward_own`] of `x` `[..., in]`: `[..., rows]` per part, in order
    /// (views of one output buffer when fused).
    ///
    /// # Errors
    /// As [`Proj::forward`].
    pub fn forward_own(&self, x: &Tensor) -> Result<Vec<Tensor>> {
        match self {
            ProjStack::Parts(parts) => parts.iter().map(|p| p.forward_own(x)).collect(),
            ProjStack::Fused { proj, sizes } => {
                let y = proj.forward_own(x)?;
                let shape = y.shape();
                let last = shape.len() - 1;
                let mut lo = 0;
                Ok(sizes
                    .iter()
                    .map(|&n| {
                        let mut ranges: Vec<(usize, usize)> =
                            shape.iter().map(|&d| (0, d)).collect();
                        ranges[last] = (lo, lo + n);
                        lo += n;
                        y.shrink(&ranges)
                    })
                    .collect())
            }
        }
    }

    /// Whether the products read their input from a buffer (see [`Proj::reads_realized_input`]).
    pub fn reads_realized_input(&self) -> bool {
        match self {
            ProjStack::Fused { proj, .. } => proj.reads_realized_input(),
            ProjStack::Parts(parts) => parts.iter().any(Proj::reads_realized_input),
        }
    }
}

impl From<Linear> for Proj {
    fn from(l: Linear) -> Proj {
        Proj::Dense(l)
    }
}

impl Weights {
    /// Weights held in memory; errors name them `path`.
    pub fn new(path: impl Into<String>, tensors: BTreeMap<String, Tensor>) -> Weights {
        Weights {
            path: path.into(),
            tensors,
            quantized: BTreeMap::new(),
        }
    }

    /// These weights with `quantized` matrices kept as blocks besides the tensors.
    pub fn with_quantized(mut self, quantized: BTreeMap<String, QuantizedTensor>) -> Weights {
        self.quantized = quantized;
        self
    }

    /// The safetensors weights of a Hugging Face model directory, onto `device`: the single
    /// `model.safetensors`, or every shard named by `model.safetensors.index.json`'s
    /// `weight_map` (each tensor must be in the shard the index names).
    ///
    /// # Errors
    /// If neither file exists, the index is malformed or names a shard outside the directory, a
    /// shard fails to load, or a tensor is not where the index says.
    pub fn from_hf_dir(dir: &Path, device: &str) -> Result<Weights> {
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.is_file() {
            let path = single.display().to_string();
            let tensors = safe_load_on(&single, device).map_err(|e| ModelError::Weight {
                path: path.clone(),
                tensor: e.tensor.clone().unwrap_or_default(),
                message: e.message,
            })?;
            return Ok(Weights::new(path, tensors));
        }
        if !index.is_file() {
            return Err(ModelError::Io {
                path: dir.display().to_string(),
                message: "no model.safetensors or model.safetensors.index.json in the directory"
                    .to_string(),
            });
        }
        let cfg = JsonConfig::read(&index)?;
        let map = cfg
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| cfg.error("weight_map", "missing (expected an object name -> shard)"))?;
        let mut shards: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, shard) in map {
            let shard = shard.as_str().ok_or_else(|| {
                cfg.error("weight_map", format!("`{name}`: expected a file name"))
            })?;
            if shard.contains('/') || shard.contains('\\') || shard.starts_with('.') {
                return Err(cfg.error(
                    "weight_map",
                    format!("`{name}`: shard `{shard}` must be a file in the model directory"),
                ));
            }
            shards.entry(shard).or_default().push(name);
        }
        let mut tensors = BTreeMap::new();
        for (shard, names) in shards {
            let file = dir.join(shard);
            let path = file.display().to_string();
            let mut loaded = safe_load_on(&file, device).map_err(|e| ModelError::Weight {
                path: path.clone(),
                tensor: e.tensor.clone().unwrap_or_default(),
                message: e.message,
            })?;
            for name in names {
                let t = loaded.remove(name).ok_or_else(|| ModelError::Weight {
                    path: path.clone(),
                    tensor: name.to_string(),
                    message: format!("missing: {} names this shard for it", cfg.path),
                })?;
                tensors.insert(name.to_string(), t);
            }
        }
        Ok(Weights::new(dir.display().to_string(), tensors))
    }

    /// An error about tensor `name`.
    pub fn error(&self, name: &str, message: impl Into<String>) -> ModelError {
        ModelError::Weight {
            path: self.path.clone(),
            tensor: name.to_string(),
            message: message.into(),
        }
    }

    /// Whether the checkpoint has `name` (a tensor, or a matrix kept quantized).
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name) || self.quantized.contains_key(name)
    }

    /// Tensor `name`, which must be a float tensor of exactly `shape`.
    ///
    /// # Errors
    /// If it is missing, of another shape, or not a float.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| self.error(name, format!("missing (expected shape {shape:?})")))?;
        if t.shape() != shape {
            return Err(self.error(
                name,
                format!("expected shape {shape:?}, got {:?}", t.shape()),
            ));
        }
        if !t.dtype().is_float() {
            return Err(self.error(name, format!("expected a float dtype, got {}", t.dtype())));
        }
        Ok(t.clone())
    }

    /// A linear layer `in_features -> out_features` from `{prefix}.weight` (`(out, in)`, as
    /// PyTorch stores it) and, with `bias`, `{prefix}.bias`.
    ///
    /// # Errors
    /// As [`Weights::get`].
    pub fn linear(&self, prefix: &str, inp: usize, out: usize, bias: bool) -> Result<Linear> {
        Ok(Linear {
            weight: self.get(&format!("{prefix}.weight"), &[out, inp])?,
            bias: if bias {
                Some(self.get(&format!("{prefix}.bias"), &[out])?)
            } else {
                None
            },
        })
    }

    /// A projection `in_features -> out_features` from `{prefix}.weight` (`(out, in)`), kept
    /// as blocks when the checkpoint holds it quantized, and with `bias`, `{prefix}.bias`.
    ///
    /// # Errors
    /// As [`Weights::get`] (a quantized weight of another shape too).
    pub fn proj(&self, prefix: &str, inp: usize, out: usize, bias: bool) -> Result<Proj> {
        let name = format!("{prefix}.weight");
        let Some(q) = self.quantized.get(&name) else {
            return Ok(Proj::Dense(self.linear(prefix, inp, out, bias)?));
        };
        if q.shape() != [out, inp] {
            return Err(self.error(
                &name,
                format!(
                    "expected shape {:?}, got {:?} ({})",
                    [out, inp],
                    q.shape(),
                    q.ty.name()
                ),
            ));
        }
        Ok(Proj::Quantized {
            weight: q.clone(),
            bias: if bias {
                Some(self.get(&format!("{prefix}.bias"), &[out])?)
            } else {
                None
            },
        })
    }

    /// A linear layer stored transposed, `(in, out)` (GPT-2's `Conv1D`), as a [`Linear`].
    ///
    /// # Errors
    /// As [`Weights::get`].
    pub fn conv1d(&self, prefix: &str, inp: usize, out: usize) -> Result<Linear> {
        Ok(Linear {
            weight: self.get(&format!("{prefix}.weight"), &[inp, out])?.t(),
            bias: Some(self.get(&format!("{prefix}.bias"), &[out])?),
        })
    }

    /// A layer norm over `dim` from `{prefix}.{weight}` and `{prefix}.{bias}` (BERT checkpoints
    /// name them `weight`/`bias` or, in older ones, `gamma`/`beta`: both are accepted), read
    /// as float32.
    ///
    /// # Errors
    /// As [`Weights::get`].
    pub fn layer_norm(&self, prefix: &str, dim: usize, eps: f64) -> Result<LayerNorm> {
        let (w, b) = if self.contains(&format!("{prefix}.gamma")) {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        Ok(LayerNorm {
            weight: Some(as_f32(&self.get(&format!("{prefix}.{w}"), &[dim])?)),
            bias: Some(as_f32(&self.get(&format!("{prefix}.{b}"), &[dim])?)),
            normalized_shape: vec![dim],
            eps,
        })
    }

    /// An RMS norm over `dim` from `name` (its scale read as float32).
    ///
    /// # Errors
    /// As [`Weights::get`].
    pub fn rms_norm(&self, name: &str, dim: usize, eps: f64) -> Result<RMSNorm> {
        Ok(RMSNorm {
            weight: as_f32(&self.get(name, &[dim])?),
            eps,
        })
    }

    /// An embedding table of `vocab` rows of `dim` from `name`.
    ///
    /// # Errors
    /// As [`Weights::get`].
    pub fn embedding(&self, name: &str, vocab: usize, dim: usize) -> Result<Embedding> {
        if let Some(q) = self.quantized.get(name) {
            if q.shape() != [vocab, dim] {
                return Err(self.error(
                    name,
                    format!("expected shape {:?}, got {:?}", [vocab, dim], q.shape()),
                ));
            }
            // dequantized lazily: a lookup reads and unpacks only the rows it selects
            return Ok(Embedding {
                weight: q.dequantize(),
            });
        }
        Ok(Embedding {
            weight: self.get(name, &[vocab, dim])?,
        })
    }
}

/// `x W^T + b` computing in float32 whatever the weight's dtype (f16/bf16 weights are cast
/// inside the kernel that reads them: they stay half-size in memory).
pub fn linear_f32(layer: &Linear, x: &Tensor) -> Tensor {
    let w = as_f32(&layer.weight);
    let b = layer.bias.as_ref().map(as_f32);
    x.linear(&w.t(), b.as_ref())
}

/// `t` as float32 (lazily: the cast fuses into the kernel that reads it).
pub fn as_f32(t: &Tensor) -> Tensor {
    if t.dtype() == DType::FLOAT32 {
        t.clone()
    } else {
        t.cast(DType::FLOAT32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tinygrad_tensor::nn::quant::QuantType;

    /// A quantized projection of `rows x cols` Q4_1 weights with pseudo-random blocks (finite
    /// scales).
    fn random_q4_1(rows: usize, cols: usize, seed: u32) -> Proj {
        let mut raw = vec![0u8; rows * cols / 32 * 20];
        let mut s = seed;
        for b in raw.iter_mut() {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            *b = (s >> 16) as u8;
        }
        for blk in raw.chunks_exact_mut(20) {
            blk[1] &= 0x3B;
            blk[3] &= 0x3B;
        }
        Proj::Quantized {
            weight: QuantizedTensor::from_blocks(&raw, QuantType::Q4_1, rows, cols, "CPU"),
            bias: None,
        }
    }

    /// Stacked quantized projections give each part's product bit for bit, for a decode
    /// step's row and a prompt's many rows (the two routes of a quantized product).
    #[test]
    fn stacked_projections_equal_their_parts() {
        let cols = 96;
        let sizes = [40, 8, 8];
        let parts = || -> Vec<Proj> {
            sizes
                .iter()
                .zip(1u32..)
                .map(|(&r, seed)| random_q4_1(r, cols, seed))
                .collect()
        };
        let stack = ProjStack::new(parts()).unwrap();
        assert!(matches!(&stack, ProjStack::Fused { sizes: s, .. } if s == &sizes));
        for m in [1usize, 3, 24] {
            let x = Tensor::from_slice(
                &(0..m * cols)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                    .collect::<Vec<_>>(),
                &[1, m, cols],
            );
            let got = stack.forward_own(&x).unwrap();
            for (part, got) in parts().iter().zip(&got) {
                let want = part.forward_own(&x).unwrap();
                assert_eq!(got.shape(), want.shape());
                let (got, want) = (got.to_vec::<f32>(), want.to_vec::<f32>());
                if m <= tinygrad_tensor::nn::quant::NATIVE_ROWS {
                    // the native products: each row summed in one order whatever its
                    // neighbours
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{m} rows of x");
                } else {
                    // dequantized, then a GEMM whose blocking follows the weight's rows: the
                    // same products summed in another order, within float32 rounding
                    let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-5 * scale, "{m} rows of x: {g} vs {w}");
                    }
                }
            }
        }
        // a float part among them: one product each
        let mut mixed = parts();
        mixed.push(Proj::Dense(Linear {
            weight: Tensor::ones(&[4, cols], DType::FLOAT32),
            bias: None,
        }));
        assert!(matches!(ProjStack::new(mixed).unwrap(), ProjStack::Parts(p) if p.len() == 4));
    }
}
