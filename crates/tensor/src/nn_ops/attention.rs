//! Attention: `scaled_dot_product_attention`.

use tinygrad_dtype::DType;

use crate::Tensor;

impl Tensor {
    /// Scaled dot-product attention `softmax(q k^T / sqrt(d) + mask) v` with `self` the query
    /// `(..., L, d)`, `key` `(..., S, d)`, `value` `(..., S, dv)`. A bool `attn_mask` keeps the
    /// positions where it is true; a float one is added. `is_causal` masks out the keys after
    /// each query position (upper triangle). `dropout_p > 0` applies [`Tensor::dropout`] to the
    /// attention weights.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let q = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0], &[2, 2]);
    /// let v = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let out = q.scaled_dot_product_attention(&q, &v, None, 0.0, false).to_vec::<f32>();
    /// for (a, b) in out.iter().zip([1.660477f32, 2.660477, 2.339523, 3.339523]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    /// }
    /// let out = q.scaled_dot_product_attention(&q, &v, None, 0.0, true).to_vec::<f32>();
    /// for (a, b) in out.iter().zip([1.0f32, 2.0, 2.339523, 3.339523]) {
    ///     assert!((a - b).abs() < 1e-5, "{a} vs {b}"); // causal: row 0 sees only key 0
    /// }
    /// ```
    ///
    /// # Panics
    /// If both `attn_mask` and `is_causal` are given, or the shapes don't fit.
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        dropout_p: f64,
        is_causal: bool,
    ) -> Tensor {
        self.scaled_dot_product_attention_with(key, value, attn_mask, dropout_p, is_causal, false)
    }

    /// [`Tensor::scaled_dot_product_attention`] with torch's and tinygrad's `enable_gqa`:
    /// grouped-query attention, where the query has a multiple of the key's and value's heads
    /// (dim -3). Each key/value head is repeated (`repeat_interleave` on dim -3) to serve its
    /// group of query heads.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// // 4 query heads share 2 key/value heads
    /// let q = Tensor::ones(&[1, 4, 2, 3], DType::FLOAT32);
    /// let k = Tensor::ones(&[1, 2, 3, 3], DType::FLOAT32);
    /// let v = Tensor::arange(0.0, 12.0, 1.0).reshape(&[1, 2, 3, 2]);
    /// let o = q.scaled_dot_product_attention_with(&k, &v, None, 0.0, false, true);
    /// assert_eq!(o.shape(), vec![1, 4, 2, 2]);
    /// // equal scores: each output is the mean of its head's values
    /// let want = [2.0f32, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 8.0, 9.0, 8.0, 9.0, 8.0, 9.0, 8.0, 9.0];
    /// assert_eq!(o.to_vec::<f32>(), want);
    /// ```
    ///
    /// # Panics
    /// If both `attn_mask` and `is_causal` are given, or the shapes don't fit: query `(..., L,
    /// d)`, key `(..., S, d)`, value `(..., S, dv)` with broadcasting batch dims; with
    /// `enable_gqa` the query's heads must be a multiple of the key's and value's.
    pub fn scaled_dot_product_attention_with(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        dropout_p: f64,
        is_causal: bool,
        enable_gqa: bool,
    ) -> Tensor {
        const OP: &str = "scaled_dot_product_attention";
        let (qs, ks, vs) = (self.shape(), key.shape(), value.shape());
        let shapes = format!("query {qs:?}, key {ks:?}, value {vs:?}");
        assert!(
            qs.len() >= 2 && ks.len() >= 2 && vs.len() >= 2,
            "{OP}: query, key and value need at least 2 dims (L x d), got {shapes}"
        );
        let (mut key, mut value) = (key.clone(), value.clone());
        if enable_gqa && qs.len() >= 3 && ks.len() >= 3 && vs.len() >= 3 {
            let (hq, hk, hv) = (qs[qs.len() - 3], ks[ks.len() - 3], vs[vs.len() - 3]);
            assert!(
                hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0,
                "{OP}: with enable_gqa the query's {hq} heads (dim -3) must be a multiple of \
                 the key's {hk} and the value's {hv}: {shapes}"
            );
            key = key.repeat_interleave(hq / hk, Some(-3));
            value = value.repeat_interleave(hq / hv, Some(-3));
        }
        // checked here, on the user's shapes, so that errors name this op and not the matmul
        // or mul it is built from
        let (ks2, vs2) = (key.shape(), value.shape());
        assert!(
            qs[qs.len() - 1] == ks2[ks2.len() - 1],
            "{OP}: query and key need the same last dim (d), got {shapes}"
        );
        assert!(
            ks2[ks2.len() - 2] == vs2[vs2.len() - 2],
            "{OP}: key and value need the same length (dim -2), got {shapes}"
        );
        let batch = |s: &[usize]| s[..s.len() - 2].to_vec();
        let qk_batch = crate::broadcast_shape(&batch(&qs), &batch(&ks2));
        assert!(
            qk_batch
                .as_ref()
                .is_some_and(|b| crate::broadcast_shape(b, &batch(&vs2)).is_some()),
            "{OP}: batch dims (all but the last two) don't broadcast: {shapes}{}",
            if enable_gqa || qs.len() < 3 || ks.len() < 3 || qs[qs.len() - 3] == ks[ks.len() - 3] {
                ""
            } else {
                " (query heads differing from key heads need enable_gqa)"
            }
        );
        let key = &key;
        let value = &value;
        let d = qs[qs.len() - 1];
        let q = self.as_float();
        let qk = q.matmul(&key.transpose(-2, -1)) / (d as f64).sqrt();
        let mask = if is_causal {
            assert!(
                attn_mask.is_none(),
                "scaled_dot_product_attention: cannot set attn_mask when is_causal=True"
            );
            let s = qk.shape();
            let (l, m) = (s[s.len() - 2], s[s.len() - 1]);
            let rows = Tensor::nn_ramp(l, DType::INT32, self.device()).reshape_exact(&[l, 1]);
            let cols = Tensor::nn_ramp(m, DType::INT32, self.device()).reshape_exact(&[1, m]);
            Some(cols.le(&rows))
        } else {
            attn_mask.cloned()
        };
        let qk = match mask {
            None => qk,
            Some(m) if m.dtype().is_bool() => qk + m.where_(0.0, f64::NEG_INFINITY),
            Some(m) => qk + m,
        };
        let w = qk.softmax(-1);
        let w = if dropout_p > 0.0 {
            w.dropout(dropout_p)
        } else {
            w
        };
        w.matmul(value)
    }
}
