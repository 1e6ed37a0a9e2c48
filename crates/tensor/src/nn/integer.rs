//! 8-bit integer matrix products accumulated exactly in int32: [`matmul_integer`] (ONNX's
//! `MatMulInteger`; PyTorch's `torch._int_mm` with zero points) and [`Int8Weight`], a weight
//! prepared once for many products (onnxruntime packs its constant weights the same way).
//!
//! On a CPU device (with `CPU_INT8` not `0`) the products are the runtime's native kernels
//! ([`tinygrad_runtime::int_matmul`]: AVX-512 VNNI or AVX2 tiles over a packed weight, a
//! portable loop elsewhere) as lazy `Native` nodes of the graph: the scheduler realizes their
//! inputs and launches them within the rest of the schedule (so a `Jit` captures them). Elsewhere — other devices, a batched `b` — they
//! are float32 GEMMs over runs of `k` short enough that every sum stays below 2^24 (exact in
//! float32), the runs summed in int32. Both routes give the same int32 bits.

use tinygrad_dtype::DType;
use tinygrad_runtime::int_matmul::{
    self, Layout, ZeroPoint, int_matmul_ast, int_pack_ast, native_node,
};
use tinygrad_runtime::{DeviceError, get_device};

use crate::Tensor;

/// `a @ b` of 8-bit integers (`uint8` or `int8` each) with zero points, exactly, as int32:
/// `sum_p (a[.., i, p] - a_zero_point) * (b[.., p, j] - b_zero_point)` (ONNX's
/// `MatMulInteger`). `a_zero_point` is a scalar or one per row of `a` (its second-to-last
/// dim), `b_zero_point` a scalar or one per column of `b`, each of its tensor's dtype;
/// shapes broadcast as [`Tensor::matmul`]'s. Lazy, as every op: `b` is packed within the
/// product's schedule (use an [`Int8Weight`] to pack a weight once for many products).
///
/// # Panics
/// If a dtype is not `uint8`/`int8`, a zero point's dtype is not its tensor's or its shape
/// not as above, or the shapes do not multiply.
///
/// ```
/// use tinygrad_tensor::nn::integer::matmul_integer;
/// use tinygrad_tensor::Tensor;
/// let a = Tensor::from_slice(&[1u8, 2, 3, 4], &[2, 2]);
/// let b = Tensor::from_slice(&[-1i8, 2, 3, -4], &[2, 2]);
/// let za = Tensor::from_slice(&[1u8], &[]);
/// let y = matmul_integer(&a, &b, Some(&za), None);
/// // (a - 1) @ b = [[0, 1], [2, 3]] @ [[-1, 2], [3, -4]]
/// assert_eq!(y.to_vec::<i32>(), vec![3, -4, 7, -8]);
/// ```
pub fn matmul_integer(
    a: &Tensor,
    b: &Tensor,
    a_zero_point: Option<&Tensor>,
    b_zero_point: Option<&Tensor>,
) -> Tensor {
    check_int8("matmul_integer", "a", a, a_zero_point, 0);
    check_int8("matmul_integer", "b", b, b_zero_point, 1);
    // the native kernels: T5-small int8 encoder 18.2 -> ~11 ms on the Xeon (docs/performance.md)
    if b.ndim() == 2 && a.ndim() >= 1 {
        return Int8Weight::lazy(b, b_zero_point).matmul(a, a_zero_point);
    }
    float_route(a, b, a_zero_point, b_zero_point)
}

/// A `[k, n]` 8-bit weight and its zero point, prepared once for many [`Int8Weight::matmul`]s:
/// on a CPU device packed into the layout the CPU's integer multiply-adds read (a kernel run
/// by [`Int8Weight::new`]); elsewhere kept as given.
#[derive(Clone, Debug)]
pub struct Int8Weight {
    b: Tensor,
    zero_point: Option<Tensor>,
    /// The packed weight (`uint8`) and its layout, on the native route.
    packed: Option<(Tensor, Layout)>,
}

impl Int8Weight {
    /// `b` (`[k, n]`, `uint8` or `int8`) with its zero point (a scalar or `n` values of `b`'s
    /// dtype).
    ///
    /// # Errors
    /// If the device fails (on a CPU device `b` is realized and packed at once).
    ///
    /// # Panics
    /// If `b` is not a 2-D 8-bit tensor or the zero point does not fit it.
    ///
    /// ```
    /// use tinygrad_tensor::nn::integer::Int8Weight;
    /// use tinygrad_tensor::Tensor;
    /// let w = Int8Weight::new(&Tensor::from_slice(&[1u8, 2, 3, 4, 5, 6], &[3, 2]), None).unwrap();
    /// assert_eq!((w.k(), w.n()), (3, 2));
    /// ```
    pub fn new(b: &Tensor, zero_point: Option<&Tensor>) -> Result<Int8Weight, DeviceError> {
        let w = Int8Weight::lazy(b, zero_point);
        if let Some((packed, _)) = &w.packed {
            packed.try_realize()?;
        }
        Ok(w)
    }

