//! [`Linear`]: `y = x W^T + b`.

use std::collections::BTreeMap;

use super::{KAIMING_A, sd_check_shape, sd_entry, sd_required};
use crate::nn::{Module, StateDictError};
use crate::{Tensor, impl_parameters};

/// `y = x W^T + b` (PyTorch's `nn.Linear`): `weight` is `(out, in)`.
pub struct Linear {
    /// `(out_features, in_features)`, Kaiming-uniform.
    pub weight: Tensor,
    /// `(out_features,)`, uniform in `±1/sqrt(in_features)`.
    pub bias: Option<Tensor>,
}

impl_parameters!(Linear { weight, bias });

impl Linear {
    /// A linear layer with a bias.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::{DType, Tensor};
    /// let l = Linear::new(3, 2);
    /// assert_eq!(l.weight.shape(), vec![2, 3]);
    /// assert_eq!(l.bias.as_ref().unwrap().shape(), vec![2]);
    /// assert_eq!(l.forward(&Tensor::ones(&[4, 3], DType::FLOAT32)).shape(), vec![4, 2]);
    /// ```
    pub fn new(in_features: usize, out_features: usize) -> Linear {
        Linear::new_with(in_features, out_features, true)
    }

    /// A linear layer, with or without a bias.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::Tensor;
    /// let l = Linear::new_with(2, 1, false);
    /// assert!(l.bias.is_none());
    /// l.weight.assign(&Tensor::from_slice(&[2.0f32, -1.0], &[1, 2]));
    /// let y = l.forward(&Tensor::from_slice(&[3.0f32, 1.0, 0.5, 4.0], &[2, 2]));
    /// assert_eq!(y.to_vec::<f32>(), vec![5.0, -3.0]);
    /// ```
    pub fn new_with(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let weight = Tensor::kaiming_uniform(&[out_features, in_features], KAIMING_A);
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        let bias = bias.then(|| Tensor::uniform(&[out_features], -bound, bound));
        Linear { weight, bias }
    }
}

impl Linear {
    /// A linear layer from a state dict's `{prefix}.weight` (`(out, in)`) and, when present,
    /// `{prefix}.bias` (`(out,)`), sharing the tensors (a PyTorch checkpoint's layout).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use tinygrad_tensor::nn::{Linear, Module};
    /// use tinygrad_tensor::Tensor;
    /// let sd = BTreeMap::from([
    ///     ("enc.q.weight".to_string(), Tensor::from_slice(&[1.0f32, 2.0], &[1, 2])),
    ///     ("enc.q.bias".to_string(), Tensor::from_slice(&[0.5f32], &[1])),
    /// ]);
    /// let q = Linear::from_state_dict(&sd, "enc.q").unwrap();
    /// assert_eq!(q.forward(&Tensor::from_slice(&[3.0f32, 4.0], &[1, 2])).to_vec::<f32>(), vec![11.5]);
    /// let e = Linear::from_state_dict(&sd, "enc.k").err().unwrap();
    /// assert!(e.to_string().contains("missing keys: [\"enc.k.weight\"]"), "{e}");
    /// ```
    ///
    /// # Errors
    /// If the weight is missing or not 2-D, or the bias is not `(out,)`.
    pub fn from_state_dict(
        sd: &BTreeMap<String, Tensor>,
        prefix: &str,
    ) -> Result<Linear, StateDictError> {
        let (key, weight) = sd_required(sd, prefix, "weight")?;
        if weight.ndim() != 2 {
            return Err(StateDictError::Invalid {
                key,
                message: format!(
                    "expected a 2-D (out, in) weight, got shape {:?}",
                    weight.shape()
                ),
            });
        }
        let out = weight.shape()[0];
        let bias = match sd_entry(sd, prefix, "bias") {
            (key, Some(b)) => {
                sd_check_shape(&key, &b, &[out])?;
                Some(b)
            }
            (_, None) => None,
        };
        Ok(Linear { weight, bias })
    }
}

impl Module for Linear {
    /// # Panics
    /// If the last dimension of `x` is not `in_features`.
    fn forward(&self, x: &Tensor) -> Tensor {
        let ws = self.weight.shape();
        let xs = x.shape();
        assert!(
            xs.last() == Some(&ws[1]),
            "Linear: input shape {xs:?} must end in in_features={} (weight shape {ws:?})",
            ws[1]
        );
        x.linear(&self.weight.t(), self.bias.as_ref())
    }
}
