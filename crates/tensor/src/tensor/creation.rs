//! Creating tensors: from data (`from_slice`, `from_bytes`, `from_vec`, `scalar`), constants
//! (`full`, `zeros`, `ones`, `empty`, `*_like`), ranges (`arange`, `linspace`) and `eye`.

use tinygrad_dtype::{ConstValue, DType};
use tinygrad_runtime::{Buffer, DeviceError, default_device};
use tinygrad_uop::shape::numel_or_panic;
use tinygrad_uop::{Arg, Ops, UOp};

use super::{Tensor, reshape_uop};
use crate::Element;

impl Tensor {
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
            if let [one] = devices.as_slice() {
                // a tuple of one device is that device (tinygrad's `device=("CPU",)`)
                return Tensor::from_bytes(bytes, dtype, shape, one);
            }
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
            // a new buffer of each shard's shape on each device, as tinygrad's (no copies)
            return crate::multi::empty_like_multi(t);
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

    /// `value` with the shape, dtype and device of `t` (for a sharded `t`, sharded alike: each
    /// device holds its shard, as tinygrad's).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[2, 3], DType::FLOAT32);
    /// assert_eq!(Tensor::full_like(&t, 42).to_vec::<f32>(), vec![42.0; 6]);
    /// ```
    pub fn full_like(t: &Tensor, value: impl Into<ConstValue>) -> Tensor {
        if crate::multi::is_multi(t.device()) && t.shard_axis().is_some() {
            // sharded as `t` is: each device's shard of the value (tinygrad's `_multi_like`)
            let value = value.into();
            return crate::multi::multi_like(t, |shape, d| {
                Tensor::full_on(shape, value, t.dtype(), d)
            });
        }
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
}
