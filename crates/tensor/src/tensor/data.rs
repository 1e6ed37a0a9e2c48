//! Reading data (bytes, vectors, items), moving tensors between devices (`to`, `to_`, `try_to`)
//! and `contiguous`.

use tinygrad_dtype::ConstValue;
use tinygrad_runtime::{DeviceError, get_device};
use tinygrad_uop::{Arg, Ops, UOp};

use super::{Tensor, TensorError, view_bytes};
use crate::Element;

impl Tensor {
    /// The data as little-endian bytes (realizes first).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1u16, 258], &[2]);
    /// assert_eq!(t.try_to_bytes().unwrap(), vec![1, 0, 2, 1]);
    /// ```
    pub fn try_to_bytes(&self) -> Result<Vec<u8>, DeviceError> {
        crate::jit::note_host_read(|| {
            format!("a tensor of shape {:?} ({})", self.shape(), self.dtype())
        });
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
