//! Casts: `float`, `half`, `bfloat16`, `double`, `int`, `long`, `short`, `bool`, `cast`,
//! `bitcast`.

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::Tensor;

impl Tensor {
    /// `cast(float32)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).float();
    /// assert_eq!(t.dtype(), DType::FLOAT32);
    /// assert_eq!(t.to_vec::<f32>(), vec![-1.0, 2.0, 3.0]);
    /// ```
    pub fn float(&self) -> Tensor {
        self.cast(DType::FLOAT32)
    }

    /// `cast(float16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, f16};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).half();
    /// assert_eq!(t.dtype(), DType::FLOAT16);
    /// assert_eq!(t.to_vec::<f16>(), [-1.0f32, 2.0, 3.0].map(f16::from_f32).to_vec());
    /// ```
    pub fn half(&self) -> Tensor {
        self.cast(DType::FLOAT16)
    }

    /// `cast(bfloat16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor, bf16};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).bfloat16();
    /// assert_eq!(t.dtype(), DType::BFLOAT16);
    /// assert_eq!(t.to_vec::<bf16>(), [-1.0f32, 2.0, 3.0].map(bf16::from_f32).to_vec());
    /// ```
    pub fn bfloat16(&self) -> Tensor {
        self.cast(DType::BFLOAT16)
    }

    /// `cast(float64)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).double();
    /// assert_eq!(t.dtype(), DType::FLOAT64);
    /// assert_eq!(t.to_vec::<f64>(), vec![-1.0, 2.0, 3.0]);
    /// ```
    pub fn double(&self) -> Tensor {
        self.cast(DType::FLOAT64)
    }

    /// `cast(int32)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).int();
    /// assert_eq!(t.dtype(), DType::INT32);
    /// assert_eq!(t.to_vec::<i32>(), vec![-1, 2, 3]);
    /// ```
    pub fn int(&self) -> Tensor {
        self.cast(DType::INT32)
    }

    /// `cast(int64)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).long();
    /// assert_eq!(t.dtype(), DType::INT64);
    /// assert_eq!(t.to_vec::<i64>(), vec![-1, 2, 3]);
    /// ```
    pub fn long(&self) -> Tensor {
        self.cast(DType::INT64)
    }

    /// `cast(int16)`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.5f32, 2.7, 3.0], &[3]).short();
    /// assert_eq!(t.dtype(), DType::INT16);
    /// assert_eq!(t.to_vec::<i16>(), vec![-1, 2, 3]);
    /// ```
    pub fn short(&self) -> Tensor {
        self.cast(DType::INT16)
    }

    /// `cast(bool)` (non-zero is true).
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[0.0f32, 2.5, -1.0], &[3]);
    /// assert_eq!(t.bool().to_vec::<bool>(), vec![false, true, true]);
    /// assert_eq!(t.int().to_vec::<i32>(), vec![0, 2, -1]);
    /// assert_eq!((t.half().dtype(), t.double().dtype()), (DType::FLOAT16, DType::FLOAT64));
    /// assert_eq!((t.bfloat16().dtype(), t.float().dtype()), (DType::BFLOAT16, DType::FLOAT32));
    /// assert_eq!(t.long().to_vec::<i64>(), vec![0, 2, -1]);
    /// assert_eq!(t.short().dtype(), DType::INT16);
    /// ```
    pub fn bool(&self) -> Tensor {
        self.cast(DType::BOOL)
    }

    /// Converts to `dtype` (float -> int truncates toward zero; int casts wrap).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.5, 3.0], &[3]).cast(DType::INT32);
    /// assert_eq!((t.dtype(), t.to_vec::<i32>()), (DType::INT32, vec![-1, 2, 3]));
    /// let t = t.cast(DType::UINT8);
    /// assert_eq!((t.dtype(), t.to_vec::<u8>()), (DType::UINT8, vec![255, 2, 3]));
    /// ```
    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.with_uop(UOp::new(Ops::Cast, dtype, vec![self.uop()], Arg::None))
    }

    /// Reinterprets the bits as `dtype` (same item size).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_slice(&[-1i32, 2, 3], &[3]).bitcast(DType::UINT32);
    /// assert_eq!((t.dtype(), t.to_vec::<u32>()), (DType::UINT32, vec![4294967295, 2, 3]));
    /// ```
    ///
    /// # Panics
    /// If the item sizes differ.
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        assert_eq!(
            self.dtype().itemsize(),
            dtype.itemsize(),
            "bitcast: {} ({} bytes) to {dtype} ({} bytes) changes the item size",
            self.dtype(),
            self.dtype().itemsize(),
            dtype.itemsize()
        );
        if self.dtype() == dtype {
            return self.clone();
        }
        self.with_uop(UOp::new(Ops::Bitcast, dtype, vec![self.uop()], Arg::None))
    }
}
