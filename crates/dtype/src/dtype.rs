//! [`DType`]: a scalar kind, a vector width and (for kernel-level values) a pointer address space.
//!
//! Tensor users only see scalar dtypes (`DType::FLOAT32`, ...). Vector widths (`float4`) and
//! pointers (`float*` in global memory) exist for the kernel IR, exactly as tinygrad's `DType.vec`
//! and `PtrDType` do.

use std::fmt;
use std::str::FromStr;

/// The scalar kind of a dtype. Order of declaration is irrelevant; ordering uses
/// [`Scalar::priority`] then [`Scalar::bitsize`], as tinygrad's `DType.__lt__` does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// No value (the dtype of stores, sinks, loop ends).
    Void,
    /// Index arithmetic: tinygrad's `weakint`/`index`. A signed integer of unbounded width in the
    /// symbolic layer; lowered to `int32`/`int64` by the code generator.
    Index,
    /// `bool`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    UInt8,
    /// `uint16`.
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// 8-bit float, 4 exponent and 3 mantissa bits (OCP "fn" variant: no infinities).
    Fp8E4M3,
    /// 8-bit float, 5 exponent and 2 mantissa bits.
    Fp8E5M2,
    /// IEEE binary16.
    Float16,
    /// bfloat16 (8 exponent, 7 mantissa bits).
    BFloat16,
    /// IEEE binary32.
    Float32,
    /// IEEE binary64.
    Float64,
}

impl Scalar {
    /// tinygrad's promotion priority (higher wins in `least_upper_dtype` ties).
    pub const fn priority(self) -> i8 {
        use Scalar::*;
        match self {
            Void => -1,
            Index | Bool => 0,
            Int8 => 1,
            UInt8 => 2,
            Int16 => 3,
            UInt16 => 4,
            Int32 => 5,
            UInt32 => 6,
            Int64 => 7,
            UInt64 => 8,
            Fp8E4M3 => 9,
            Fp8E5M2 => 10,
            Float16 => 11,
            BFloat16 => 12,
            Float32 => 13,
            Float64 => 14,
        }
    }

    /// Size in bits of one element (`bool` is 1, `index` is 64).
    pub const fn bitsize(self) -> u32 {
        use Scalar::*;
        match self {
            Void => 0,
            Bool => 1,
            Int8 | UInt8 | Fp8E4M3 | Fp8E5M2 => 8,
            Int16 | UInt16 | Float16 | BFloat16 => 16,
            Int32 | UInt32 | Float32 => 32,
            Int64 | UInt64 | Float64 | Index => 64,
        }
    }
}

/// Where a pointer points: tinygrad's `AddrSpace`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum AddrSpace {
    /// Device memory (kernel arguments).
    Global,
    /// Memory shared by a workgroup.
    Local,
    /// Registers (accumulators).
    Reg,
}

/// A data type: scalar kind, vector width (1 for scalars) and optional pointer address space.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DType {
    scalar: Scalar,
    count: u16,
    addr: Option<AddrSpace>,
}

