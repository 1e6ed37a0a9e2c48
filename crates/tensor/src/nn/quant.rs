//! [`QuantizedTensor`]: a weight matrix kept as GGUF's quantized blocks in device memory
//! (tinygrad's `tinygrad/llm` and llama.cpp keep them so too), and its product with float32
//! activations.
//!
//! [`QuantizedTensor::linear`] computes `x @ w.T` for `x` of `[..., cols]`:
//! - on a CPU device, for at most [`QuantizedTensor::native_rows`] rows of `x` (decoding a
//!   token, a batch of sequences, a short prompt), with the
//!   runtime's native loops over the blocks ([`tinygrad_runtime::quant`]): a kernel of its own
//!   that reads each block once, dequantizing it in registers;
//! - otherwise (more rows: a prompt; or another device) the weight is dequantized and
//!   multiplied: into a float32 buffer first when `x` has many rows
//!   ([`QuantizedTensor::dequantized`]: the CPU's native loops, so its GEMM path takes the
//!   product), or by tensor ops on the blocks fused into the product's kernel
//!   ([`QuantizedTensor::dequantize`], the IR route of every device).
//!
//! The dequantized weights are `gguf.quants`' values bit for bit (on both routes); the
//! products differ from each other and from dequantize-then-matmul within float32 rounding (the
//! order of the sums; the native AVX-512 tiles fuse `d * q + m` into one rounding).

pub use tinygrad_runtime::quant::QuantType;
use tinygrad_runtime::quant::{quant_dequantize_ast, quant_matmul_ast};
use tinygrad_runtime::{Buffer, DeviceError, get_device, run_schedule};
use tinygrad_schedule::{ScheduleItem, is_buffer_view};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::Tensor;
use crate::tensor::view_buffer;
use tinygrad_dtype::DType;

/// Rows of `x` up to which a CPU product takes the native loops (a decode step's one token, a
/// few sequences): beyond, dequantizing once and a GEMM is faster. Where the CPU runs the
/// AVX-512 tiles, every block type takes them up to [`MAX_NATIVE_ROWS`]
/// ([`QuantizedTensor::native_rows`]).
// SmolLM2 Q4_1 decode 39.2 -> 74.2 tokens/s on Zen 4 (see docs/performance.md)
pub const NATIVE_ROWS: usize = tinygrad_runtime::quant::NATIVE_ROWS;

/// The most rows of `x` any CPU product takes the native loops for.
pub const MAX_NATIVE_ROWS: usize = tinygrad_runtime::quant::TILED_NATIVE_ROWS;

/// A `[rows, cols]` weight held as quantized blocks: `blocks` is `[rows, row_bytes]` `UINT8`
/// (each row `cols / block` blocks of GGUF type `ty`), realized on its device.
#[derive(Clone, Debug)]
pub struct QuantizedTensor {
    /// The blocks, `[rows, cols / ty.block() * ty.block_bytes()]` bytes.
    pub blocks: Tensor,
    /// The block type.
    pub ty: QuantType,
    /// Rows of the weight.
    pub rows: usize,
    /// Columns of the weight (a multiple of the type's block).
    pub cols: usize,
}

impl QuantizedTensor {
    /// The weight of `rows x cols` in the blocks `raw` (exactly `rows * cols / block *
    /// block_bytes` bytes), on `device`.
    ///
    /// # Panics
    /// If `cols` is not a multiple of the type's block or `raw` has another length (the GGUF
    /// loader checks both first and reports an `Err`).
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// assert_eq!((w.shape(), w.blocks.shape()), (vec![2, 32], vec![2, 34]));
    /// ```
    pub fn from_blocks(raw: &[u8], ty: QuantType, rows: usize, cols: usize, device: &str) -> Self {
        assert!(
            cols.is_multiple_of(ty.block()),
            "QuantizedTensor::from_blocks: {} columns are not a multiple of the {}-weight {} block",
            cols,
            ty.block(),
            ty.name()
        );
        let row_bytes = cols / ty.block() * ty.block_bytes();
        assert_eq!(
            raw.len(),
            rows * row_bytes,
            "QuantizedTensor::from_blocks: {rows} x {cols} {} weights take {} bytes",
            ty.name(),
            rows * row_bytes
        );
        let blocks = Tensor::from_bytes(raw, DType::UINT8, &[rows, row_bytes], device);
        blocks.realize();
        QuantizedTensor {
            blocks,
            ty,
            rows,
            cols,
        }
    }

