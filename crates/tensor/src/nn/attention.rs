//! [`slot_attention`]: a decode step's attention over KV cache slots as one native CPU kernel
//! ([`tinygrad_runtime::attention`]) instead of the five or six IR kernels of scores, softmax
//! and weighted values: what a server decoding several sequences at once runs in every block;
//! and [`exp_nonpositive`], its float32 exponential (the same bits on every machine).

use tinygrad_dtype::DType;
pub use tinygrad_runtime::attention::exp_nonpositive;
use tinygrad_runtime::attention::slot_attention_ast;
use tinygrad_runtime::{Buffer, DeviceError, get_device, run_schedule};
use tinygrad_schedule::{ScheduleItem, is_buffer_view};
use tinygrad_uop::UOp;

use super::quant::flat_buffer;
use crate::Tensor;

/// Whether [`slot_attention`] runs on `device`: a CPU device, with the native kernel on
/// (`CPU_ATTENTION` not `0`). Elsewhere, compute the attention with tensor ops.
///
/// ```
/// use tinygrad_tensor::nn::attention::slot_attention_runs_on;
/// assert!(!slot_attention_runs_on("NO_SUCH_DEVICE"));
/// ```
pub fn slot_attention_runs_on(device: &str) -> bool {
    tinygrad_runtime::attention::enabled()
        && get_device(device).is_ok_and(|d| d.name().starts_with("CPU"))
}

/// One decode step's attention over KV cache slots: batch row `i` of the queries `q`
/// `(rows, heads, 1, head_dim)` attends over slot `i` of `keys` and `values` `(slots,
/// kv_heads, context, head_dim)` at its positions `0..=pos[i]` (`pos`: `(rows,)` int32; with a
/// `window`, only the last `window` of them), the query heads grouped over the key/value heads:
/// `softmax(scale * q . k) @ v`, `(rows, heads, 1, head_dim)` float32. One kernel for every row
/// and head; each row's result is the same bit for bit whatever the other rows, and within
/// float32 rounding of the tensor-op form (the exponentials are a polynomial's, the sums in a
/// fixed order).
///
/// # Errors
/// If the device fails (inputs that are not buffers yet are realized first).
///
/// # Panics
/// If the device is not one [`slot_attention_runs_on`], a dtype or shape is not as above
/// (`heads` a multiple of `kv_heads`, at most as many rows as slots), the window is 0, or the
/// tensors are on different devices. A position outside `0..context` gives NaN for its row.
///
/// ```
/// use tinygrad_tensor::nn::attention::{slot_attention, slot_attention_runs_on};
/// use tinygrad_tensor::Tensor;
/// if slot_attention_runs_on("CPU") {
///     // one row, one head of 2 values; equal keys: the mean of the values at positions 0..=1
///     let q = Tensor::from_slice(&[1.0f32, 0.0], &[1, 1, 1, 2]);
///     let keys = Tensor::from_slice(&[0.5f32; 6], &[1, 1, 3, 2]);
///     let values = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 9.0, 9.0], &[1, 1, 3, 2]);
///     let pos = Tensor::from_slice(&[1i32], &[1]);
///     let out = slot_attention(&q, &keys, &values, &pos, None, 1.0).unwrap();
///     assert_eq!(out.shape(), vec![1, 1, 1, 2]);
///     assert_eq!(out.to_vec::<f32>(), vec![2.0, 3.0]);
/// }
/// ```
pub fn slot_attention(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    pos: &Tensor,
    window: Option<usize>,
    scale: f64,
) -> Result<Tensor, DeviceError> {
    let (qs, ks) = (q.shape(), keys.shape());
    let dev = q.device();
    assert!(
        slot_attention_runs_on(dev),
        "slot_attention: runs on a CPU device with CPU_ATTENTION on, not {dev}"
    );
    assert!(
        [keys, values, pos].iter().all(|t| t.device() == dev),
        "slot_attention: q is on {dev}, keys on {}, values on {}, positions on {}",
        keys.device(),
        values.device(),
        pos.device()
    );
    let shapes_fit = qs.len() == 4
        && qs[2] == 1
        && ks.len() == 4
        && values.shape() == ks
        && qs[3] == ks[3]
        && ks[1] > 0
        && qs[1] % ks[1] == 0
        && qs[0] <= ks[0]
        && pos.shape() == [qs[0]];
    assert!(
        shapes_fit
            && [q, keys, values]
                .iter()
                .all(|t| t.dtype() == DType::FLOAT32)
            && pos.dtype() == DType::INT32
            && window != Some(0)
            && qs.iter().chain(&ks).all(|&n| n > 0),
        "slot_attention: q {} {qs:?}, keys {} {ks:?}, values {} {:?}, positions {} {:?}, window \
         {window:?}: expected float32 q (rows, heads, 1, head_dim), keys and values (slots, \
         kv_heads, context, head_dim) with kv_heads dividing heads and rows <= slots, int32 \
         positions (rows,), a window of at least 1",
        q.dtype(),
        keys.dtype(),
        values.dtype(),
        values.shape(),
        pos.dtype(),
        pos.shape()
    );
    let (rows, heads, hd) = (qs[0], qs[1], qs[3]);
    let buffer = |t: &Tensor| -> Result<UOp, DeviceError> {
        let u = t.uop();
        if is_buffer_view(&u) {
            return Ok(flat_buffer(&u));
        }
        let c = t.contiguous();
        c.try_realize()?;
        Ok(flat_buffer(&c.uop()))
    };
    let ins = [buffer(q)?, buffer(keys)?, buffer(values)?, buffer(pos)?];
    let device = get_device(dev)?;
    let out = Buffer::new(device.name(), DType::FLOAT32, rows * heads * hd).uop();
    let ast = slot_attention_ast(rows, heads, ks[1], hd, ks[0], ks[2], window, scale as f32);
    let mut bufs = vec![out.clone()];
    bufs.extend(ins);
    run_schedule(device.as_ref(), &[ScheduleItem { ast, bufs }])?;
    Ok(Tensor::from_uop(out, device.name()).reshape(&[
        rows as isize,
        heads as isize,
        1,
        hd as isize,
    ]))
}
