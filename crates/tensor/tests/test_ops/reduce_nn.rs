//! The reductions and nn ops of the replay (a second file of [`super::dispatch`]'s `method`).

use tinygrad_tensor::{Dims, InterpolateMode, Tensor};

use super::dispatch::{Call, Out};

impl Call<'_, '_> {
    /// Reductions, ordering and nn ops called on `t`; `None` for any other op.
    #[allow(clippy::too_many_lines)]
    pub(super) fn reduce_or_nn(&self, t: &Tensor) -> Option<Out> {
        let pair = |(a, b): (Tensor, Tensor)| Some(Out::Many(vec![a, b]));
        let r = match self.op {
            // ---- reductions
            "sum" | "prod" => {
                let (axis, keep, dtype) = (
                    self.axis(0, "axis"),
                    self.flag(1, "keepdim", false),
                    self.dtype(2, "dtype"),
                );
                if self.op == "sum" {
                    t.sum_with(axis, keep, dtype)
                } else {
                    t.prod_with(axis, keep, dtype)
                }
            }
            "mean" => t.mean_with(
                self.axis(0, "axis"),
                self.flag(1, "keepdim", false),
                self.dtype(2, "dtype"),
            ),
            "max" | "min" | "any" | "all" | "logsumexp" => {
                let (axis, keep) = (self.axis(0, "axis"), self.flag(1, "keepdim", false));
                match (self.op, keep) {
                    ("max", false) => t.max(axis),
                    ("max", true) => t.max_keepdim(axis),
                    ("min", false) => t.min(axis),
                    ("min", true) => t.min_keepdim(axis),
                    ("any", false) => t.any(axis),
                    ("any", true) => t.any_keepdim(axis),
                    ("all", false) => t.all(axis),
                    ("all", true) => t.all_keepdim(axis),
                    ("logsumexp", false) => t.logsumexp(axis),
                    (_, _) => t.logsumexp_keepdim(axis),
                }
            }
            "std" | "var" | "std_mean" | "var_mean" => {
                let (axis, keep) = (self.axis(0, "axis"), self.flag(1, "keepdim", false));
                let correction = self.int(2, "correction", 1) as usize;
                match (self.op, keep) {
                    ("std", false) => t.std(axis, correction),
                    ("std", true) => t.std_keepdim(axis, correction),
                    ("var", false) => t.var(axis, correction),
                    ("var", true) => t.var_keepdim(axis, correction),
                    ("std_mean", _) => return pair(t.std_mean(axis, correction, keep)),
                    _ => return pair(t.var_mean(axis, correction, keep)),
                }
            }
            "argmax" | "argmin" => {
                let axis = self.opt_int(0, "axis").map(|a| a as isize);
                match (self.op, self.flag(1, "keepdim", false)) {
                    ("argmax", false) => t.argmax(axis),
                    ("argmax", true) => t.argmax_keepdim(axis),
                    ("argmin", false) => t.argmin(axis),
                    _ => t.argmin_keepdim(axis),
                }
            }
            "softmax" | "log_softmax" | "softmin" => {
                let axis = self.int(0, "axis", -1) as isize;
                let x = match self.dtype(1, "dtype") {
                    Some(d) => t.cast(d),
                    None => t.clone(),
                };
                match self.op {
                    "softmax" => x.softmax(axis),
                    "log_softmax" => x.log_softmax(axis),
                    _ => x.softmin(axis),
                }
            }
            "cumsum" => t.cumsum(self.int(0, "axis", 0) as isize),
            "cumprod" => t.cumprod(self.int(0, "axis", 0) as isize),
            "logcumsumexp" => t.logcumsumexp(self.int(0, "axis", 0) as isize),
            "cummax" => return pair(t.cummax(self.int(0, "axis", 0) as isize)),
            "cummin" => return pair(t.cummin(self.int(0, "axis", 0) as isize)),
            "sort" => {
                return pair(t.sort(
                    self.int(0, "dim", -1) as isize,
                    self.flag(1, "descending", false),
                ));
            }
            "argsort" => t.argsort(
                self.int(0, "dim", -1) as isize,
                self.flag(1, "descending", false),
            ),
            "topk" => {
                return pair(t.topk(
                    self.size(0, "k", 1),
                    self.int(1, "dim", -1) as isize,
                    self.flag(2, "largest", true),
                    self.flag(3, "sorted_", true),
                ));
            }
            // ---- nn
            "conv2d" => t.conv2d(
                &self.t(0, "weight"),
                self.opt_t(1, "bias").as_ref(),
                self.int(2, "groups", 1) as usize,
                self.dims(3, "stride", Dims::All(1)),
                self.dims(4, "dilation", Dims::All(1)),
                self.padding(5, "padding"),
            ),
            "conv_transpose2d" => t.conv_transpose2d(
                &self.t(0, "weight"),
                self.opt_t(1, "bias").as_ref(),
                self.int(2, "groups", 1) as usize,
                self.dims(3, "stride", Dims::All(1)),
                self.dims(4, "dilation", Dims::All(1)),
                self.padding(5, "padding"),
                self.dims(6, "output_padding", Dims::All(0)),
            ),
            "avg_pool2d" => t.avg_pool2d(
                self.dims(0, "kernel_size", Dims::Each(vec![2, 2])),
                self.dims(1, "stride", Dims::Default),
                self.dims(2, "dilation", Dims::All(1)),
                self.padding(3, "padding"),
                self.flag(4, "ceil_mode", false),
                self.flag(5, "count_include_pad", true),
            ),
            "max_pool2d" => {
                let args = (
                    self.dims(0, "kernel_size", Dims::Each(vec![2, 2])),
                    self.dims(1, "stride", Dims::Default),
                    self.dims(2, "dilation", Dims::All(1)),
                    self.padding(3, "padding"),
                    self.flag(4, "ceil_mode", false),
                );
                if self.flag(5, "return_indices", false) {
                    return pair(t.max_pool2d_with_indices(args.0, args.1, args.2, args.3, args.4));
                }
                t.max_pool2d(args.0, args.1, args.2, args.3, args.4)
            }
            "max_unpool2d" => {
                let size = self.arg(5, "output_size").map(|v| {
                    self.ints_of(v)
                        .iter()
                        .map(|&x| x as usize)
                        .collect::<Vec<usize>>()
                });
                t.max_unpool2d(
                    &self.t(0, "indices"),
                    self.dims(1, "kernel_size", Dims::Each(vec![2, 2])),
                    self.dims(2, "stride", Dims::Default),
                    self.dims(3, "dilation", Dims::All(1)),
                    self.padding(4, "padding"),
                    size.as_deref(),
                )
            }
            "interpolate" => {
                let size = self.sizes_of(self.arg(0, "size").expect("size"));
                let mode = match self.string(1, "mode", "linear") {
                    "linear" | "bilinear" | "trilinear" => InterpolateMode::Linear,
                    "nearest" => InterpolateMode::Nearest,
                    "nearest-exact" => InterpolateMode::NearestExact,
                    other => panic!("interpolate: mode {other:?}"),
                };
                t.interpolate(&size, mode, self.flag(2, "align_corners", false))
            }
            "scaled_dot_product_attention" => t.scaled_dot_product_attention_with(
                &self.t(0, "key"),
                &self.t(1, "value"),
                self.opt_t(2, "attn_mask").as_ref(),
                self.float(3, "dropout_p", 0.0),
                self.flag(4, "is_causal", false),
                self.flag(5, "enable_gqa", false),
            ),
            "normalize" => t.normalize(
                self.float(0, "p", 2.0),
                self.int(1, "dim", 1) as isize,
                self.float(2, "eps", 1e-12),
            ),
            "binary_crossentropy" => t.binary_crossentropy(&self.t(0, "Y"), self.reduction(1)),
            "binary_crossentropy_logits" => t.binary_crossentropy_logits(
                &self.t(0, "Y"),
                self.reduction(1),
                self.opt_t(2, "pos_weight").as_ref(),
            ),
            "sparse_categorical_crossentropy" => t.sparse_categorical_crossentropy(
                &self.t(0, "Y"),
                self.int(1, "ignore_index", -1),
                self.float(2, "label_smoothing", 0.0),
                self.reduction(3),
            ),
            "cross_entropy" => t.cross_entropy(
                &self.t(0, "Y"),
                self.reduction(1),
                self.float(2, "label_smoothing", 0.0),
            ),
            "nll_loss" => t.nll_loss(
                &self.t(0, "Y"),
                self.opt_t(1, "weight").as_ref(),
                self.opt_int(2, "ignore_index"),
                self.reduction(3),
            ),
            _ => return None,
        };
        Some(Out::T(r))
    }
}
