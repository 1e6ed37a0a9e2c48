//! [`LSTMCell`]: one step of a long short-term memory cell.

use tinygrad_dtype::default_float;

use crate::{Tensor, impl_parameters};

/// One step of a long short-term memory cell (PyTorch's `nn.LSTMCell`): gates `i, f, g, o`
/// from `x W_ih^T + b_ih + h W_hh^T + b_hh`, then `c' = f c + i g`, `h' = o tanh(c')`.
pub struct LSTMCell {
    /// `(4 * hidden, input)`, uniform in `±1/sqrt(hidden)`.
    pub weight_ih: Tensor,
    /// `(4 * hidden, hidden)`, uniform in `±1/sqrt(hidden)`.
    pub weight_hh: Tensor,
    /// `(4 * hidden,)`, zeros (`None` without bias).
    pub bias_ih: Option<Tensor>,
    /// `(4 * hidden,)`, zeros (`None` without bias).
    pub bias_hh: Option<Tensor>,
}

impl_parameters!(LSTMCell {
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh
});

impl LSTMCell {
    /// An LSTM cell with biases.
    ///
    /// ```
    /// use tinygrad_tensor::nn::LSTMCell;
    /// use tinygrad_tensor::{DType, Tensor};
    /// let cell = LSTMCell::new(3, 4);
    /// assert_eq!((cell.weight_ih.shape(), cell.weight_hh.shape()), (vec![16, 3], vec![16, 4]));
    /// assert_eq!(cell.bias_ih.as_ref().unwrap().to_vec::<f32>(), vec![0.0; 16]);
    /// let (h, c) = cell.forward(&Tensor::ones(&[2, 3], DType::FLOAT32), None);
    /// assert_eq!((h.shape(), c.shape()), (vec![2, 4], vec![2, 4]));
    /// assert!(h.to_vec::<f32>().iter().all(|v| v.abs() < 1.0)); // o * tanh(c)
    /// ```
    pub fn new(input_size: usize, hidden_size: usize) -> LSTMCell {
        LSTMCell::new_with(input_size, hidden_size, true)
    }

    /// An LSTM cell, with or without biases.
    ///
    /// ```
    /// use tinygrad_tensor::nn::{LSTMCell, Parameters};
    /// let cell = LSTMCell::new_with(3, 4, false);
    /// assert!(cell.bias_ih.is_none() && cell.bias_hh.is_none());
    /// let names: Vec<String> = cell.named_parameters("").into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["weight_ih", "weight_hh"]);
    /// let bound = 0.5; // 1 / sqrt(hidden_size)
    /// assert!(cell.weight_hh.to_vec::<f32>().iter().all(|v| (-bound..bound).contains(v)));
    /// ```
    pub fn new_with(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        let stdv = 1.0 / (hidden_size.max(1) as f64).sqrt();
        let h4 = 4 * hidden_size;
        LSTMCell {
            weight_ih: Tensor::uniform(&[h4, input_size], -stdv, stdv),
            weight_hh: Tensor::uniform(&[h4, hidden_size], -stdv, stdv),
            bias_ih: bias.then(|| Tensor::zeros(&[h4], default_float())),
            bias_hh: bias.then(|| Tensor::zeros(&[h4], default_float())),
        }
    }

    /// One step: `x` `(batch, input)` and the state `(h, c)` (each `(batch, hidden)`; zeros
    /// when `None`) give the new `(h, c)`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::LSTMCell;
    /// use tinygrad_tensor::{DType, Tensor};
    /// let cell = LSTMCell::new(2, 1);
    /// cell.weight_ih.assign(&Tensor::zeros(&[4, 2], DType::FLOAT32)); // every gate input 0:
    /// cell.weight_hh.assign(&Tensor::zeros(&[4, 1], DType::FLOAT32)); // i = f = o = 0.5, g = 0
    /// let (x, c) = (Tensor::ones(&[1, 2], DType::FLOAT32), Tensor::ones(&[1, 1], DType::FLOAT32));
    /// let (h, c) = cell.forward(&x, Some((&c, &c))); // c' = 0.5 * c, h' = 0.5 * tanh(c')
    /// assert!((c.item::<f32>() - 0.5).abs() < 1e-6);
    /// assert!((h.item::<f32>() - 0.23105858).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    /// If the shapes don't fit the cell.
    pub fn forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        let (xs, ws) = (x.shape(), self.weight_ih.shape());
        let hidden = ws[0] / 4;
        assert!(
            xs.len() == 2 && xs[1] == ws[1],
            "LSTMCell: input shape {xs:?} must be (batch, {})",
            ws[1]
        );
        let zeros;
        let (h, c) = match hc {
            Some(hc) => hc,
            None => {
                zeros = Tensor::zeros_on(&[xs[0], hidden], x.dtype(), x.device());
                (&zeros, &zeros)
            }
        };
        for (name, t) in [("h", h), ("c", c)] {
            assert_eq!(
                t.shape(),
                vec![xs[0], hidden],
                "LSTMCell: state {name} must be (batch, hidden) = {:?}",
                [xs[0], hidden]
            );
        }
        let gates = x.linear(&self.weight_ih.t(), self.bias_ih.as_ref())
            + h.linear(&self.weight_hh.t(), self.bias_hh.as_ref());
        let gate = |k: usize| gates.shrink(&[(0, xs[0]), (k * hidden, (k + 1) * hidden)]);
        let (i, f, g, o) = (
            gate(0).sigmoid(),
            gate(1).sigmoid(),
            gate(2).tanh(),
            gate(3).sigmoid(),
        );
        let new_c = f * c + i * g;
        let new_h = o * new_c.tanh();
        (new_h.contiguous(), new_c.contiguous())
    }
}
