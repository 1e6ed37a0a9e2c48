//! The lazy [`Tensor`]: a handle to a UOp graph on a device, realized on demand.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use tinygrad_dtype::{ConstValue, DType};
use tinygrad_runtime::{Buffer, DeviceError, default_device, get_device, run_schedule_with_vars};
use tinygrad_schedule::{ScheduleItem, create_schedule, is_buffer_view};
use tinygrad_uop::shape::numel_or_panic;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::Element;

pub(crate) struct Inner {
    pub(crate) uop: RwLock<UOp>,
    /// The device name, interned ([`intern_device`]): `to_` and `shard_` move a tensor in
    /// place, for every handle sharing it.
    device: RwLock<&'static str>,
    /// `requires_grad` and `.grad`, see `autograd`.
    pub(crate) autograd: crate::autograd::GradState,
    /// For a view made by movement ops (reshape, permute, shrink, flip, expand): the tensor it
    /// views and the ops from it, so an assignment to the view writes through to it.
    pub(crate) view: Option<View>,
    /// Set when an assignment through a view gave this tensor a new graph: realizing any of its
    /// views then realizes it too, so its graph does not grow with every such assignment.
    pub(crate) written_through: std::sync::atomic::AtomicBool,
    /// When the handle was made ([`next_handle_id`]): the JIT tells the tensors that existed
    /// before a capture (state) from those its function made.
    pub(crate) created: u64,
}

/// The one `&'static str` for each device name: tensors keep their device by reference, and
/// a process sees only a handful of device names (each device, each tuple of devices).
fn intern_device(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}

static NEXT_HANDLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The creation stamp of the next tensor handle (stamps only grow).
pub(crate) fn next_handle_id() -> u64 {
    NEXT_HANDLE.load(std::sync::atomic::Ordering::Relaxed)
}

fn handle_stamp() -> u64 {
    NEXT_HANDLE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// What a view tensor views: its base tensor and the movement ops (op, argument) from it.
/// The base is held weakly: a view must not keep a temporary's graph and buffers alive after
/// it has been realized (a base nobody holds can't be seen, so assigning to the view is then a
/// plain assignment).
pub(crate) struct View {
    pub(crate) base: std::sync::Weak<Inner>,
    pub(crate) ops: Vec<(Ops, Arg)>,
}

impl View {
    /// The base tensor, if anybody still holds it.
    pub(crate) fn base(&self) -> Option<Tensor> {
        self.base.upgrade().map(|inner| Tensor { inner })
    }
}

/// A lazy tensor: operations build a graph; [`Tensor::realize`] (or reading data) compiles and
/// runs the fused kernels that compute it. Cloning a `Tensor` shares it (like a Python
/// reference): realizing one clone realizes all.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) inner: Arc<Inner>,
}

impl Tensor {
    /// A tensor standing for `uop` on `device`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]) * 2;
    /// let u = Tensor::from_uop(t.uop(), t.device());
    /// assert_eq!(u.to_vec::<i32>(), vec![2, 4, 6]);
    /// ```
    ///
    /// # Panics
    /// If `device` names no device of this library (an unknown name is reported where the
    /// tensor is made, not when it is first realized).
    pub fn from_uop(uop: UOp, device: &str) -> Tensor {
        let multi = crate::multi::parse_multi(device).map(|d| crate::multi::multi_name(&d));
        let canonical = multi
            .or_else(|| tinygrad_runtime::device::canonical_device(device))
            .unwrap_or_else(|| {
                panic!(
                    "Tensor: unknown device {device:?} (devices: {}, each with an optional index: \
                 CPU:1)",
                    tinygrad_runtime::DEVICE_NAMES.join(", ")
                )
            });
        Tensor {
            inner: Arc::new(Inner {
                uop: RwLock::new(uop),
                device: RwLock::new(intern_device(&canonical)),
                autograd: Default::default(),
                view: None,
                written_through: Default::default(),
                created: handle_stamp(),
            }),
        }
    }

    /// The graph behind this tensor.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[2, 3], DType::INT32);
    /// assert_eq!((t.uop().shape_vec(), t.uop().dtype()), (vec![2, 3], DType::INT32));
    /// ```
    pub fn uop(&self) -> UOp {
        let u = self
            .inner
            .uop
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        crate::jit::note_read(&self.inner, &u);
        u
    }

    /// Gives this handle a new graph (what `assign`, `replace` and realizing do), telling an
    /// open JIT capture.
    pub(crate) fn set_uop(&self, u: UOp) {
        *self.inner.uop.write().unwrap_or_else(|e| e.into_inner()) = u;
        crate::jit::note_write(&self.inner);
    }

    /// Like [`Tensor::with_uop`], on another device (a copy).
    fn with_uop_on(&self, uop: UOp, device: &str) -> Tensor {
        Tensor {
            inner: Arc::new(Inner {
                uop: RwLock::new(crate::autograd::track(uop)),
                device: RwLock::new(intern_device(device)),
                autograd: Default::default(),
                view: None,
                written_through: Default::default(),
                created: handle_stamp(),
            }),
        }
    }

    pub(crate) fn with_uop(&self, uop: UOp) -> Tensor {
        // shares the device name (`from_uop` would allocate a copy per op)
        Tensor {
            inner: Arc::new(Inner {
                uop: RwLock::new(crate::autograd::track(uop)),
                device: RwLock::new(self.device()),
                autograd: Default::default(),
                view: None,
                written_through: Default::default(),
                created: handle_stamp(),
            }),
        }
    }

    /// The same value as a new tensor that is no view (what a compound op returns, like torch's
    /// `repeat` or a reduction: assigning to it must not write into its input).
    pub(crate) fn fresh(&self) -> Tensor {
        self.with_uop(self.uop())
    }

    /// [`Tensor::with_uop`] for a movement op's result: a view of this tensor's base.
    pub(crate) fn with_view_uop(&self, uop: UOp, op: Ops, arg: Arg) -> Tensor {
        let view = match &self.inner.view {
            Some(v) => {
                let mut ops = v.ops.clone();
                ops.push((op, arg));
                View {
                    base: v.base.clone(),
                    ops,
                }
            }
            None => View {
                base: Arc::downgrade(&self.inner),
                ops: vec![(op, arg)],
            },
        };
        Tensor {
            inner: Arc::new(Inner {
                uop: RwLock::new(crate::autograd::track(uop)),
                device: RwLock::new(self.device()),
                autograd: Default::default(),
                view: Some(view),
                written_through: Default::default(),
                created: handle_stamp(),
            }),
        }
    }

    /// The shape.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// assert_eq!(t.shape(), vec![2, 3]);
    /// ```
    pub fn shape(&self) -> Vec<usize> {
        self.uop().shape_vec()
    }