macro_rules! scalar_consts {
    ($($name:ident = $v:ident, $doc:literal;)*) => {
        impl DType {
            $(#[doc = $doc] pub const $name: DType = DType::scalar_of($crate::dtype::Scalar::$v);)*
        }
    };
}

scalar_consts! {
    VOID = Void, "No value.";
    INDEX = Index, "Index arithmetic (tinygrad's `weakint`).";
    BOOL = Bool, "`bool`.";
    INT8 = Int8, "`int8`.";
    INT16 = Int16, "`int16`.";
    INT32 = Int32, "`int32`.";
    INT64 = Int64, "`int64`.";
    UINT8 = UInt8, "`uint8`.";
    UINT16 = UInt16, "`uint16`.";
    UINT32 = UInt32, "`uint32`.";
    UINT64 = UInt64, "`uint64`.";
    FP8E4M3 = Fp8E4M3, "`float8_e4m3`.";
    FP8E5M2 = Fp8E5M2, "`float8_e5m2`.";
    FLOAT16 = Float16, "`float16` (half).";
    BFLOAT16 = BFloat16, "`bfloat16`.";
    FLOAT32 = Float32, "`float32`.";
    FLOAT64 = Float64, "`float64`.";
}

impl DType {
    /// Every dtype a tensor can hold, in tinygrad's priority order.
    pub const ALL: [DType; 15] = [
        DType::BOOL,
        DType::INT8,
        DType::UINT8,
        DType::INT16,
        DType::UINT16,
        DType::INT32,
        DType::UINT32,
        DType::INT64,
        DType::UINT64,
        DType::FP8E4M3,
        DType::FP8E5M2,
        DType::FLOAT16,
        DType::BFLOAT16,
        DType::FLOAT32,
        DType::FLOAT64,
    ];

    /// The scalar dtype of a kind.
    pub const fn scalar_of(scalar: Scalar) -> DType {
        DType {
            scalar,
            count: 1,
            addr: None,
        }
    }

    /// The scalar kind (ignores vector width and pointer-ness).
    pub const fn kind(self) -> Scalar {
        self.scalar
    }

    /// Vector width (1 for scalars).
    pub const fn count(self) -> usize {
        self.count as usize
    }

    /// The address space if this is a pointer.
    pub const fn addr_space(self) -> Option<AddrSpace> {
        self.addr
    }

    /// Whether this is a pointer dtype.
    pub const fn is_ptr(self) -> bool {
        self.addr.is_some()
    }

    /// The element dtype: drops vector width and pointer-ness.
    pub const fn scalar(self) -> DType {
        DType::scalar_of(self.scalar)
    }

    /// The pointed-to (or plain) value dtype: drops pointer-ness, keeps vector width.
    pub const fn base(self) -> DType {
        DType {
            scalar: self.scalar,
            count: self.count,
            addr: None,
        }
    }

    /// A vector of `n` of this scalar dtype (`n == 1` gives the scalar back).
    ///
    /// # Panics
    /// If `self` is already a vector or pointer, or `n` is 0 or above 65535.
    pub fn vec(self, n: usize) -> DType {
        assert!(
            self.count == 1 && self.addr.is_none(),
            "DType::vec: can't vectorize {self:?} (expected a scalar dtype)"
        );
        assert!(
            (1..=u16::MAX as usize).contains(&n),
            "DType::vec: width {n} out of range 1..=65535"
        );
        if self.scalar == Scalar::Void {
            return self;
        }
        DType {
            scalar: self.scalar,
            count: n as u16,
            addr: None,
        }
    }

    /// A pointer to this dtype in address space `addr`.
    ///
    /// # Panics
    /// If `self` is already a pointer.
    pub fn ptr(self, addr: AddrSpace) -> DType {
        assert!(
            self.addr.is_none(),
            "DType::ptr: {self:?} is already a pointer"
        );
        DType {
            addr: Some(addr),
            ..self
        }
    }

    /// Promotion priority of the scalar kind.
    pub const fn priority(self) -> i8 {
        self.scalar.priority()
    }

    /// Size in bits of the whole value (scalar bits times vector width).
    pub const fn bitsize(self) -> u32 {
        self.scalar.bitsize() * self.count as u32
    }

    /// Size in bytes of one element of this dtype in memory (bool: 1, vectors: the whole vector).
    pub const fn itemsize(self) -> usize {
        self.bitsize().div_ceil(8) as usize
    }

    /// Floating point (fp8, f16, bf16, f32, f64).
    pub const fn is_float(self) -> bool {
        use Scalar::*;
        matches!(
            self.scalar,
            Fp8E4M3 | Fp8E5M2 | Float16 | BFloat16 | Float32 | Float64
        )
    }

    /// Integer, signed or unsigned, including `index` (not bool).
    pub const fn is_int(self) -> bool {
        use Scalar::*;
        matches!(
            self.scalar,
            Index | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64
        )
    }

    /// Unsigned integer.
    pub const fn is_unsigned(self) -> bool {
        use Scalar::*;
        matches!(self.scalar, UInt8 | UInt16 | UInt32 | UInt64)
    }

    /// `bool`.
    pub const fn is_bool(self) -> bool {
        matches!(self.scalar, Scalar::Bool)
    }

    /// fp8 (either layout).
    pub const fn is_fp8(self) -> bool {
        matches!(self.scalar, Scalar::Fp8E4M3 | Scalar::Fp8E5M2)
    }

    /// Floating point `(exponent bits, mantissa bits)`, as tinygrad's `dtypes.finfo`.
    /// `None` for non-float dtypes.
    pub const fn finfo(self) -> Option<(u32, u32)> {
        use Scalar::*;
        match self.scalar {
            Float16 => Some((5, 10)),
            BFloat16 => Some((8, 7)),
            Float32 => Some((8, 23)),
            Float64 => Some((11, 52)),
            Fp8E4M3 => Some((4, 3)),
            Fp8E5M2 => Some((5, 2)),
            _ => None,
        }
    }

    /// The smallest value of the dtype: `false`, the integer minimum, `-inf` for floats (`-448`
    /// for `fp8e4m3`, which has no infinities: `-inf` would become NaN).
    pub fn min(self) -> crate::ConstValue {
        use crate::ConstValue;
        let s = self.scalar();
        if s.is_bool() {
            ConstValue::Bool(false)
        } else if s.is_unsigned() {
            ConstValue::UInt(0)
        } else if s.is_int() {
            let bits = if s == DType::INDEX { 64 } else { s.bitsize() };
            ConstValue::Int(i64::MIN >> (64 - bits))
        } else if s == DType::FP8E4M3 {
            ConstValue::Float(-448.0)
        } else {
            ConstValue::Float(f64::NEG_INFINITY)
        }
    }

    /// The largest value of the dtype: `true`, the integer maximum, `+inf` for floats (`448` for
    /// `fp8e4m3`, which has no infinities).
    pub fn max(self) -> crate::ConstValue {
        use crate::ConstValue;
        let s = self.scalar();
        if s.is_bool() {
            ConstValue::Bool(true)
        } else if s.is_unsigned() {
            ConstValue::UInt(u64::MAX >> (64 - s.bitsize()))
        } else if s.is_int() {
            ConstValue::Int(i64::MAX >> (64 - s.bitsize()))
        } else if s == DType::FP8E4M3 {
            ConstValue::Float(448.0)
        } else {
            ConstValue::Float(f64::INFINITY)
        }
    }

    /// The canonical name, as tinygrad's `dtypes.<name>` (e.g. `float32`, `bfloat16`, `fp8e4m3`).
    pub const fn name(self) -> &'static str {
        use Scalar::*;
        match self.scalar {
            Void => "void",
            Index => "index",
            Bool => "bool",
            Int8 => "int8",
            Int16 => "int16",
            Int32 => "int32",
            Int64 => "int64",
            UInt8 => "uint8",
            UInt16 => "uint16",
            UInt32 => "uint32",
            UInt64 => "uint64",
            Fp8E4M3 => "fp8e4m3",
            Fp8E5M2 => "fp8e5m2",
            Float16 => "float16",
            BFloat16 => "bfloat16",
            Float32 => "float32",
            Float64 => "float64",
        }
    }

    /// The C-like type name tinygrad's renderers use (`float`, `unsigned char`, `half`, ...).
    pub const fn c_name(self) -> &'static str {
        use Scalar::*;
        match self.scalar {
            Void => "void",
            Index => "long",
            Bool => "bool",
            Int8 => "signed char",
            Int16 => "short",
            Int32 => "int",
            Int64 => "long",
            UInt8 => "unsigned char",
            UInt16 => "unsigned short",
            UInt32 => "unsigned int",
            UInt64 => "unsigned long",
            Fp8E4M3 => "float8_e4m3",
            Fp8E5M2 => "float8_e5m2",
            Float16 => "half",
            BFloat16 => "__bf16",
            Float32 => "float",
            Float64 => "double",
        }
    }

    /// The ordering key tinygrad sorts dtypes by: `(priority, bitsize, name)`.
    fn order_key(self) -> (i8, u32, &'static str, u16, Option<AddrSpace>) {
        (
            self.priority(),
            self.scalar.bitsize(),
            self.name(),
            self.count,
            self.addr,
        )
    }
}

