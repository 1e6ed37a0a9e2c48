//! The lazy [`Tensor`]: a handle to a UOp graph on a device, realized on demand.
//!
//! Module map:
//! - this file: [`Tensor`] (a handle: its graph, device, autograd state, the view it is of),
//!   building tensors over graphs, shape/dtype/device queries, [`TensorError`].
//! - `creation`: tensors from data and constants: `from_slice`, `full`, `zeros`/`ones`,
//!   `empty`, `arange`, `linspace`, `eye`.
//! - `realize`: scheduling and realizing (`schedule`, `realize`), with the copies' sources
//!   realized per device.
//! - `data`: reading data back (`to_vec`, `item`, bytes), moving to a device (`to`, `to_`),
//!   `contiguous`.
//! - `nested`: tensors from nested, Python-style data ([`Data`], `Tensor::new`, the `tensor!`
//!   macro) and back (`tolist`, `item_value`).

mod creation;
mod data;
mod nested;
mod realize;

pub use nested::Data;

pub(crate) use realize::{realize_copy_sources, view_buffer, view_bytes};

use std::fmt;
use std::sync::{Arc, RwLock};

use tinygrad_dtype::DType;
use tinygrad_runtime::DeviceError;
use tinygrad_uop::{Arg, Ops, UOp};

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

/// The shape of a tensor's graph (shared, no copy).
///
/// # Panics
/// If the graph has no shape (never a tensor's: `UOp::shape_vec`'s message).
fn shape_of(u: &UOp) -> std::sync::Arc<[usize]> {
    u.shape()
        .unwrap_or_else(|| panic!("{} has no shape", u.op()))
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
        self.peek_uop(UOp::shape_vec)
    }

    /// `f` of this handle's graph, read in place: no clone of the graph and no note to an
    /// open JIT capture (what the shape and dtype queries use: they read no data).
    fn peek_uop<R>(&self, f: impl FnOnce(&UOp) -> R) -> R {
        f(&self.inner.uop.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Number of dimensions.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[2, 3, 4], DType::FLOAT32).ndim(), 3);
    /// assert_eq!(Tensor::scalar(1.5f32).ndim(), 0);
    /// ```
    pub fn ndim(&self) -> usize {
        self.peek_uop(|u| shape_of(u).len())
    }

    /// Number of elements.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[2, 3, 4], DType::FLOAT32).numel(), 24);
    /// assert_eq!(Tensor::scalar(7i32).numel(), 1);
    /// ```
    pub fn numel(&self) -> usize {
        self.peek_uop(|u| shape_of(u).iter().product())
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
        self.peek_uop(UOp::dtype)
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