    /// [`Int8Weight::new`] with the packing left lazy (computed within the first product's
    /// schedule).
    fn lazy(b: &Tensor, zero_point: Option<&Tensor>) -> Int8Weight {
        check_int8("Int8Weight::new", "b", b, zero_point, 1);
        assert!(
            b.ndim() == 2,
            "Int8Weight::new: b of shape {:?}: expected [k, n]",
            b.shape()
        );
        let (k, n) = (b.shape()[0], b.shape()[1]);
        let mut w = Int8Weight {
            b: b.clone(),
            zero_point: zero_point.cloned(),
            packed: None,
        };
        if k == 0 || n == 0 || !native_on(b.device()) {
            return w;
        }
        let layout = int_matmul::native_layout();
        let signed = b.dtype() == DType::INT8;
        let zp = zero_point.map(|z| z.reshape(&[z.numel() as isize]));
        let b_zero = zero_kind(zp.as_ref());
        let b_flat = b.reshape(&[(k * n) as isize]);
        let mut ins = vec![b_flat.uop()];
        ins.extend(zp.map(|z| z.uop()));
        let ast = int_pack_ast(k, n, signed, b_zero, layout);
        let packed = Tensor::from_uop(native_node(&ast, ins), b.device());
        w.packed = Some((packed, layout));
        w
    }

    /// Rows of the weight (the products' shared dim).
    ///
    /// ```
    /// use tinygrad_tensor::nn::integer::Int8Weight;
    /// use tinygrad_tensor::Tensor;
    /// let w = Int8Weight::new(&Tensor::from_slice(&[0i8; 6], &[2, 3]), None).unwrap();
    /// assert_eq!(w.k(), 2);
    /// ```
    pub fn k(&self) -> usize {
        self.b.shape()[0]
    }

    /// Columns of the weight.
    ///
    /// ```
    /// use tinygrad_tensor::nn::integer::Int8Weight;
    /// use tinygrad_tensor::Tensor;
    /// let w = Int8Weight::new(&Tensor::from_slice(&[0i8; 6], &[2, 3]), None).unwrap();
    /// assert_eq!(w.n(), 3);
    /// ```
    pub fn n(&self) -> usize {
        self.b.shape()[1]
    }

    /// `a @ b` as [`matmul_integer`] computes it, `a` of `[.., m, k]` (or `[k]`) 8-bit with
    /// its zero point (a scalar or `m` values of `a`'s dtype); int32 `[.., m, n]` (`[n]`).
    /// Lazy, as every op.
    ///
    /// # Panics
    /// If `a` is not 8-bit, its last dim is not `k`, its zero point does not fit it, or it is
    /// on another device than the weight.
    ///
    /// ```
    /// use tinygrad_tensor::nn::integer::Int8Weight;
    /// use tinygrad_tensor::Tensor;
    /// let w = Int8Weight::new(&Tensor::from_slice(&[1i8, -1, 2, 0], &[2, 2]), None).unwrap();
    /// let a = Tensor::from_slice(&[3u8, 4], &[1, 2]);
    /// assert_eq!(w.matmul(&a, None).to_vec::<i32>(), vec![11, -3]);
    /// ```
    pub fn matmul(&self, a: &Tensor, a_zero_point: Option<&Tensor>) -> Tensor {
        check_int8("Int8Weight::matmul", "a", a, a_zero_point, 0);
        let (k, n) = (self.k(), self.n());
        assert!(
            a.ndim() >= 1 && a.shape()[a.ndim() - 1] == k && a.device() == self.b.device(),
            "Int8Weight::matmul: a of shape {:?} on {} against a {k} x {n} weight on {}: \
             expected [.., m, {k}] on the weight's device",
            a.shape(),
            a.device(),
            self.b.device()
        );
        let Some((packed, layout)) = &self.packed else {
            return float_route(a, &self.b, a_zero_point, self.zero_point.as_ref());
        };
        let s = a.shape();
        let m_per = if s.len() >= 2 { s[s.len() - 2] } else { 1 };
        let m: usize = s[..s.len() - 1].iter().product();
        let mut out_shape: Vec<isize> = s[..s.len() - 1].iter().map(|&d| d as isize).collect();
        out_shape.push(n as isize);
        if m == 0 {
            return float_route(a, &self.b, a_zero_point, self.zero_point.as_ref());
        }
        let a2 = a.reshape(&[m as isize, k as isize]);
        // a per-row zero point repeats over a's leading dims
        let zp = a_zero_point.map(|z| {
            if z.numel() == 1 {
                z.reshape(&[1])
            } else {
                z.reshape(&[1, m_per as isize])
                    .expand(&[(m / m_per) as isize, m_per as isize])
                    .reshape(&[m as isize])
            }
        });
        let a_zero = zero_kind(zp.as_ref());
        let mut ins = vec![a2.uop(), packed.uop()];
        ins.extend(zp.map(|z| z.uop()));
        let ast = int_matmul_ast(m, n, k, a.dtype() == DType::INT8, a_zero, *layout);
        let out = Tensor::from_uop(native_node(&ast, ins), a.device());
        out.reshape(&out_shape)
    }
}

