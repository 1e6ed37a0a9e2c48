//! [`Embedding`]: a lookup table of vectors, as a one-hot comparison.

use std::collections::BTreeMap;

use tinygrad_dtype::DType;

use super::{isize_shape, sd_required};
use crate::nn::{Module, StateDictError};
use crate::{Tensor, impl_parameters};

/// A lookup table of `vocab_size` vectors of `embed_size` (PyTorch's `nn.Embedding`), written
/// as tinygrad does: a one-hot comparison with `arange(vocab_size)` selecting rows of the table,
/// summed — no gather op, and gradients flow to the table through the same ops. The scheduler
/// collapses the forward's sum into a load of the selected row (O(tokens x embed_size)); an
/// index outside the table selects nothing (a row of zeros), as in tinygrad.
pub struct Embedding {
    /// `(vocab_size, embed_size)`, Glorot-uniform.
    pub weight: Tensor,
}

impl_parameters!(Embedding { weight });

impl Embedding {
    /// An embedding table.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Embedding, Module};
    /// use tinygrad_tensor::Tensor;
    /// let emb = Embedding::new(10, 4);
    /// let table = emb.weight.realize().to_vec::<f32>(); // row i: table[4 * i..4 * i + 4]
    /// let y = emb.forward(&Tensor::from_slice(&[7i32, 2, 7], &[1, 3]));
    /// assert_eq!(y.shape(), vec![1, 3, 4]);
    /// let y = y.to_vec::<f32>();
    /// assert!(y[..4] == table[28..32] && y[4..8] == table[8..12] && y[8..] == table[28..32]);
    /// ```
    pub fn new(vocab_size: usize, embed_size: usize) -> Embedding {
        Embedding {
            weight: Tensor::glorot_uniform(&[vocab_size, embed_size]),
        }
    }
}

impl Embedding {
    /// An embedding from a state dict's 2-D `{prefix}.weight` (`(vocab, embed)`).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{Embedding, Module};
    /// use tinygrad_tensor::Tensor;
    /// let table = Tensor::from_slice(&[0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0], &[3, 2]);
    /// let sd = BTreeMap::from([("wte.weight".to_string(), table)]);
    /// let emb = Embedding::from_state_dict(&sd, "wte").unwrap();
    /// let y = emb.forward(&Tensor::from_slice(&[2i32, 0], &[2])).to_vec::<f32>();
    /// assert_eq!(y, vec![20.0, 21.0, 0.0, 1.0]);
    /// ```
    ///
    /// # Errors
    /// If the weight is missing or not 2-D.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
    ) -> Result<Embedding, StateDictError> {
        let (key, weight) = sd_required(sd, prefix, "weight")?;
        if weight.ndim() != 2 {
            return Err(StateDictError::Invalid {
                key,
                message: format!(
                    "expected a 2-D (vocab, embed) weight, got shape {:?}",
                    weight.shape()
                ),
            });
        }
        Ok(Embedding { weight })
    }
}

impl Module for Embedding {
    /// `idx` (integers, any shape) -> `idx.shape + [embed_size]`.
    ///
    /// # Panics
    /// If `idx` is not an integer tensor.
    fn forward(&self, idx: &Tensor) -> Tensor {
        assert!(
            idx.dtype().is_int(),
            "Embedding: indices must be integers, got {} (shape {:?})",
            idx.dtype(),
            idx.shape()
        );
        let vocab = self.weight.shape()[0];
        let mut s = isize_shape(&idx.shape());
        s.extend([1, 1]);
        let arange = Tensor::arange_on(0.0, vocab as f64, 1.0, DType::INT32, idx.device())
            .reshape(&[vocab as isize, 1]);
        let hit = idx.cast(DType::INT32).reshape(&s).eq(&arange);
        // -0.0 where not selected: the sum is then exactly the selected row (signs of zero
        // included), and the scheduler collapses it into a load of that row
        hit.where_(&self.weight, -0.0).sum(-2isize)
    }
}