    /// Bytes of one row's blocks.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// assert_eq!(w.row_bytes(), 34);
    /// ```
    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block() * self.ty.block_bytes()
    }

    /// The shape `[rows, cols]`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// assert_eq!(w.shape(), vec![2, 32]);
    /// ```
    pub fn shape(&self) -> Vec<usize> {
        vec![self.rows, self.cols]
    }

    /// The device.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// assert_eq!(w.device(), "CPU");
    /// ```
    pub fn device(&self) -> &str {
        self.blocks.device()
    }

    /// The same weight with its rows rearranged by `f`, a function of a `[rows, row_bytes]`
    /// tensor that moves whole rows (reshapes, permutes and shrinks of the row axis) and
    /// returns `[new_rows, row_bytes]`; realized into blocks of their own.
    ///
    /// # Panics
    /// If `f` changes the row length.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// let swapped = w.map_rows(|b| b.flip(&[0]));
    /// assert_eq!(swapped.dequantize().to_vec::<f32>()[..2], [-8.0, -7.5]);
    /// ```
    pub fn map_rows(&self, f: impl FnOnce(&Tensor) -> Tensor) -> QuantizedTensor {
        let blocks = f(&self.blocks).contiguous();
        let s = blocks.shape();
        assert!(
            s.len() == 2 && s[1] == self.row_bytes(),
            "QuantizedTensor::map_rows: the rows became {s:?}, not [_, {}]",
            self.row_bytes()
        );
        blocks.realize();
        QuantizedTensor {
            rows: s[0],
            blocks,
            ty: self.ty,
            cols: self.cols,
        }
    }

    /// Rows `lo..hi` (a fused projection's part).
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// let second = w.rows_range(1, 2);
    /// assert_eq!(second.shape(), vec![1, 32]);
    /// assert_eq!(second.dequantize().to_vec::<f32>()[31], 7.5);
    /// ```
    pub fn rows_range(&self, lo: usize, hi: usize) -> QuantizedTensor {
        let rb = self.row_bytes();
        self.map_rows(|b| b.shrink(&[(lo, hi), (0, rb)]))
    }

    /// The blocks as a realized buffer view (realized, or copied into a buffer of their own,
    /// when they are not one: the fields are public).
    ///
    /// # Panics
    /// If the blocks are not `[rows, row_bytes]` `UINT8`.
    fn blocks_buffer(&self) -> Result<UOp, DeviceError> {
        assert!(
            self.blocks.dtype() == DType::UINT8
                && self.blocks.shape() == [self.rows, self.row_bytes()],
            "QuantizedTensor: blocks of {} {:?}, expected uint8 [{}, {}] for {} x {} {} weights",
            self.blocks.dtype(),
            self.blocks.shape(),
            self.rows,
            self.row_bytes(),
            self.rows,
            self.cols,
            self.ty.name()
        );
        let u = self.blocks.uop();
        if is_buffer_view(&u) {
            return Ok(u);
        }
        let c = self.blocks.contiguous();
        c.try_realize()?;
        Ok(c.uop())
    }

    /// The weight as `[rows, cols]` float32, lazily: tensor ops on the blocks, bit-exact with
    /// `gguf.quants.dequantize` (an `Embedding` over it reads only the rows it selects).
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// let v = w.dequantize().to_vec::<f32>();
    /// assert_eq!((v[1], v[31], v[32], v[63]), (1.0, 31.0, -8.0, 7.5));
    /// ```
    pub fn dequantize(&self) -> Tensor {
        let nb = self.rows * self.cols / self.ty.block();
        let blocks = self
            .blocks
            .reshape(&[nb as isize, self.ty.block_bytes() as isize]);
        super::gguf::dequantize(&blocks, self.ty.name(), nb, self.device())
            .reshape(&[self.rows as isize, self.cols as isize])
    }

    /// The weight dequantized into a `[rows, cols]` float32 buffer of its own (what a GEMM
    /// multiplies): on a CPU device by the runtime's native loops, at once; elsewhere lazily,
    /// [`QuantizedTensor::dequantize`] made contiguous. Bit-exact with `gguf.quants` either way.
    ///
    /// # Errors
    /// If the device fails.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// let d = w.dequantized().unwrap();
    /// assert_eq!(d.to_vec::<f32>(), w.dequantize().to_vec::<f32>());
    /// ```
    pub fn dequantized(&self) -> Result<Tensor, DeviceError> {
        let dev = get_device(self.device())?;
        if !dev.name().starts_with("CPU") || !tinygrad_runtime::quant::enabled() {
            return Ok(self.dequantize().contiguous());
        }
        let bu = self.blocks_buffer()?;
        let out = Buffer::new(dev.name(), DType::FLOAT32, self.rows * self.cols).uop();
        let item = ScheduleItem {
            ast: quant_dequantize_ast(self.ty, self.rows, self.cols),
            bufs: vec![out.clone(), flat_buffer(&bu)],
        };
        run_schedule(dev.as_ref(), &[item])?;
        Ok(Tensor::from_uop(out, dev.name()).reshape(&[self.rows as isize, self.cols as isize]))
    }

    /// Rows of `x` up to which [`QuantizedTensor::linear`] takes the native loops on a CPU
    /// device: [`MAX_NATIVE_ROWS`] on a CPU with the AVX-512 tiles, else [`NATIVE_ROWS`].
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{MAX_NATIVE_ROWS, NATIVE_ROWS, QuantType, QuantizedTensor};
    /// let w = QuantizedTensor::from_blocks(&[0u8; 34], QuantType::Q8_0, 1, 32, "CPU");
    /// assert!([NATIVE_ROWS, MAX_NATIVE_ROWS].contains(&w.native_rows()));
    /// ```
    pub fn native_rows(&self) -> usize {
        tinygrad_runtime::quant::native_rows(self.ty)
    }

    /// `x @ w.T` for `x` of `[..., cols]` (any float dtype, computed in float32):
    /// `[..., rows]` float32, a kernel of its own (see the module docs for the two routes).
    ///
    /// # Errors
    /// If the device fails (the native route realizes `x` and runs its kernel at once).
    ///
    /// # Panics
    /// If `x`'s last dimension is not `cols`, or `x` is on another device.
    ///
    /// ```
    /// use tinygrad_tensor::nn::quant::{QuantType, QuantizedTensor};
    /// // two Q8_0 rows of 32 weights: an f16 scale, then 32 signed bytes
    /// let mut raw = vec![];
    /// for (scale, first) in [(0x3C00u16, 0i8), (0x3800, -16)] { // 1.0 and 0.5
    ///     raw.extend(scale.to_le_bytes());
    ///     raw.extend((0..32).map(|j| (first + j as i8) as u8));
    /// }
    /// let w = QuantizedTensor::from_blocks(&raw, QuantType::Q8_0, 2, 32, "CPU");
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::ones(&[1, 32], tinygrad_tensor::DType::FLOAT32);
    /// // sums of each row: 0 + 1 + ... + 31, and 0.5 * (-16 + ... + 15)
    /// assert_eq!(w.linear(&x).unwrap().to_vec::<f32>(), vec![496.0, -8.0]);
    /// ```
    pub fn linear(&self, x: &Tensor) -> Result<Tensor, DeviceError> {
        let s = x.shape();
        assert!(
            s.last() == Some(&self.cols) && x.device() == self.device(),
            "QuantizedTensor::linear: x of shape {s:?} on {} against a {} x {} {} weight on {}",
            x.device(),
            self.rows,
            self.cols,
            self.ty.name(),
            self.device()
        );
        let m: usize = s[..s.len() - 1].iter().product();
        let mut out_shape: Vec<isize> = s[..s.len() - 1].iter().map(|&d| d as isize).collect();
        out_shape.push(self.rows as isize);
        let x = if x.dtype() == DType::FLOAT32 {
            x.clone()
        } else {
            x.cast(DType::FLOAT32)
        };
        let native = m > 0
            && m <= self.native_rows()
            && get_device(x.device())?.name().starts_with("CPU")
            && tinygrad_runtime::quant::enabled();
        if !native {
            let w = if m > NATIVE_ROWS {
                self.dequantized()?
            } else {
                self.dequantize()
            };
            // (a kernel of its own, as the native route's is)
            return Ok(x.matmul(&w.t()).contiguous());
        }
        let x2 = x.reshape(&[m as isize, self.cols as isize]);
        let x2 = if is_buffer_view(&x2.uop()) {
            x2
        } else {
            let c = x2.contiguous();
            c.try_realize()?;
            c
        };
        let (xu, bu) = (x2.uop(), self.blocks_buffer()?);
        debug_assert!(view_buffer(&xu).is_some(), "x is a realized buffer view");
        let dev = get_device(x.device())?;
        let out = Buffer::new(dev.name(), DType::FLOAT32, m * self.rows).uop();
        let item = ScheduleItem {
            ast: quant_matmul_ast(self.ty, m, self.rows, self.cols),
            bufs: vec![out.clone(), flat_buffer(&bu), flat_buffer(&xu)],
        };
        run_schedule(dev.as_ref(), &[item])?;
        Ok(Tensor::from_uop(out, dev.name()).reshape(&out_shape))
    }
}

/// The `Buffer` UOp under a buffer view's reshapes.
pub(crate) fn flat_buffer(u: &UOp) -> UOp {
    let mut b = u.clone();
    while b.op() == Ops::Reshape {
        b = b.s(0).clone();
    }
    debug_assert!(b.op() == Ops::Buffer && matches!(b.arg(), Arg::Buffer(..)));
    b
}
