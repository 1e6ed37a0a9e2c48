//! A large convolution's padded input on the CPU: the input computed unpadded (an elementwise
//! kernel without bounds tests), then padded by the runtime's native copy
//! ([`tinygrad_runtime::pad`]) instead of one IR kernel whose every element is a gated load.

use tinygrad_dtype::DType;
use tinygrad_runtime::get_device;
use tinygrad_runtime::pad::{self, PadPlanes, pad_ast, pad_node};
use tinygrad_uop::custom_gradient;

use crate::Tensor;

impl Tensor {
    /// `self` (`(bs, c, h, w)` float32 on a CPU device) zero-padded by `pads` (rows, columns;
    /// before and after) and realized-to-be through the native kernel, or `None` where it does
    /// not apply (another rank, dtype or device, negative or no padding, `CPU_PAD=0`). Its
    /// gradient is the upstream gradient without the padding.
    // YOLOv8n 320 37.4 -> 35.6 ms on the Xeon (see docs/performance.md)
    pub(super) fn padded_natively(&self, pads: &[(isize, isize)]) -> Option<Tensor> {
        let xs = self.shape();
        if xs.len() != 4
            || pads.len() != 2
            || self.dtype() != DType::FLOAT32
            || pads.iter().any(|&(a, b)| a < 0 || b < 0)
            || pads.iter().all(|&(a, b)| a == 0 && b == 0)
            || xs.contains(&0)
            || !pad::enabled()
            || !get_device(self.device()).is_ok_and(|d| d.name().starts_with("CPU"))
        {
            return None;
        }
        let (bs, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let p = |v: isize| v as usize;
        let spec = PadPlanes::new(
            bs * c,
            h,
            w,
            [p(pads[0].0), p(pads[0].1), p(pads[1].0), p(pads[1].1)],
        );
        let dev = self.device().to_string();
        let flat = self
            .contiguous()
            .reshape(&[(bs * c) as isize, h as isize, w as isize]);
        let node = pad_node(&pad_ast(spec), flat.detach().uop());
        let out_shape = [
            bs as isize,
            c as isize,
            spec.out_h() as isize,
            spec.out_w() as isize,
        ];
        let value = Tensor::from_uop(node, &dev).reshape(&out_shape);
        if !Tensor::is_grad_enabled() {
            return Some(value);
        }
        let interior = [
            (0, bs),
            (0, c),
            (p(pads[0].0), p(pads[0].0) + h),
            (p(pads[1].0), p(pads[1].0) + w),
        ];
        let node = custom_gradient(&value.uop(), &[self.uop()], "pad", move |g, _| {
            let gx = Tensor::from_uop(g.clone(), &dev).shrink(&interior);
            vec![None, Some(gx.uop())]
        });
        Some(value.with_uop(node))
    }
}