    /// Number of dimensions.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[2, 3, 4], DType::FLOAT32).ndim(), 3);
    /// assert_eq!(Tensor::scalar(1.5f32).ndim(), 0);
    /// ```
    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[2, 3, 4], DType::FLOAT32).numel(), 24);
    /// assert_eq!(Tensor::scalar(7i32).numel(), 1);
    /// ```
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// The size of the first dim (Python's `len(t)`, tinygrad's `__len__`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[4, 2], DType::FLOAT32).len(), 4);
    /// assert!(Tensor::zeros(&[0, 3], DType::FLOAT32).is_empty());
    /// ```
    ///
    /// # Panics
    /// On a 0-d tensor (`len() of a 0-d tensor`, as tinygrad's `TypeError`).
    pub fn len(&self) -> usize {
        let shape = self.shape();
        assert!(!shape.is_empty(), "len() of a 0-d tensor");
        shape[0]
    }

    /// Whether the first dim is 0 ([`Tensor::len`] is 0).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert!(!Tensor::zeros(&[2], DType::INT32).is_empty());
    /// ```
    ///
    /// # Panics
    /// On a 0-d tensor, as [`Tensor::len`].
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy with a buffer of its own (tinygrad's `clone`; Rust's `Clone` shares the tensor
    /// like a Python reference). Realized at once; the gradient, if any, is copied too.
    /// Assigning to either tensor afterwards leaves the other unchanged.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0]);
    /// let copy = t.deep_clone();
    /// t.assign(&Tensor::from_vec(vec![5.0f32, 6.0]));
    /// assert_eq!(copy.to_vec::<f32>(), vec![1.0, 2.0]);
    /// assert_eq!(t.to_vec::<f32>(), vec![5.0, 6.0]);
    /// ```
    pub fn deep_clone(&self) -> Tensor {
        let u = self.uop();
        let copy = Tensor::from_uop(
            UOp::new(Ops::Contiguous, u.dtype(), vec![u], Arg::None),
            self.device(),
        );
        copy.realize();
        if let Some(g) = self.grad() {
            copy.set_grad(Some(g.deep_clone()));
        }
        copy
    }

    /// The size of axis `dim` (negative counts from the end) — tinygrad's `size(dim)`; the
    /// whole shape is [`Tensor::shape`].
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[2, 3, 4], DType::FLOAT32);
    /// assert_eq!((t.size(0), t.size(1), t.size(-1)), (2, 3, 4));
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range.
    pub fn size(&self, dim: isize) -> usize {
        let shape = self.shape();
        shape[crate::movement::resolve_axis(dim, shape.len(), "size", &shape)]
    }

    /// Bytes of one element (`dtype().itemsize()`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[3], DType::FLOAT32).element_size(), 4);
    /// assert_eq!(Tensor::zeros(&[3], DType::INT64).element_size(), 8);
    /// ```
    pub fn element_size(&self) -> usize {
        self.dtype().itemsize()
    }

    /// Bytes of the whole tensor's data (`numel * element_size`).
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[3, 4], DType::FLOAT16);
    /// assert_eq!((t.nbytes(), t.element_size(), t.size(-1)), (24, 2, 4));
    /// assert!(t.is_floating_point() && !t.int().is_floating_point());
    /// ```
    pub fn nbytes(&self) -> usize {
        self.numel() * self.element_size()
    }

    /// Whether the dtype is a float dtype.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert!(Tensor::from_slice(&[1.0f32, 2.0], &[2]).is_floating_point());
    /// assert!(!Tensor::from_slice(&[1i32, 2], &[2]).is_floating_point());
    /// ```
    pub fn is_floating_point(&self) -> bool {
        self.dtype().is_float()
    }

    /// The element dtype.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::from_slice(&[1u8, 2], &[2]).dtype(), DType::UINT8);
    /// assert_eq!(Tensor::full(&[2], 1.5).dtype(), DType::FLOAT32);
    /// ```
    pub fn dtype(&self) -> DType {
        self.uop().dtype()
    }

    /// The device name (`CPU`, `REF`, `CUDA`, `WEBGPU`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros_on(&[2], DType::FLOAT32, "REF").device(), "REF");
    /// assert_eq!(Tensor::zeros(&[2], DType::FLOAT32).device(), tinygrad_tensor::default_device());
    /// ```
    pub fn device(&self) -> &'static str {
        *self.inner.device.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives this tensor (every handle sharing it) a new graph on another device: what the
    /// in-place moves (`to_`, `shard_`) do.
    pub(crate) fn move_to(&self, moved: &Tensor) {
        *self.inner.device.write().unwrap_or_else(|e| e.into_inner()) = moved.device();
        self.set_uop(moved.uop());
    }

    // ---- creation ----

    /// A tensor with `data` (row-major) of `shape` on the default device (`DEV`, else `CPU`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]);
    /// assert_eq!((t.shape(), t.dtype()), (vec![2, 3], DType::INT32));
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 2, 3, 4, 5, 6]);
    /// ```
    ///
    /// # Panics
    /// If `data.len()` is not the product of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        Tensor::from_slice_on(data, shape, &default_device())
    }

    /// Like [`Tensor::from_slice`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice_on(&[1.5f32, -2.0], &[2], "CPU");
    /// assert_eq!(t.device(), "CPU");
    /// assert_eq!(t.to_vec::<f32>(), vec![1.5, -2.0]);
    /// ```
    pub fn from_slice_on<T: Element>(data: &[T], shape: &[usize], device: &str) -> Tensor {
        let n = numel_or_panic("Tensor::from_slice", shape, T::DTYPE.itemsize());
        assert_eq!(
            data.len(),
            n,
            "Tensor::from_slice: {} values for shape {shape:?} (needs {n})",
            data.len()
        );
        let mut bytes = Vec::with_capacity(n * T::DTYPE.itemsize());
        for &x in data {
            x.write_le(&mut bytes);
        }
        Tensor::from_bytes(&bytes, T::DTYPE, shape, device)
    }

    /// A tensor from raw little-endian bytes of `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let bytes: Vec<u8> = [1u16, 2, 258].iter().flat_map(|x| x.to_le_bytes()).collect();
    /// let t = Tensor::from_bytes(&bytes, DType::UINT16, &[3], "CPU");
    /// assert_eq!(t.to_vec::<u16>(), vec![1, 2, 258]);
    /// ```
    ///
    /// On a GPU device the bytes are uploaded now, once.
    ///
    /// # Panics
    /// If `bytes` is not exactly the size of `shape` in `dtype`, the shape is too large to be
    /// a buffer (its byte size exceeds `isize::MAX`), or the device fails or is out of memory.
    pub fn from_bytes(bytes: &[u8], dtype: DType, shape: &[usize], device: &str) -> Tensor {
        let n = numel_or_panic("Tensor::from_bytes", shape, dtype.itemsize());
        assert_eq!(
            bytes.len(),
            n * dtype.itemsize(),
            "Tensor::from_bytes: {} bytes for shape {shape:?} of {dtype} (needs {} bytes)",
            bytes.len(),
            n * dtype.itemsize()
        );
        if let Some(devices) = crate::multi::parse_multi(device) {
            // on several devices: uploaded to the first, copied to the others
            return Tensor::from_bytes(bytes, dtype, shape, &devices[0]).to(device);
        }
        let buf = Buffer::new(device, dtype, n);
        // (an open JIT capture must know: a replay would not repeat this upload)
        tinygrad_runtime::capture::note_upload(buf.id());
        match buf.try_copy_in(bytes) {
            Ok(()) => {}
            // A device this machine lacks: the data waits in host memory (it can be read back
            // or moved with `to`), and kernels on the device are `Err`s when realized.
            Err(DeviceError::Unavailable { .. }) => buf.stage_in_host(bytes),
            Err(e) => panic!("Tensor::from_bytes: {e}"),
        }
        let u = buf.uop();
        let u = if shape.len() == 1 {
            u
        } else {
            reshape_uop(&u, shape)
        };
        Tensor::from_uop(u, device)
    }

    /// A 1-D tensor from a vector.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1i64, 2, 3, 4]);
    /// assert_eq!(t.shape(), vec![4]);
    /// assert_eq!(t.to_vec::<i64>(), vec![1, 2, 3, 4]);
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>) -> Tensor {
        let n = data.len();
        Tensor::from_slice(&data, &[n])
    }

    /// A 0-D tensor holding `v` (dtype from the Rust type).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::scalar(42i32);
    /// assert_eq!((t.shape(), t.dtype(), t.item::<i32>()), (vec![], DType::INT32, 42));
    /// ```
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::full_dtype(&[], v.to_const(), T::DTYPE)
    }

    /// A tensor of `shape` filled with `value` (dtype: `bool`, `int32`, or the default float,
    /// from the kind of value, like a Python scalar).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::full(&[2, 3], 42);
    /// assert_eq!((t.dtype(), t.to_vec::<i32>()), (DType::INT32, vec![42; 6]));
    /// assert_eq!(Tensor::full(&[2, 3], false).to_vec::<bool>(), vec![false; 6]);
    /// ```
    pub fn full(shape: &[usize], value: impl Into<ConstValue>) -> Tensor {
        let v = value.into();
        Tensor::full_dtype(shape, v, v.default_dtype())
    }

    /// A tensor of `shape` filled with `value` cast to `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::full_dtype(&[2, 2], 2.7, DType::INT8);
    /// assert_eq!((t.dtype(), t.to_vec::<i8>()), (DType::INT8, vec![2; 4]));
    /// ```
    pub fn full_dtype(shape: &[usize], value: impl Into<ConstValue>, dtype: DType) -> Tensor {
        Tensor::full_on(shape, value, dtype, &default_device())
    }

    /// [`Tensor::full_dtype`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::full_on(&[3], 0.5, DType::FLOAT32, "REF");
    /// assert_eq!((t.device(), t.to_vec::<f32>()), ("REF", vec![0.5; 3]));
    /// ```
    pub fn full_on(
        shape: &[usize],
        value: impl Into<ConstValue>,
        dtype: DType,
        device: &str,
    ) -> Tensor {
        let c = UOp::cnst(dtype, value.into());
        // a new tensor, not a view of the scalar: it can be assigned to
        let t = Tensor::from_uop(c, device).broadcast_scalar_to(shape);
        Tensor::from_uop(t.uop(), device)
    }

    /// The same lazy graph on `device`. Only for graphs built from constants (no buffers).
    fn on_device(&self, device: &str) -> Tensor {
        Tensor::from_uop(self.uop(), device)
    }

    pub(crate) fn const_like(&self, value: impl Into<ConstValue>, dtype: DType) -> Tensor {
        // built as one graph, not through intermediate tensors: every binary op with a scalar
        // goes through here
        let c = UOp::cnst(dtype, value.into());
        let shape = self.shape();
        numel_or_panic("full_like", &shape, dtype.itemsize());
        if shape.is_empty() {
            return self.with_uop(c);
        }
        let ones = vec![1usize; shape.len()];
        let r = UOp::new(Ops::Reshape, dtype, vec![c], Arg::shape(&ones));
        // a symbolic shape stays symbolic: one graph (and kernel) for every value
        let to = if self.uop().has_sym() {
            Arg::sizes(&self.uop().sym_shape_vec())
        } else {
            Arg::shape(&shape)
        };
        self.with_uop(UOp::new(Ops::Expand, dtype, vec![r], to))
    }

    fn broadcast_scalar_to(&self, shape: &[usize]) -> Tensor {
        if shape.is_empty() {
            return self.clone();
        }
        let ones = vec![1usize; shape.len()];
        self.reshape_exact(&ones).expand_exact(shape)
    }

    /// Zeros of `shape` and `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[2, 3], DType::FLOAT32).to_vec::<f32>(), vec![0.0; 6]);
    /// assert_eq!(Tensor::zeros(&[2, 3], DType::INT32).to_vec::<i32>(), vec![0; 6]);
    /// ```
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full_dtype(shape, 0i64, dtype)
    }

    /// [`Tensor::zeros`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros_on(&[2], DType::INT32, "REF");
    /// assert_eq!((t.device(), t.to_vec::<i32>()), ("REF", vec![0, 0]));
    /// ```
    pub fn zeros_on(shape: &[usize], dtype: DType, device: &str) -> Tensor {
        Tensor::full_on(shape, 0i64, dtype, device)
    }

    /// Ones of `shape` and `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::ones(&[2, 3], DType::FLOAT32).to_vec::<f32>(), vec![1.0; 6]);
    /// assert_eq!(Tensor::ones(&[2, 3], DType::INT32).to_vec::<i32>(), vec![1; 6]);
    /// ```
    pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full_dtype(shape, 1i64, dtype)
    }

    /// [`Tensor::ones`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones_on(&[2], DType::FLOAT32, "REF");
    /// assert_eq!((t.device(), t.to_vec::<f32>()), ("REF", vec![1.0, 1.0]));
    /// ```
    pub fn ones_on(shape: &[usize], dtype: DType, device: &str) -> Tensor {
        Tensor::full_on(shape, 1i64, dtype, device)
    }

    /// An uninitialized (in practice zeroed) tensor of `shape` and `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::empty(&[2, 3], DType::FLOAT32);
    /// assert_eq!((t.shape(), t.dtype()), (vec![2, 3], DType::FLOAT32));
    /// ```
    pub fn empty(shape: &[usize], dtype: DType) -> Tensor {
        let dev = default_device();
        let n = numel_or_panic("Tensor::empty", shape, dtype.itemsize());
        let u = Buffer::new(&dev, dtype, n).uop();
        Tensor::from_uop(
            if shape.len() == 1 {
                u
            } else {
                reshape_uop(&u, shape)
            },
            &dev,
        )
    }

    /// An uninitialized (in practice zeroed) tensor with the shape, dtype and device of `t` —
    /// tinygrad's `empty_like`.
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[2, 3], DType::INT8);
    /// let e = Tensor::empty_like(&t);
    /// assert_eq!((e.shape(), e.dtype(), e.device()), (vec![2, 3], DType::INT8, t.device()));
    /// ```
    pub fn empty_like(t: &Tensor) -> Tensor {
        if crate::multi::is_multi(t.device()) {
            // on the first device, then split (or copied) as `t` is
            return Tensor::empty_like(&t.to(&t.devices()[0])).shard_like(t);
        }
        let dev = t.device().to_string();
        let shape = t.shape();
        let u = Buffer::new(&dev, t.dtype(), t.numel()).uop();
        Tensor::from_uop(
            if shape.len() == 1 {
                u
            } else {
                reshape_uop(&u, &shape)
            },
            &dev,
        )
    }

    /// Zeros with the shape, dtype and device of `t`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let z = Tensor::zeros_like(&Tensor::ones(&[2, 3], DType::INT32));
    /// assert_eq!((z.shape(), z.to_vec::<i32>()), (vec![2, 3], vec![0; 6]));
    /// ```
    pub fn zeros_like(t: &Tensor) -> Tensor {
        t.const_like(0i64, t.dtype())
    }

    /// Ones with the shape, dtype and device of `t`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let o = Tensor::ones_like(&Tensor::zeros(&[2, 3], DType::FLOAT32));
    /// assert_eq!((o.shape(), o.to_vec::<f32>()), (vec![2, 3], vec![1.0; 6]));
    /// ```
    pub fn ones_like(t: &Tensor) -> Tensor {
        t.const_like(1i64, t.dtype())
    }

    /// `value` with the shape, dtype and device of `t`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[2, 3], DType::FLOAT32);
    /// assert_eq!(Tensor::full_like(&t, 42).to_vec::<f32>(), vec![42.0; 6]);
    /// ```
    pub fn full_like(t: &Tensor, value: impl Into<ConstValue>) -> Tensor {
        t.const_like(value, t.dtype())
    }

    /// `start, start+step, ...` up to (excluding) `stop`, like Python's `range` / tinygrad's
    /// `arange`. Integer arguments give `int32`, float arguments the default float.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert_eq!(Tensor::arange(0, 5, 1).to_vec::<i32>(), vec![0, 1, 2, 3, 4]);
    /// assert_eq!(Tensor::arange(5, 10, 2).to_vec::<i32>(), vec![5, 7, 9]);
    /// assert_eq!(Tensor::arange(5.5, 10, 2).to_vec::<f32>(), vec![5.5, 7.5, 9.5]);
    /// ```
    ///
    /// # Panics
    /// If `step` is zero.
    pub fn arange(
        start: impl Into<ConstValue>,
        stop: impl Into<ConstValue>,
        step: impl Into<ConstValue>,
    ) -> Tensor {
        let (start, stop, step) = (start.into(), stop.into(), step.into());
        let all_int = [start, stop, step]
            .iter()
            .all(|c| !matches!(c, ConstValue::Float(_)));
        let dtype = if all_int {
            tinygrad_dtype::default_int()
        } else {
            tinygrad_dtype::default_float()
        };
        if all_int {
            let int = |c: ConstValue| match c {
                ConstValue::Int(v) => v as i128,
                ConstValue::UInt(v) => v as i128,
                ConstValue::Bool(b) => b as i128,
                ConstValue::Float(f) => f as i128,
            };
            return Tensor::arange_int(int(start), int(stop), int(step), dtype)
                .on_device(&default_device());
        }
        Tensor::arange_dtype(start.as_f64(), stop.as_f64(), step.as_f64(), dtype)
    }

    /// [`Tensor::arange`] with an explicit dtype.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::arange_dtype(0.0, 4.0, 1.0, DType::UINT8);
    /// assert_eq!((t.dtype(), t.to_vec::<u8>()), (DType::UINT8, vec![0, 1, 2, 3]));
    /// ```
    pub fn arange_dtype(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        Tensor::arange_on(start, stop, step, dtype, &default_device())
    }

    /// [`Tensor::arange_dtype`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::arange_on(1.0, 2.0, 0.25, DType::FLOAT32, "REF");
    /// assert_eq!((t.device(), t.to_vec::<f32>()), ("REF", vec![1.0, 1.25, 1.5, 1.75]));
    /// ```
    ///
    /// # Panics
    /// If `step` is zero.
    pub fn arange_on(start: f64, stop: f64, step: f64, dtype: DType, device: &str) -> Tensor {
        Tensor::arange_impl(start, stop, step, dtype).on_device(device)
    }

    fn arange_impl(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        assert!(step != 0.0, "Tensor::arange: step must not be zero");
        let integral = |x: f64| x.fract() == 0.0 && x.abs() < 2f64.powi(63);
        if !dtype.is_float() && integral(start) && integral(step) && stop.is_finite() {
            // exact: an integer arange computed in floats rounds past 2^24 (float32)
            let stop = if integral(stop) {
                stop as i128
            } else if step > 0.0 {
                stop.ceil() as i128
            } else {
                stop.floor() as i128
            };
            return Tensor::arange_int(start as i128, stop, step as i128, dtype);
        }
        let n = ((stop - start) / step).ceil().max(0.0) as usize;
        if n == 0 {
            return Tensor::zeros(&[0], dtype);
        }
        // cumulative sum of ones, the tinygrad way: (ones * step).cumsum() + (start - step)
        let idx = Tensor::index_ramp(n);
        (idx.cast(if dtype.is_float() {
            dtype
        } else {
            DType::INT64
        }) * step
            + start)
            .cast(dtype)
    }

    /// An integer arange computed in integers: `start + i * step` in int64, cast to `dtype`.
    fn arange_int(start: i128, stop: i128, step: i128, dtype: DType) -> Tensor {
        assert!(step != 0, "Tensor::arange: step must not be zero");
        let span = stop - start;
        // ceil(span / step), exactly
        let n = if (span > 0) == (step > 0) && span != 0 {
            (span.abs() + step.abs() - 1) / step.abs()
        } else {
            0
        };
        let n = usize::try_from(n).unwrap_or_else(|_| {
            panic!("Tensor::arange: ({start}, {stop}, {step}) has {n} elements, too many")
        });
        if n == 0 {
            return Tensor::zeros(&[0], dtype);
        }
        let (start, step) = (start as i64, step as i64);
        let idx = Tensor::index_ramp(n).cast(DType::INT64);
        let v = if step == 1 { idx } else { idx * step };
        let v = if start == 0 { v } else { v + start };
        v.cast(dtype)
    }

    /// `[0, 1, ..., n-1]` as int32, or int64 when `n - 1` does not fit in int32 (a sum of padded
    /// constants, as tinygrad builds ranges without any data).
    pub(crate) fn index_ramp(n: usize) -> Tensor {
        // a sum of one padded constant per binary digit: O(log n) work per element, fuses into
        // its consumer (a cumsum of ones would be an n x n reduce)
        let dtype = if n > i32::MAX as usize {
            DType::INT64
        } else {
            DType::INT32
        };
        Tensor::nn_ramp(n, dtype, &default_device())
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive (default float dtype).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert_eq!(Tensor::linspace(0.0, 10.0, 5).to_vec::<f32>(), vec![0.0, 2.5, 5.0, 7.5, 10.0]);
    /// assert_eq!(Tensor::linspace(-1.0, 1.0, 5).to_vec::<f32>(), vec![-1.0, -0.5, 0.0, 0.5, 1.0]);
    /// ```
    pub fn linspace(start: f64, end: f64, steps: usize) -> Tensor {
        Tensor::linspace_on(
            start,
            end,
            steps,
            tinygrad_dtype::default_float(),
            &default_device(),
        )
    }

    /// [`Tensor::linspace`] as `dtype` on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::linspace_on(0.0, 1.0, 5, DType::FLOAT64, "REF");
    /// assert_eq!((t.device(), t.dtype()), ("REF", DType::FLOAT64));
    /// assert_eq!(t.to_vec::<f64>(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    ///
    /// # Panics
    /// If `dtype` is bool (tinygrad rejects it: evenly spaced values are not truth values).
    pub fn linspace_on(start: f64, end: f64, steps: usize, dtype: DType, device: &str) -> Tensor {
        assert!(
            !dtype.is_bool(),
            "linspace: dtype bool is not supported (start {start}, end {end}, steps {steps}); \
             use a number dtype"
        );
        Tensor::linspace_impl(start, end, steps, dtype).on_device(device)
    }

    fn linspace_impl(start: f64, end: f64, steps: usize, dt: DType) -> Tensor {
        if steps == 0 {
            return Tensor::zeros(&[0], dt);
        }
        if steps == 1 {
            return Tensor::full_dtype(&[1], start, dt);
        }
        let step = (end - start) / (steps - 1) as f64;
        // in floats, then cast (truncating for integer dtypes), as tinygrad
        (Tensor::index_ramp(steps).cast(dt) * step + start).cast(dt)
    }

    /// The `n x m` identity matrix (`m = n` when `None`), as `dtype`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let e = Tensor::eye(3, None, DType::FLOAT32);
    /// assert_eq!(e.to_vec::<f32>(), vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    /// let e = Tensor::eye(2, Some(4), DType::INT32);
    /// assert_eq!((e.shape(), e.to_vec::<i32>()), (vec![2, 4], vec![1, 0, 0, 0, 0, 1, 0, 0]));
    /// ```
    pub fn eye(n: usize, m: Option<usize>, dtype: DType) -> Tensor {
        Tensor::eye_on(n, m, dtype, &default_device())
    }

    /// [`Tensor::eye`] on a given device.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let e = Tensor::eye_on(2, None, DType::BOOL, "REF");
    /// assert_eq!((e.device(), e.to_vec::<bool>()), ("REF", vec![true, false, false, true]));
    /// ```
    pub fn eye_on(n: usize, m: Option<usize>, dtype: DType, device: &str) -> Tensor {
        Tensor::eye_impl(n, m, dtype).on_device(device)
    }

    fn eye_impl(n: usize, m: Option<usize>, dtype: DType) -> Tensor {
        let m = m.unwrap_or(n);
        let rows = Tensor::index_ramp(n).reshape(&[n as isize, 1]);
        let cols = Tensor::index_ramp(m).reshape(&[1, m as isize]);
        rows.eq(&cols).cast(dtype)
    }

    // ---- realize and data ----

    /// Schedules (without running) the kernels that would compute `tensors` on their device
    /// (the first tensor's). A copy from another device is a transfer item (`Copy` AST); its
    /// source, on the other device, is realized there first (that part does run).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    /// let b = (&a + 1.0) * 2.0;
    /// assert_eq!(Tensor::schedule(&[&b]).len(), 1); // one fused kernel
    /// assert_eq!(Tensor::schedule(&[&a]).len(), 0); // already a buffer
    /// let c = (&a * 3.0).to("REF") + 1.0;
    /// assert_eq!(Tensor::schedule(&[&c]).len(), 2); // the copy, then one kernel on REF
    /// ```
    ///
    /// # Panics
    /// If realizing a copy's source fails.
    pub fn schedule(tensors: &[&Tensor]) -> Vec<ScheduleItem> {
        Tensor::schedule_with_vars(tensors).0
    }

    /// [`Tensor::schedule`] and the values of the variables the graphs bind (tinygrad's
    /// `schedule_with_vars`): the kernels read them as arguments, so one kernel serves every
    /// value.
    ///
    /// ```
    /// use tinygrad_tensor::{Axis, Tensor, Variable};
    /// let cache = Tensor::arange(0, 16, 1).float();
    /// let n = Variable::new("n", 1, 16);
    /// let first = cache.shrink_sym(&[(0.into(), n.bind(5).into())]);
    /// let (items, vars) = Tensor::schedule_with_vars(&[&first.sum(Axis::All)]);
    /// assert_eq!((items.len(), vars["n"]), (1, 5));
    /// ```
    ///
    /// # Panics
    /// If realizing a copy's source fails.
    pub fn schedule_with_vars(tensors: &[&Tensor]) -> (Vec<ScheduleItem>, HashMap<Arc<str>, i64>) {
        if let Some(t) = tensors.iter().find(|t| crate::multi::is_multi(t.device())) {
            panic!(
                "schedule: a tensor of shape {:?} is on several devices {}; its kernels are \
                 scheduled per device when it is realized (realize it, or move it with `to`)",
                t.shape(),
                t.device()
            );
        }
        let outs: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
        let outs = realize_copy_sources(&outs, &mut HashMap::new())
            .unwrap_or_else(|e| panic!("schedule: {e}"));
        let dev = tensors
            .first()
            .map_or_else(default_device, |t| t.device().to_string());
        let sched = create_schedule(&outs, &mut |dt, n| Buffer::new(&dev, dt, n).uop());
        (sched.items, sched.var_vals)
    }

    /// Computes the tensor (compiling and running its kernels) and keeps the result.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 4, 1) * 3;
    /// t.realize(); // t is now backed by a buffer: nothing left to schedule
    /// assert_eq!(Tensor::schedule(&[&t]).len(), 0);
    /// assert_eq!(t.to_vec::<i32>(), vec![0, 3, 6, 9]);
    /// ```
    ///
    /// # Panics
    /// If the device is missing or a kernel fails to compile (see [`Tensor::try_realize`]).
    pub fn realize(&self) -> &Tensor {
        self.try_realize()
            .unwrap_or_else(|e| panic!("realize: {e}"))
    }

    /// Like [`Tensor::realize`], returning device and compile errors.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 3, 1) + 10;
    /// let r = t.try_realize().expect("the CPU device is available");
    /// assert_eq!(r.to_vec::<i32>(), vec![10, 11, 12]);
    /// ```
    pub fn try_realize(&self) -> Result<&Tensor, DeviceError> {
        Tensor::try_realize_all(&[self])?;
        Ok(self)
    }

    /// Realizes several tensors together (shared work is scheduled once).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::arange(0, 3, 1) * 2;
    /// let (b, c) = (&a + 1, &a * &a);
    /// Tensor::try_realize_all(&[&b, &c]).unwrap();
    /// assert_eq!((b.to_vec::<i32>(), c.to_vec::<i32>()), (vec![1, 3, 5], vec![0, 4, 16]));
    /// ```
    pub fn try_realize_all(tensors: &[&Tensor]) -> Result<(), DeviceError> {
        Tensor::realize_snapshots(tensors).map(|_| ())
    }

    /// Realizes the graphs `tensors` stand for now and returns, for each, the buffer view that
    /// holds its value.
    ///
    /// Each tensor's graph is read once (a snapshot). Another thread may assign to a tensor
    /// while its snapshot is being computed: then the tensor keeps the newer graph (replacing it
    /// by the older result would lose that assignment), and the caller still reads the value
    /// that was realized from the returned view, never the newer, unrealized graph.
    pub(crate) fn realize_snapshots(tensors: &[&Tensor]) -> Result<Vec<UOp>, DeviceError> {
        Tensor::realize_snapshots_with(tensors, &mut HashMap::new())
    }

    /// [`Tensor::realize_snapshots`] reusing what `known` holds (graph -> realized view) and
    /// adding to it every node its schedules realize that only one device can compute: nested
    /// realizations (copy sources, a multi-device all-reduce's partial sums) then compute a
    /// shared part once.
    pub(crate) fn realize_snapshots_with(
        tensors: &[&Tensor],
        known: &mut HashMap<UOp, UOp>,
    ) -> Result<Vec<UOp>, DeviceError> {
        // bases written through one of these views are realized with them
        let bases: Vec<Tensor> = tensors
            .iter()
            .filter_map(|t| t.inner.view.as_ref().and_then(View::base))
            .filter(|b| {
                b.inner
                    .written_through
                    .swap(false, std::sync::atomic::Ordering::AcqRel)
            })
            .collect();
        if !bases.is_empty() {
            let mut all: Vec<&Tensor> = tensors.to_vec();
            all.extend(bases.iter());
            let snaps = Tensor::realize_snapshots_with(&all, known)?;
            return Ok(snaps[..tensors.len()].to_vec());
        }
        let snaps: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
        let (multi, todo): (Vec<Pending>, Vec<Pending>) = tensors
            .iter()
            .copied()
            .zip(&snaps)
            .filter(|(_, u)| !is_buffer_view(u) && !crate::multi::is_multi_view(u))
            .partition(|(t, _)| crate::multi::is_multi(t.device()));
        // What each (device, graph) became: a graph of constants is the same graph on every device,
        // each computing its own buffer for it.
        let mut becomes: HashMap<(&str, UOp), UOp> = HashMap::new();
        // Tensors on several devices: each resolved to one graph per device and realized there.
        if !multi.is_empty() {
            let views = crate::multi::realize_multi(&multi, known)?;
            for ((t, u), v) in multi.iter().zip(views) {
                becomes.insert((t.device(), (*u).clone()), v);
            }
        }
        if todo.is_empty() {
            return Ok(realized_views(&snaps, tensors, &becomes));
        }
        // Tensors on several devices: each device's graphs are scheduled and run on their own.
        let mut by_device: indexmap::IndexMap<&str, Vec<(&Tensor, &UOp)>> = Default::default();
        for &(t, u) in &todo {
            by_device.entry(t.device()).or_default().push((t, u));
        }
        // `known`: what earlier groups and copy sources realized (graph -> its buffer view): a
        // later group reuses it instead of computing it again (`realize_all(&[&a, &a.to("CPU")])`).
        for (devname, group) in by_device {
            let dev = get_device(devname)?;
            let outs: Vec<UOp> = group.iter().map(|(_, u)| (*u).clone()).collect();
            // A copy's source lives on another device: realize it there first.
            let resolved = realize_copy_sources(&outs, known)?;
            crate::jit::note_graph(&resolved);
            let t0 = std::time::Instant::now();
            let sched = create_schedule(&resolved, &mut |dt, n| Buffer::new(devname, dt, n).uop());
            if tinygrad_runtime::device::debug_level() >= 2 {
                eprintln!(
                    "*** scheduled {} kernels in {:.2} ms",
                    sched.items.len(),
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            run_schedule_with_vars(dev.as_ref(), &sched.items, &sched.var_vals)?;
            let bound = device_bound_nodes(&resolved);
            for (node, view) in &sched.becomes {
                if bound.contains(node) {
                    known.insert(node.clone(), view.clone());
                }
            }
            for ((t, o), r) in group.iter().zip(&resolved) {
                let new = sched
                    .becomes
                    .get(r)
                    .expect("every output is realized")
                    .clone();
                t.swap_uop_if_unchanged(o, new.clone());
                if device_bound(o) {
                    known.insert((*o).clone(), new.clone());
                }
                becomes.insert((t.device(), (*o).clone()), new);
            }
        }
        Ok(realized_views(&snaps, tensors, &becomes))
    }

    /// Gives this handle the graph `new` if it still stands for `old` (compare and swap: a
    /// graph assigned meanwhile, by another thread, is kept).
    pub(crate) fn swap_uop_if_unchanged(&self, old: &UOp, new: UOp) {
        let mut cur = self.inner.uop.write().unwrap_or_else(|e| e.into_inner());
        if *cur == *old {
            *cur = new;
            drop(cur);
            crate::jit::note_write(&self.inner);
        }
    }

    /// The data as little-endian bytes (realizes first).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1u16, 258], &[2]);
    /// assert_eq!(t.try_to_bytes().unwrap(), vec![1, 0, 2, 1]);
    /// ```
    pub fn try_to_bytes(&self) -> Result<Vec<u8>, DeviceError> {
        let b = Tensor::realize_snapshots(&[self])?.remove(0);
        let mut bytes = if b.op() == Ops::Multi {
            crate::multi::gather_bytes(&b, self.dtype().itemsize())?
        } else {
            view_bytes(&b)?
        };
        // a tensor of symbolic shape is the first elements of a buffer sized for the
        // variables' largest values
        bytes.truncate(self.numel() * self.dtype().itemsize());
        Ok(bytes)
    }

    /// The data as a `Vec<T>` (realizes first).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// assert_eq!(t.to_vec::<i32>(), vec![1, 2, 3, 4]);
    /// assert_eq!(t.float().to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0]);
    /// ```
    ///
    /// # Panics
    /// If `T` does not match the tensor's dtype, or realizing fails.
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        self.try_to_vec().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Tensor::to_vec`], returning an error instead of panicking.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, TensorError};
    /// let t = Tensor::from_slice(&[1i32, 2], &[2]);
    /// assert_eq!(t.try_to_vec::<i32>(), Ok(vec![1, 2]));
    /// let err = t.try_to_vec::<f32>().unwrap_err();
    /// assert!(matches!(err, TensorError::DType { expected: DType::INT32, .. }));
    /// ```
    pub fn try_to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        if T::DTYPE != self.dtype() {
            return Err(TensorError::DType {
                op: "to_vec",
                expected: self.dtype(),
                got: T::DTYPE,
            });
        }
        let bytes = self.try_to_bytes()?;
        let sz = T::DTYPE.itemsize();
        Ok(bytes.chunks_exact(sz).map(T::read_le).collect())
    }

    /// The single value of a one-element tensor.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert_eq!(Tensor::scalar(42i32).item::<i32>(), 42);
    /// assert_eq!(Tensor::from_slice(&[2.5f32], &[1, 1]).item::<f32>(), 2.5);
    /// ```
    ///
    /// # Panics
    /// If the tensor has more or less than one element, or `T` does not match its dtype.
    pub fn item<T: Element>(&self) -> T {
        assert_eq!(
            self.numel(),
            1,
            "item: tensor of shape {:?} has {} elements, expected 1",
            self.shape(),
            self.numel()
        );
        self.to_vec::<T>()[0]
    }

    /// The values as `f64`, whatever the dtype (for printing and tests).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// assert_eq!(Tensor::from_slice(&[1i8, -2], &[2]).to_f64_vec(), vec![1.0, -2.0]);
    /// assert_eq!(Tensor::from_slice(&[true, false], &[2]).to_f64_vec(), vec![1.0, 0.0]);
    /// ```
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let dt = self.dtype();
        let bytes = self.try_to_bytes().unwrap_or_else(|e| panic!("{e}"));
        bytes
            .chunks_exact(dt.itemsize())
            .map(|b| ConstValue::from_le_bytes(dt, b).as_f64())
            .collect()
    }

    /// The tensor on another device (data is copied).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]).to("REF");
    /// assert_eq!((t.device(), t.to_vec::<i32>()), ("REF", vec![1, 2, 3]));
    /// ```
    ///
    /// # Panics
    /// If the device does not exist (see [`Tensor::try_to`]).
    pub fn to(&self, device: &str) -> Tensor {
        self.try_to(device)
            .unwrap_or_else(|e| panic!("Tensor::to: {e}"))
    }

    /// Moves this tensor to `device` in place (tinygrad's `to_`): every handle sharing it
    /// (a model's field and its optimizer's list, say) now reads the copy there, and its
    /// accumulated gradient, if any, moves along.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let same = w.clone();
    /// w.to_("REF");
    /// assert_eq!((same.device(), same.to_vec::<f32>()), ("REF", vec![1.0, 2.0]));
    /// ```
    ///
    /// # Panics
    /// If the device does not exist.
    pub fn to_(&self, device: &str) -> &Tensor {
        let moved = self.to(device);
        // an accumulated gradient moves with the tensor, as in tinygrad's `to_`
        if let Some(g) = self.grad() {
            self.set_grad(Some(g.to(device)));
        }
        self.move_to(&moved);
        self
    }

    /// Like [`Tensor::to`], returning an error for unknown or unavailable devices.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2], &[2]);
    /// assert_eq!(t.try_to("REF").unwrap().to_vec::<i32>(), vec![1, 2]);
    /// assert!(t.try_to("NOSUCHDEVICE").is_err());
    /// ```
    pub fn try_to(&self, device: &str) -> Result<Tensor, DeviceError> {
        if let Some(devices) = crate::multi::parse_multi(device) {
            // to several devices: a copy on each (tinygrad's `to` of a tuple)
            for d in &devices {
                get_device(d)?;
            }
            let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
            return Ok(if self.device() == crate::multi::multi_name(&devices) {
                self.clone()
            } else if crate::multi::is_multi(self.device()) {
                self.to(&self.devices()[0]).shard(&refs, None)
            } else {
                self.shard(&refs, None)
            });
        }
        let dev = get_device(device)?;
        if dev.name() == self.device() {
            return Ok(self.clone());
        }
        let copy = UOp::new(
            Ops::Copy,
            self.dtype(),
            vec![self.uop()],
            Arg::copy(self.device(), dev.name()),
        );
        Ok(self.with_uop_on(copy, dev.name()))
    }

    /// Forces a copy into a fresh buffer when realized (its own kernel).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]).permute(&[1, 0]).contiguous();
    /// assert_eq!(t.to_vec::<i32>(), vec![0, 3, 1, 4, 2, 5]);
    /// ```
    pub fn contiguous(&self) -> Tensor {
        self.with_uop(UOp::new(
            Ops::Contiguous,
            self.dtype(),
            vec![self.uop()],
            Arg::None,
        ))
    }
}