/// Whether the native kernels run on `device`.
fn native_on(device: &str) -> bool {
    int_matmul::enabled() && get_device(device).is_ok_and(|d| d.name().starts_with("CPU"))
}

/// The zero point's kind for its slot.
fn zero_kind(zp: Option<&Tensor>) -> ZeroPoint {
    match zp {
        None => ZeroPoint::None,
        Some(z) if z.numel() == 1 => ZeroPoint::One,
        Some(_) => ZeroPoint::Each,
    }
}

/// Checks that `t` is 8-bit and its zero point `zp` of its dtype, a scalar or one value per
/// row (`axis` 0: `t`'s second-to-last dim) or column (`axis` 1: its last dim).
fn check_int8(op: &str, name: &str, t: &Tensor, zp: Option<&Tensor>, axis: usize) {
    assert!(
        t.dtype() == DType::UINT8 || t.dtype() == DType::INT8,
        "{op}: {name} is {}: expected uint8 or int8",
        t.dtype()
    );
    let Some(z) = zp else { return };
    let s = t.shape();
    let per = match (axis, s.len()) {
        (_, 0) => 1,
        (0, 1) => 1,
        (0, r) => s[r - 2],
        (_, r) => s[r - 1],
    };
    assert!(
        z.dtype() == t.dtype()
            && z.ndim() <= 1
            && (z.numel() == 1 || (z.ndim() == 1 && z.numel() == per)),
        "{op}: {name}'s zero point {} {:?} for {name} {} {s:?}: expected {name}'s dtype, a \
         scalar or {per} values",
        z.dtype(),
        z.shape(),
        t.dtype()
    );
}

/// The float32 GEMM route: `a - za` and `b - zb` as float32 multiplied over runs of `k` short
/// enough that every partial sum stays below 2^24 (exact), the runs summed in int32.
fn float_route(a: &Tensor, b: &Tensor, za: Option<&Tensor>, zb: Option<&Tensor>) -> Tensor {
    let rows = if a.ndim() >= 2 {
        a.shape()[a.ndim() - 2]
    } else {
        1
    };
    let cols = b.shape()[b.ndim() - 1];
    let shifted = |t: &Tensor, z: Option<&Tensor>, view: &[isize]| {
        let t32 = t.cast(DType::INT32);
        match z {
            None => t32,
            Some(z) if z.numel() == 1 => t32 - z.reshape(&[] as &[isize]).cast(DType::INT32),
            Some(z) => t32 - z.reshape(view).cast(DType::INT32),
        }
    };
    let a32 = shifted(a, za, &[rows as isize, 1]);
    let b32 = shifted(b, zb, &[cols as isize]);
    // |a - za| and |b - zb| are at most 255 each
    let terms = (1usize << 24) / (255 * 255);
    integer_matmul(&a32, &b32, terms)
}

/// `a @ b` for int32 tensors of 8-bit differences, exactly: on the float GEMM path in float32,
/// in runs of `terms` products (whose sums stay below 2^24, exact in float32), the runs summed
/// in int32 (an int32 matmul is a loop of scalar kernels).
fn integer_matmul(a: &Tensor, b: &Tensor, terms: usize) -> Tensor {
    let k = a.shape()[a.ndim() - 1];
    if a.ndim() < 2 || b.ndim() < 2 {
        return a.matmul(b);
    }
    let (af, bf) = (a.cast(DType::FLOAT32), b.cast(DType::FLOAT32));
    if k <= terms {
        return af.matmul(&bf).cast(DType::INT32);
    }
    // [.., M, K] -> [.., C, M, T] and [.., K, N] -> [.., C, T, N], K padded with zeros
    let chunks = k.div_ceil(terms);
    let terms = k.div_ceil(chunks);
    let padded = chunks * terms;
    let (ar, br) = (a.ndim(), b.ndim());
    let mut pad_a = vec![(0, 0); ar];
    pad_a[ar - 1] = (0, padded - k);
    let mut pad_b = vec![(0, 0); br];
    pad_b[br - 2] = (0, padded - k);
    let (af, bf) = (af.pad(&pad_a, 0.0), bf.pad(&pad_b, 0.0));
    let m = a.shape()[ar - 2];
    let mut shape_a: Vec<isize> = a.shape()[..ar - 2].iter().map(|&d| d as isize).collect();
    shape_a.extend([m as isize, chunks as isize, terms as isize]);
    let mut order: Vec<isize> = (0..ar as isize - 2).collect();
    order.extend([ar as isize - 1, ar as isize - 2, ar as isize]);
    let ac = af.reshape(&shape_a).permute(&order);
    let n = b.shape()[br - 1];
    let mut shape_b: Vec<isize> = b.shape()[..br - 2].iter().map(|&d| d as isize).collect();
    shape_b.extend([chunks as isize, terms as isize, n as isize]);
    let bc = bf.reshape(&shape_b);
    // [.., C, M, N]: each exact; summed over the chunks in int32
    let partial = ac.matmul(&bc).cast(DType::INT32);
    let c_axis = partial.ndim() as isize - 3;
    partial.sum(c_axis)
}
