//! [`Element`]: Rust types that can be tensor elements (`f32`, `i64`, `bool`, `f16`, ...).

use half::{bf16, f16};
use tinygrad_dtype::{ConstValue, DType};

/// A Rust type that maps to a tensor dtype.
pub trait Element: Copy + Send + Sync + 'static {
    /// The tensor dtype of this type.
    const DTYPE: DType;
    /// Appends the little-endian bytes of `self`.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads one value from `DTYPE.itemsize()` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
    /// The value as a constant.
    fn to_const(self) -> ConstValue;
}

macro_rules! num_element {
    ($($t:ty => $dt:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            fn write_le(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()); }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element size"))
            }
            fn to_const(self) -> ConstValue { ConstValue::from(self) }
        }
    )*};
}

num_element!(f32 => FLOAT32, f64 => FLOAT64, i8 => INT8, i16 => INT16, i32 => INT32,
    i64 => INT64, u8 => UINT8, u16 => UINT16, u32 => UINT32, u64 => UINT64, f16 => FLOAT16,
    bf16 => BFLOAT16);

impl Element for bool {
    const DTYPE: DType = DType::BOOL;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn to_const(self) -> ConstValue {
        ConstValue::Bool(self)
    }
}