pub(crate) fn reshape_uop(u: &UOp, shape: &[usize]) -> UOp {
    UOp::new(Ops::Reshape, u.dtype(), vec![u.clone()], Arg::shape(shape))
}

/// Recoverable tensor errors (device, compile, dtype mismatch when reading data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorError {
    /// A device was missing or a kernel failed.
    Device(DeviceError),
    /// Data was requested as the wrong type.
    DType {
        /// The operation.
        op: &'static str,
        /// The tensor's dtype.
        expected: DType,
        /// The requested dtype.
        got: DType,
    },
}

impl From<DeviceError> for TensorError {
    fn from(e: DeviceError) -> Self {
        TensorError::Device(e)
    }
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorError::Device(e) => write!(f, "{e}"),
            TensorError::DType { op, expected, got } => {
                write!(f, "{op}: tensor has dtype {expected}, asked for {got}")
            }
        }
    }
}

impl std::error::Error for TensorError {}

/// Each snapshot's realized view (what it became on its tensor's device), or the snapshot
/// itself when it needed no realizing.
fn realized_views(
    snaps: &[UOp],
    tensors: &[&Tensor],
    becomes: &HashMap<(&str, UOp), UOp>,
) -> Vec<UOp> {
    snaps
        .iter()
        .zip(tensors)
        .map(|(u, t)| {
            becomes
                .get(&(t.device(), u.clone()))
                .cloned()
                .unwrap_or_else(|| u.clone())
        })
        .collect()
}