impl PartialOrd for DType {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DType {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order_key().cmp(&other.order_key())
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dtypes.{}", self.name())?;
        if self.count != 1 {
            write!(f, ".vec({})", self.count)?;
        }
        if let Some(a) = self.addr {
            write!(f, ".ptr({a:?})")?;
        }
        Ok(())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        if self.count != 1 {
            write!(f, "x{}", self.count)?;
        }
        if self.addr.is_some() {
            f.write_str("*")?;
        }
        Ok(())
    }
}

/// A dtype name that is not one of tinygrad's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseDTypeError {
    /// The name that was given.
    pub name: String,
}

/// Every name [`DType::from_str`] accepts, canonical names first, then tinygrad's aliases.
pub const DTYPE_NAMES: &[(&str, DType)] = &[
    ("bool", DType::BOOL),
    ("int8", DType::INT8),
    ("int16", DType::INT16),
    ("int32", DType::INT32),
    ("int64", DType::INT64),
    ("uint8", DType::UINT8),
    ("uint16", DType::UINT16),
    ("uint32", DType::UINT32),
    ("uint64", DType::UINT64),
    ("fp8e4m3", DType::FP8E4M3),
    ("fp8e5m2", DType::FP8E5M2),
    ("float16", DType::FLOAT16),
    ("bfloat16", DType::BFLOAT16),
    ("float32", DType::FLOAT32),
    ("float64", DType::FLOAT64),
    ("half", DType::FLOAT16),
    ("float", DType::FLOAT32),
    ("double", DType::FLOAT64),
    ("uchar", DType::UINT8),
    ("ushort", DType::UINT16),
    ("uint", DType::UINT32),
    ("ulong", DType::UINT64),
    ("char", DType::INT8),
    ("short", DType::INT16),
    ("int", DType::INT32),
    ("long", DType::INT64),
];

impl fmt::Display for ParseDTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = DTYPE_NAMES.iter().map(|(n, _)| *n).collect();
        write!(
            f,
            "unknown dtype {:?}; valid names: {}",
            self.name,
            names.join(", ")
        )
    }
}

impl std::error::Error for ParseDTypeError {}

impl FromStr for DType {
    type Err = ParseDTypeError;

    /// Parses a tinygrad dtype name or alias, case-insensitively (`"float32"`, `"half"`, ...).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        DTYPE_NAMES
            .iter()
            .find(|(n, _)| *n == lower)
            .map(|(_, d)| *d)
            .ok_or_else(|| ParseDTypeError {
                name: s.to_string(),
            })
    }
}
