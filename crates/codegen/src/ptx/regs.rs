//! Registers and types: the register class of each dtype, its PTX arithmetic, bit and memory
//! types, and literals.

use tinygrad_dtype::{ConstValue, DType, Scalar};

/// A PTX register class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Class {
    Pred,
    B16,
    B32,
    B64,
    F32,
    F64,
}

impl Class {
    pub(super) const ALL: [Class; 6] = [
        Class::Pred,
        Class::B16,
        Class::B32,
        Class::B64,
        Class::F32,
        Class::F64,
    ];

    pub(super) fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B16 => ".b16",
            Class::B32 => ".b32",
            Class::B64 => ".b64",
            Class::F32 => ".f32",
            Class::F64 => ".f64",
        }
    }

    pub(super) fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%p",
            Class::B16 => "%h",
            Class::B32 => "%r",
            Class::B64 => "%rd",
            Class::F32 => "%f",
            Class::F64 => "%fd",
        }
    }

    /// The type of a plain move between registers of this class.
    pub(super) fn mov(self) -> &'static str {
        match self {
            Class::Pred => "pred",
            Class::B16 => "b16",
            Class::B32 | Class::F32 => "b32",
            Class::B64 | Class::F64 => "b64",
        }
    }
}

pub(super) fn class_of(dt: DType) -> Result<Class, String> {
    if dt.is_ptr() {
        return Ok(Class::B64);
    }
    if dt.count() != 1 {
        return Err(format!("vector dtype {dt} is not supported yet"));
    }
    Ok(match dt.kind() {
        Scalar::Bool => Class::Pred,
        Scalar::Int8
        | Scalar::Int16
        | Scalar::Int32
        | Scalar::UInt8
        | Scalar::UInt16
        | Scalar::UInt32 => Class::B32,
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => Class::B64,
        Scalar::Float16 | Scalar::BFloat16 => Class::B16,
        Scalar::Float32 => Class::F32,
        Scalar::Float64 => Class::F64,
        other => {
            return Err(format!(
                "dtype {other:?} is not supported by the PTX renderer yet"
            ));
        }
    })
}

pub(super) fn is_half(dt: DType) -> bool {
    matches!(dt.kind(), Scalar::Float16 | Scalar::BFloat16)
}

/// The arithmetic type of an integer or float dtype (`s32` for `int8`..`int32`, which live in
/// 32-bit registers).
pub(super) fn arith(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Int8 | Scalar::Int16 | Scalar::Int32 => "s32",
        Scalar::UInt8 | Scalar::UInt16 | Scalar::UInt32 => "u32",
        Scalar::Int64 | Scalar::Index => "s64",
        Scalar::UInt64 => "u64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("no PTX arithmetic for {other:?}")),
    })
}

/// The bit type of a non-bool register class (`b32`, `b64`, `b16`).
pub(super) fn bits(c: Class) -> &'static str {
    c.mov()
}

/// The memory type for loads (sign/zero extension into the register) of `dt`.
pub(super) fn ld_type(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Bool | Scalar::UInt8 => "u8",
        Scalar::Int8 => "s8",
        Scalar::Int16 => "s16",
        Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => "u16",
        Scalar::Int32 | Scalar::UInt32 => "b32",
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => "b64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("can't load {other:?}")),
    })
}

/// The memory type for stores of `dt`.
pub(super) fn st_type(dt: DType) -> Result<&'static str, String> {
    Ok(match dt.kind() {
        Scalar::Bool | Scalar::UInt8 | Scalar::Int8 => "b8",
        Scalar::Int16 | Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => "b16",
        Scalar::Int32 | Scalar::UInt32 => "b32",
        Scalar::Int64 | Scalar::UInt64 | Scalar::Index => "b64",
        Scalar::Float32 => "f32",
        Scalar::Float64 => "f64",
        other => return Err(format!("can't store {other:?}")),
    })
}

/// The PTX literal of constant `c` as a `dt` register value (canonical for narrow integers).
pub(super) fn literal(c: ConstValue, dt: DType) -> Result<String, String> {
    let v = c.cast(dt);
    Ok(match class_of(dt)? {
        Class::Pred => u8::from(v.as_bool()).to_string(),
        Class::B16 => {
            let b = v.to_le_bytes(dt);
            format!("0x{:04X}", u16::from_le_bytes([b[0], b[1]]))
        }
        Class::B32 => format!("0x{:08X}", v.as_u64() as u32),
        Class::B64 => format!("0x{:016X}", v.as_u64()),
        Class::F32 => format!("0f{:08X}", (v.as_f64() as f32).to_bits()),
        Class::F64 => format!("0d{:016X}", v.as_f64().to_bits()),
    })
}

pub(super) fn lit_f(dt: DType, x: f64) -> String {
    if dt.kind() == Scalar::Float64 {
        format!("0d{:016X}", x.to_bits())
    } else {
        format!("0f{:08X}", (x as f32).to_bits())
    }
}