/// A tensor to realize and the graph it stood for when read.
type Pending<'a> = (&'a Tensor, &'a UOp);

/// Whether a graph can only be computed on one device (it reads a buffer or copies): only such
/// graphs' results are reused across devices' groups. A graph of constants is the same graph on
/// every device (a replicated multi-device tensor's shards are such graphs), and the buffer one
/// device computed for it must not stand in for it on another.
fn device_bound(u: &UOp) -> bool {
    u.has_copy() || u.toposort().iter().any(|n| n.op() == Ops::Buffer)
}

/// The bytes of the buffer a realized view (a buffer, or reshapes of one) shows.
pub(crate) fn view_bytes(view: &UOp) -> Result<Vec<u8>, DeviceError> {
    view_buffer(view)
        .expect("a realized snapshot is a buffer view")
        .try_to_bytes()
}

/// The buffer under a buffer view (a `Buffer` UOp under reshapes), if `u` is one.
pub(crate) fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    let mut b = u;
    while b.op() == Ops::Reshape {
        b = b.s(0);
    }
    (b.op() == Ops::Buffer).then(|| Buffer::of(b)).flatten()
}

/// `outs` with every `Copy` whose source is not yet a buffer made to copy a buffer instead:
/// each such source is realized on its own device (innermost copies first, so a source that
/// itself copies from a third device finds that copy's source realized). The scheduler, which
/// knows no devices, then turns each `Copy` into a transfer item. `known` holds graphs realized
/// before (graph -> buffer view), reused instead of computed again; the sources realized here
/// are added to it.
pub(crate) fn realize_copy_sources(
    outs: &[UOp],
    known: &mut HashMap<UOp, UOp>,
) -> Result<Vec<UOp>, DeviceError> {
    let mut outs: Vec<UOp> = outs.iter().map(|o| substitute_known(o, known)).collect();
    loop {
        if !outs.iter().any(UOp::has_copy) {
            return Ok(outs);
        }
        let sink = UOp::new(Ops::Sink, DType::VOID, outs.clone(), Arg::None);
        let pending: Vec<UOp> = sink
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Ops::Copy && !is_buffer_view(u.s(0)))
            .collect();
        if pending.is_empty() {
            return Ok(outs);
        }
        // The innermost copies (no pending copy below their source), their sources realized
        // together per source device: work the sources share (a model's forward pass under
        // several partial sums of a multi-device all-reduce) is scheduled once.
        let pending_set: std::collections::HashSet<&UOp> = pending.iter().collect();
        let mut by_from: indexmap::IndexMap<&str, Vec<&UOp>> = Default::default();
        for copy in &pending {
            let inner = copy.s(0).toposort().iter().any(|n| pending_set.contains(n));
            if !inner {
                let (from, _) = copy
                    .arg()
                    .as_copy()
                    .expect("a Copy names its source device");
                by_from.entry(from).or_default().push(copy);
            }
        }
        for (from, copies) in by_from {
            let sources: Vec<Tensor> = copies
                .iter()
                .map(|c| Tensor::from_uop(c.s(0).clone(), from))
                .collect();
            let refs: Vec<&Tensor> = sources.iter().collect();
            let views = Tensor::realize_snapshots_with(&refs, known)?;
            for (copy, view) in copies.into_iter().zip(views) {
                if device_bound(copy.s(0)) {
                    known.insert(copy.s(0).clone(), view.clone());
                }
                let resolved = match crate::multi::parse_multi(from) {
                    // from several devices: the shards copied to the target, side by side
                    Some(devices) => {
                        let (_, to) = copy
                            .arg()
                            .as_copy()
                            .expect("a Copy names its target device");
                        let gathered = crate::multi::gather_to_device(&view, &devices, to);
                        realize_copy_sources(&[gathered], known)?.remove(0)
                    }
                    None => UOp::new(Ops::Copy, copy.dtype(), vec![view], copy.arg().clone()),
                };
                known.insert(copy.clone(), resolved);
            }
        }
        outs = outs.iter().map(|o| substitute_known(o, known)).collect();
    }
}

/// `u` with the nodes `known` holds (graph -> its realized view) replaced: a node rebuilt over
/// replaced sources is looked up again (what a schedule realized may be such a node).
fn substitute_known(u: &UOp, known: &HashMap<UOp, UOp>) -> UOp {
    if known.is_empty() {
        return u.clone();
    }
    let mut done: HashMap<UOp, UOp> = HashMap::new();
    for n in u.toposort_filtered(|n| !known.contains_key(n)) {
        let new = if let Some(r) = known.get(&n) {
            r.clone()
        } else {
            let src: Vec<UOp> = n.src().iter().map(|s| done[s].clone()).collect();
            if src.iter().zip(n.src()).all(|(a, b)| a == b) {
                n.clone()
            } else {
                let rebuilt = n.with_src(src);
                known.get(&rebuilt).cloned().unwrap_or(rebuilt)
            }
        };
        done.insert(n, new);
    }
    done[u].clone()
}

/// The nodes of `roots`' graphs that can only be computed on one device (see [`device_bound`]).
fn device_bound_nodes(roots: &[UOp]) -> std::collections::HashSet<UOp> {
    let sink = UOp::new(Ops::Sink, DType::VOID, roots.to_vec(), Arg::None);
    let mut bound = std::collections::HashSet::new();
    for n in sink.toposort() {
        if matches!(n.op(), Ops::Buffer | Ops::Copy) || n.src().iter().any(|s| bound.contains(s)) {
            bound.insert(n);
        }
    }
    bound
}
