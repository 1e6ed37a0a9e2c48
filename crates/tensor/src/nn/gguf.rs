//! [GGUF](https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) files (llama.cpp's weight
//! format), as tinygrad's `nn.state.gguf_load`: the metadata key-value pairs and the tensors.
//!
//! GGUF versions 2 and 3 (little-endian) load. The data section starts at the header's end rounded
//! up to `general.alignment` (32 when absent). Shapes are GGUF's `ne` dimensions reversed (numpy
//! order: `ne = [cols, rows]` is a `[rows, cols]` tensor), as in tinygrad.
//!
//! - `F32`, `F16`, `BF16`, `F64`, `I8`, `I16`, `I32`, `I64` tensors keep their dtype.
//! - The quantized types `Q4_0`, `Q4_1`, `Q5_0`, `Q5_1`, `Q8_0`, `Q4_K` and `Q6_K` are dequantized
//!   to `FLOAT32` lazily, with tensor ops on the raw blocks (uploaded as one `UINT8` tensor and
//!   unpacked with shifts, masks, bitcasts and multiplies, as tinygrad's `ggml_data_to_tensor`):
//!   the values are bit-exact with the `gguf` Python package's `gguf.quants.dequantize`.
//!   Other types (`Q2_K`, `IQ*`, ...) are `Err`s naming the tensor.
//!
//! Every count, length, offset and size in the header is checked against the file's size before
//! anything is allocated, with overflow-checked arithmetic: a truncated, corrupted or hostile
//! file is an `Err` naming the file (and the tensor at fault), never a panic or a huge allocation.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs::File;
use std::path::Path;

use indexmap::IndexMap;
use tinygrad_dtype::DType;
use tinygrad_runtime::default_device;

use crate::Tensor;
use crate::nn::quant::QuantizedTensor;
use tinygrad_runtime::quant::QuantType;

/// A GGUF metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// `UINT8` (type 0).
    U8(u8),
    /// `INT8` (type 1).
    I8(i8),
    /// `UINT16` (type 2).
    U16(u16),
    /// `INT16` (type 3).
    I16(i16),
    /// `UINT32` (type 4).
    U32(u32),
    /// `INT32` (type 5).
    I32(i32),
    /// `UINT64` (type 10).
    U64(u64),
    /// `INT64` (type 11).
    I64(i64),
    /// `FLOAT32` (type 6).
    F32(f32),
    /// `FLOAT64` (type 12).
    F64(f64),
    /// `BOOL` (type 7).
    Bool(bool),
    /// `STRING` (type 8, UTF-8).
    String(String),
    /// `ARRAY` (type 9): values of one type, possibly arrays themselves.
    Array(Vec<GgufValue>),
}

impl GgufValue {
    /// The value of any integer variant as a `u64` (`None` for a negative value or another
    /// variant).
    ///
    /// ```
    /// use tinygrad_tensor::nn::gguf::GgufValue;
    /// assert_eq!(GgufValue::U32(32).as_u64(), Some(32));
    /// assert_eq!(GgufValue::I8(7).as_u64(), Some(7));
    /// assert_eq!(GgufValue::I64(-1).as_u64(), None);
    /// assert_eq!(GgufValue::F32(1.0).as_u64(), None);
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value of any integer variant as an `i64` (`None` for a `U64` above `i64::MAX` or
    /// another variant).
    ///
    /// ```
    /// use tinygrad_tensor::nn::gguf::GgufValue;
    /// assert_eq!(GgufValue::I16(-300).as_i64(), Some(-300));
    /// assert_eq!(GgufValue::U8(255).as_i64(), Some(255));
    /// assert_eq!(GgufValue::U64(u64::MAX).as_i64(), None);
    /// assert_eq!(GgufValue::Bool(true).as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => i64::try_from(v).ok(),
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The value of a float variant as an `f64` (`F32` widened exactly; `None` otherwise).
    ///
    /// ```
    /// use tinygrad_tensor::nn::gguf::GgufValue;
    /// assert_eq!(GgufValue::F32(0.1).as_f64(), Some(f64::from(0.1f32)));
    /// assert_eq!(GgufValue::F64(2.5).as_f64(), Some(2.5));
    /// assert_eq!(GgufValue::I32(2).as_f64(), None);
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value of a `String`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::gguf::GgufValue;
    /// assert_eq!(GgufValue::String("llama".into()).as_str(), Some("llama"));
    /// assert_eq!(GgufValue::U8(1).as_str(), None);
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items of an `Array`.
    ///
    /// ```
    /// use tinygrad_tensor::nn::gguf::GgufValue;
    /// let v = GgufValue::Array(vec![GgufValue::String("a".into()), GgufValue::String("b".into())]);
    /// let items: Vec<&str> = v.as_array().unwrap().iter().filter_map(|x| x.as_str()).collect();
    /// assert_eq!(items, ["a", "b"]);
    /// assert!(GgufValue::I32(3).as_array().is_none());
    /// ```
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(v) => Some(v),
            _ => None,
        }
    }
}

/// A GGUF error: the file (or `<bytes>` for in-memory data), the tensor if one is at fault, and
/// what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufError {
    /// The file path.
    pub path: String,
    /// The tensor at fault, if any.
    pub tensor: Option<String>,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tensor {
            Some(t) => write!(f, "gguf {}: tensor `{t}`: {}", self.path, self.message),
            None => write!(f, "gguf {}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for GgufError {}

/// A loaded GGUF file.
#[derive(Debug, Clone)]
pub struct Gguf {
    /// The metadata key-value pairs, in file order.
    pub metadata: IndexMap<String, GgufValue>,
    /// The tensors by name (quantized ones dequantized to `FLOAT32`, unless kept as blocks).
    pub tensors: BTreeMap<String, Tensor>,
    /// With [`gguf_load_quantized_on`]: the 2-D tensors of a block type the CPU's native
    /// products read, kept as their blocks (not in `tensors`).
    pub quantized: BTreeMap<String, QuantizedTensor>,
    /// The tensor names in file order.
    pub tensor_order: Vec<String>,
}

/// Loads a GGUF file onto the default device.
///
/// ```
/// use tinygrad_tensor::{DType, nn::gguf::gguf_load};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/quants.gguf");
/// let g = gguf_load(path).unwrap();
/// assert_eq!(g.metadata["general.architecture"].as_str(), Some("testarch"));
/// let q = &g.tensors["q4_0"]; // Q4_0 blocks, ne = [64, 3]
/// assert_eq!((q.shape(), q.dtype()), (vec![3, 64], DType::FLOAT32));
/// assert_eq!(g.tensor_order[0], "f32");
/// ```
///
/// # Errors
/// If the file can't be read, is not GGUF v2/v3, is truncated or malformed, or holds a tensor
/// type this loader lacks.
pub fn gguf_load(path: impl AsRef<Path>) -> Result<Gguf, GgufError> {
    gguf_load_on(path, &default_device())
}

/// [`gguf_load`] onto `device`.
///
/// ```
/// use tinygrad_tensor::nn::gguf::gguf_load_on;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/quants.gguf");
/// let g = gguf_load_on(path, "REF").unwrap();
/// let t = &g.tensors["i32"];
/// assert_eq!((t.device(), t.shape()), ("REF", vec![2, 2]));
/// assert_eq!(g.metadata["test.i8"].as_i64(), Some(-100));
/// ```
///
/// # Errors
/// As [`gguf_load`], or if the device is unknown.
pub fn gguf_load_on(path: impl AsRef<Path>, device: &str) -> Result<Gguf, GgufError> {
    with_file_bytes(path.as_ref(), |bytes, name| {
        load(bytes, name, device, false)
    })
}

/// [`gguf_load_on`], keeping each 2-D quantized tensor whose block type has native products
/// (`Q4_0`, `Q4_1`, `Q5_0`, `Q5_1`, `Q8_0`, `Q4_K`, `Q6_K`) as its blocks, in
/// [`Gguf::quantized`]: the file's bytes in device memory instead of a float32 copy four to
/// seven times larger. Other tensors load as `gguf_load_on` loads them.
///
/// ```
/// use tinygrad_tensor::nn::gguf::gguf_load_quantized_on;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/quants.gguf");
/// let g = gguf_load_quantized_on(path, "CPU").unwrap();
/// let q = &g.quantized["q4_0"]; // Q4_0 blocks, ne = [64, 3]
/// assert_eq!((q.shape(), q.blocks.shape()), (vec![3, 64], vec![3, 36]));
/// assert!(!g.tensors.contains_key("q4_0"));
/// ```
///
/// # Errors
/// As [`gguf_load_on`].
pub fn gguf_load_quantized_on(path: impl AsRef<Path>, device: &str) -> Result<Gguf, GgufError> {
    with_file_bytes(path.as_ref(), |bytes, name| load(bytes, name, device, true))
}

/// Runs `f` on the bytes of the file at `p` (memory-mapped, or read as a stream where it cannot
/// be mapped) and its name for errors.
fn with_file_bytes<T>(
    p: &Path,
    f: impl FnOnce(&[u8], &str) -> Result<T, GgufError>,
) -> Result<T, GgufError> {
    let name = p.display().to_string();
    let file = File::open(p).map_err(|e| err(&name, None, format!("cannot open: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| err(&name, None, format!("cannot stat: {e}")))?;
    if meta.is_dir() {
        return Err(err(&name, None, "is a directory"));
    }
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the mapping is read-only and lives only while `f` runs; the loaders copy
        // out what they keep (the tensors' bytes, the metadata). Another process truncating or
        // rewriting the file meanwhile could change or invalidate the mapped bytes: as with
        // every memory-mapped reader, the file must not be modified while it is being read.
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
            return f(&map, &name);
        }
    }
    let bytes = read_stream(file, &name)?;
    f(&bytes, &name)
}

/// The metadata key-value pairs of a GGUF file, in file order, without loading its tensors
/// (only the header is read: a tokenizer or a configuration from a multi-gigabyte file).
///
/// ```
/// use tinygrad_tensor::nn::gguf::gguf_metadata;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/quants.gguf");
/// let meta = gguf_metadata(path).unwrap();
/// assert_eq!(meta["general.architecture"].as_str(), Some("testarch"));
/// ```
///
/// # Errors
/// If the file can't be read, is not GGUF v2/v3, or its header is truncated or malformed (its
/// tensors are not checked).
pub fn gguf_metadata(path: impl AsRef<Path>) -> Result<IndexMap<String, GgufValue>, GgufError> {
    with_file_bytes(path.as_ref(), |bytes, name| {
        header(bytes)
            .map(|h| h.metadata)
            .map_err(|f| f.into_err(name))
    })
}

/// Loads GGUF data held in memory (errors name it `<bytes>`).
///
/// ```
/// use tinygrad_tensor::nn::gguf::{GgufValue, gguf_load_bytes};
/// // GGUF v3: 1 tensor, 1 metadata pair
/// let mut b = b"GGUF".to_vec();
/// b.extend(3u32.to_le_bytes());
/// b.extend(1u64.to_le_bytes());
/// b.extend(1u64.to_le_bytes());
/// b.extend(4u64.to_le_bytes()); // key
/// b.extend(b"name");
/// b.extend(8u32.to_le_bytes()); // STRING
/// b.extend(2u64.to_le_bytes());
/// b.extend(b"hi");
/// b.extend(1u64.to_le_bytes()); // tensor name
/// b.extend(b"w");
/// b.extend(2u32.to_le_bytes()); // 2 dims: ne = [3, 2]
/// b.extend(3u64.to_le_bytes());
/// b.extend(2u64.to_le_bytes());
/// b.extend(0u32.to_le_bytes()); // F32
/// b.extend(0u64.to_le_bytes()); // offset in the data section
/// b.resize(b.len().next_multiple_of(32), 0); // default alignment 32
/// for x in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
///     b.extend(x.to_le_bytes());
/// }
/// let g = gguf_load_bytes(&b, "CPU").unwrap();
/// assert_eq!(g.metadata["name"], GgufValue::String("hi".into()));
/// assert_eq!(g.tensors["w"].shape(), vec![2, 3]);
/// assert_eq!(g.tensors["w"].to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// let e = gguf_load_bytes(&b[..b.len() - 1], "CPU").unwrap_err();
/// assert_eq!((e.path.as_str(), e.tensor.as_deref()), ("<bytes>", Some("w")));
/// ```
///
/// # Errors
/// As [`gguf_load_on`].
pub fn gguf_load_bytes(bytes: &[u8], device: &str) -> Result<Gguf, GgufError> {
    load(bytes, "<bytes>", device, false)
}

/// [`gguf_load_bytes`] keeping quantized matrices as blocks, as [`gguf_load_quantized_on`].
///
/// ```
/// use tinygrad_tensor::nn::gguf::gguf_load_quantized_bytes;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/quants.gguf");
/// let g = gguf_load_quantized_bytes(&std::fs::read(path).unwrap(), "CPU").unwrap();
/// assert_eq!(g.quantized["q4_0"].shape(), vec![3, 64]);
/// ```
///
/// # Errors
/// As [`gguf_load_on`].
pub fn gguf_load_quantized_bytes(bytes: &[u8], device: &str) -> Result<Gguf, GgufError> {
    load(bytes, "<bytes>", device, true)
}

fn err(path: &str, tensor: Option<&str>, message: impl Into<String>) -> GgufError {
    GgufError {
        path: path.to_string(),
        tensor: tensor.map(str::to_string),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// header

/// A header parse failure: the bytes ran out (a stream may hold more) or the header is bad.
enum Fail {
    Truncated(Option<String>, String),
    Bad(Option<String>, String),
}

impl Fail {
    fn into_err(self, path: &str) -> GgufError {
        match self {
            Fail::Truncated(t, m) | Fail::Bad(t, m) => err(path, t.as_deref(), m),
        }
    }
}

fn bad(m: impl Into<String>) -> Fail {
    Fail::Bad(None, m.into())
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Fail> {
        if n > self.left() {
            return Err(Fail::Truncated(
                None,
                format!(
                    "truncated: {what} at byte {} needs {n} bytes, the file has {} left",
                    self.pos,
                    self.left()
                ),
            ));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Fail> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Fail> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Fail> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    /// A length or count of items at least `min_size` bytes each, checked against the bytes left.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, Fail> {
        let at = self.pos;
        let n = self.u64(what)?;
        let need = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_size).map(|b| (n, b)));
        match need {
            Some((n, b)) if b <= self.left() => Ok(n),
            _ => Err(Fail::Truncated(
                None,
                format!(
                    "{what} at byte {at} is {n}, more than the {} bytes left can hold",
                    self.left()
                ),
            )),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, Fail> {
        let n = self.count(1, &format!("{what} length"))?;
        let at = self.pos;
        let s = self.take(n, what)?;
        String::from_utf8(s.to_vec())
            .map_err(|e| bad(format!("{what} at byte {at} is not UTF-8: {e}")))
    }
}

/// Nested arrays deeper than this are refused (a hostile file could exhaust the stack).
const MAX_ARRAY_DEPTH: usize = 64;

/// The fewest bytes a value of `typ` takes.
fn min_size(typ: u32) -> Option<usize> {
    Some(match typ {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 | 8 => 8, // a string: its u64 length
        9 => 12,          // an array: its item type and count
        _ => return None,
    })
}

fn value(r: &mut Reader<'_>, typ: u32, depth: usize, key: &str) -> Result<GgufValue, Fail> {
    let what = format!("value of `{key}`");
    Ok(match typ {
        0 => GgufValue::U8(r.arr::<1>(&what)?[0]),
        1 => GgufValue::I8(i8::from_le_bytes(r.arr(&what)?)),
        2 => GgufValue::U16(u16::from_le_bytes(r.arr(&what)?)),
        3 => GgufValue::I16(i16::from_le_bytes(r.arr(&what)?)),
        4 => GgufValue::U32(u32::from_le_bytes(r.arr(&what)?)),
        5 => GgufValue::I32(i32::from_le_bytes(r.arr(&what)?)),
        6 => GgufValue::F32(f32::from_le_bytes(r.arr(&what)?)),
        7 => GgufValue::Bool(r.arr::<1>(&what)?[0] != 0),
        8 => GgufValue::String(r.string(&what)?),
        9 => {
            if depth >= MAX_ARRAY_DEPTH {
                return Err(bad(format!(
                    "value of `{key}`: arrays nested more than {MAX_ARRAY_DEPTH} deep"
                )));
            }
            let at = r.pos;
            let item = r.u32(&what)?;
            let size = min_size(item).ok_or_else(|| {
                bad(format!(
                    "value of `{key}`: array at byte {at} has unknown item type {item}"
                ))
            })?;
            let n = r.count(size, &format!("array length of `{key}`"))?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(value(r, item, depth + 1, key)?);
            }
            GgufValue::Array(items)
        }
        10 => GgufValue::U64(u64::from_le_bytes(r.arr(&what)?)),
        11 => GgufValue::I64(i64::from_le_bytes(r.arr(&what)?)),
        12 => GgufValue::F64(f64::from_le_bytes(r.arr(&what)?)),
        _ => return Err(bad(format!("value of `{key}` has unknown type {typ}"))),
    })
}

/// One tensor's header entry.
struct Info {
    name: String,
    /// GGUF's `ne` (innermost first).
    ne: Vec<u64>,
    typ: u32,
    offset: u64,
}

struct Header {
    metadata: IndexMap<String, GgufValue>,
    infos: Vec<Info>,
    /// Where the data section starts.
    data_start: usize,
}

/// The ggml types this loader reads: (name, elements per block, bytes per block, dtype kept).
fn ggml_type(typ: u32) -> Option<(&'static str, usize, usize, Option<DType>)> {
    Some(match typ {
        0 => ("F32", 1, 4, Some(DType::FLOAT32)),
        1 => ("F16", 1, 2, Some(DType::FLOAT16)),
        2 => ("Q4_0", 32, 18, None),
        3 => ("Q4_1", 32, 20, None),
        6 => ("Q5_0", 32, 22, None),
        7 => ("Q5_1", 32, 24, None),
        8 => ("Q8_0", 32, 34, None),
        12 => ("Q4_K", 256, 144, None),
        14 => ("Q6_K", 256, 210, None),
        24 => ("I8", 1, 1, Some(DType::INT8)),
        25 => ("I16", 1, 2, Some(DType::INT16)),
        26 => ("I32", 1, 4, Some(DType::INT32)),
        27 => ("I64", 1, 8, Some(DType::INT64)),
        28 => ("F64", 1, 8, Some(DType::FLOAT64)),
        30 => ("BF16", 1, 2, Some(DType::BFLOAT16)),
        _ => return None,
    })
}

/// The name of a ggml type this loader lacks (for the error).
fn unsupported_name(typ: u32) -> &'static str {
    match typ {
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        13 => "Q5_K",
        15 => "Q8_K",
        16..=23 | 29 => "an IQ quantization",
        34 | 35 => "a ternary quantization",
        39 => "MXFP4",
        _ => "unknown",
    }
}

fn header(b: &[u8]) -> Result<Header, Fail> {
    let mut r = Reader { b, pos: 0 };
    let magic = r.take(4, "magic")?;
    if magic != b"GGUF" {
        return Err(bad(format!(
            "not a GGUF file (magic {magic:02x?}, expected \"GGUF\")"
        )));
    }
    let version = r.u32("version")?;
    if version != 2 && version != 3 {
        return Err(bad(format!(
            "GGUF version {version} is not supported (only 2 and 3)"
        )));
    }
    // every tensor entry takes at least 8 (name) + 4 (dims) + 4 (type) + 8 (offset) bytes; every
    // metadata pair at least 8 (key) + 4 (type) + 1
    let n_tensors = r.count(24, "tensor count")?;
    let n_kv = r.count(13, "metadata count")?;
    let mut metadata = IndexMap::with_capacity(n_kv);
    for _ in 0..n_kv {
        let at = r.pos;
        let key = r.string("metadata key")?;
        let typ = r.u32(&format!("type of `{key}`"))?;
        let v = value(&mut r, typ, 0, &key)?;
        if metadata.insert(key.clone(), v).is_some() {
            return Err(bad(format!(
                "metadata key `{key}` at byte {at} is repeated"
            )));
        }
    }
    let mut infos = Vec::with_capacity(n_tensors);
    let mut seen = HashSet::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = r.string("tensor name")?;
        let t = |m: String| Fail::Bad(Some(name.clone()), m);
        let at = r.pos;
        let n_dims = r.u32("dimension count")? as usize;
        if n_dims.checked_mul(8).is_none_or(|b| b > r.left()) {
            return Err(Fail::Truncated(
                Some(name.clone()),
                format!(
                    "dimension count {n_dims} at byte {at} is more than the {} bytes left can hold",
                    r.left()
                ),
            ));
        }
        let mut ne = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            ne.push(r.u64("dimension")?);
        }
        let typ = r.u32("tensor type")?;
        let offset = r.u64("tensor offset")?;
        if !seen.insert(name.clone()) {
            return Err(t("the tensor name is repeated".into()));
        }
        infos.push(Info {
            name,
            ne,
            typ,
            offset,
        });
    }
    let align = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => v
            .as_u64()
            .filter(|&a| a > 0)
            .and_then(|a| usize::try_from(a).ok())
            .ok_or_else(|| bad(format!("general.alignment {v:?} is not a positive integer")))?,
    };
    let data_start = r.pos.checked_next_multiple_of(align).ok_or_else(|| {
        bad(format!(
            "general.alignment {align} overflows the data offset"
        ))
    })?;
    Ok(Header {
        metadata,
        infos,
        data_start,
    })
}

/// The byte range (from the data section's start) and shape of a tensor, and its type.
struct Layout {
    start: usize,
    nbytes: usize,
    shape: Vec<usize>,
    numel: usize,
    block: usize,
    bpb: usize,
    keep: Option<DType>,
    type_name: &'static str,
}

fn layout(info: &Info) -> Result<Layout, String> {
    let (type_name, block, bpb, keep) = ggml_type(info.typ).ok_or_else(|| {
        format!(
            "ggml type {} ({}) is not supported",
            info.typ,
            unsupported_name(info.typ)
        )
    })?;
    let shape: Vec<usize> = info
        .ne
        .iter()
        .rev()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is too large")))
        .collect::<Result<_, _>>()?;
    let out = keep.unwrap_or(DType::FLOAT32);
    let numel = tinygrad_uop::shape::checked_numel(&shape, out.itemsize()).ok_or_else(|| {
        format!("shape {shape:?} ({type_name}) is too large for a tensor of {out}")
    })?;
    if block > 1 {
        let ne0 = shape.last().copied().unwrap_or(1);
        if ne0 % block != 0 {
            return Err(format!(
                "{type_name} rows of {ne0} elements are not a whole number of {block}-element \
                 blocks"
            ));
        }
    }
    let nbytes = (numel / block)
        .checked_mul(bpb)
        .ok_or_else(|| format!("shape {shape:?} ({type_name}) overflows its byte size"))?;
    let start = usize::try_from(info.offset)
        .map_err(|_| format!("data offset {} is past the end", info.offset))?;
    Ok(Layout {
        start,
        nbytes,
        shape,
        numel,
        block,
        bpb,
        keep,
        type_name,
    })
}

/// Reads a GGUF stream (not a regular file): enough for the header (parsed as bytes come, in
/// growing chunks), then exactly the data its tensors cover (a never-ending stream is bounded by
/// what the header declares).
fn read_stream(file: File, name: &str) -> Result<Vec<u8>, GgufError> {
    use std::io::Read;
    let read_err = |e: std::io::Error| err(name, None, format!("cannot read: {e}"));
    let mut bytes = Vec::new();
    let mut r = file;
    let mut chunk = 1usize << 16;
    let end = loop {
        let before = bytes.len();
        (&mut r)
            .take(chunk as u64)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        let eof = bytes.len() - before < chunk;
        match header(&bytes) {
            Ok(h) => {
                let mut end = h.data_start;
                for info in &h.infos {
                    // a bad entry is reported by the parse of the whole file
                    if let Ok(l) = layout(info) {
                        let e = h
                            .data_start
                            .saturating_add(l.start)
                            .saturating_add(l.nbytes);
                        end = end.max(e);
                    }
                }
                break end;
            }
            Err(Fail::Truncated(..)) if !eof => chunk = chunk.saturating_mul(2),
            Err(_) => return Ok(bytes), // the parse reports it
        }
    };
    if end > bytes.len() {
        let want = end - bytes.len();
        let _ = bytes.try_reserve_exact(want.min(1 << 26));
        r.take(want as u64)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
    }
    Ok(bytes)
}

// ---------------------------------------------------------------------------------------------
// tensors

fn load(bytes: &[u8], name: &str, device: &str, keep_quantized: bool) -> Result<Gguf, GgufError> {
    let device = tinygrad_runtime::get_device(device)
        .map_err(|e| err(name, None, e.to_string()))?
        .name()
        .to_string();
    let h = header(bytes).map_err(|f| f.into_err(name))?;
    let data_len = bytes.len().checked_sub(h.data_start).ok_or_else(|| {
        err(
            name,
            None,
            format!(
                "truncated: the data section starts at byte {} (aligned), the file has {} bytes",
                h.data_start,
                bytes.len()
            ),
        )
    })?;
    let data = &bytes[h.data_start..];
    // validate every entry before building any tensor
    let mut layouts = Vec::with_capacity(h.infos.len());
    for info in &h.infos {
        let l = layout(info).map_err(|m| err(name, Some(&info.name), m))?;
        if l.start.checked_add(l.nbytes).is_none_or(|e| e > data_len) {
            return Err(err(
                name,
                Some(&info.name),
                format!(
                    "truncated: its {} bytes ({}, shape {:?}) at data offset {} run past the \
                     data section's {data_len} bytes",
                    l.nbytes, l.type_name, l.shape, info.offset
                ),
            ));
        }
        layouts.push(l);
    }
    let mut tensors = BTreeMap::new();
    let mut quantized = BTreeMap::new();
    let mut order = Vec::with_capacity(h.infos.len());
    for (info, l) in h.infos.iter().zip(&layouts) {
        let raw = &data[l.start..l.start + l.nbytes];
        // (a 2-D tensor's rows are whole blocks: `layout` checked that ne[0] is a multiple of
        // the block)
        match QuantType::from_name(l.type_name) {
            Some(ty) if keep_quantized && l.shape.len() == 2 && l.numel > 0 => {
                let q = QuantizedTensor::from_blocks(raw, ty, l.shape[0], l.shape[1], &device);
                quantized.insert(info.name.clone(), q);
            }
            _ => {
                tensors.insert(info.name.clone(), to_tensor(raw, l, &device));
            }
        }
        order.push(info.name.clone());
    }
    Ok(Gguf {
        metadata: h.metadata,
        tensors,
        quantized,
        tensor_order: order,
    })
}

/// The tensor of a validated entry: its bytes (exactly `l.nbytes`) as `l.keep`, or dequantized.
fn to_tensor(raw: &[u8], l: &Layout, device: &str) -> Tensor {
    if let Some(dt) = l.keep {
        return Tensor::from_bytes(raw, dt, &l.shape, device);
    }
    if l.numel == 0 {
        return Tensor::from_bytes(&[], DType::FLOAT32, &l.shape, device);
    }
    let nb = l.numel / l.block;
    let blocks = Tensor::from_bytes(raw, DType::UINT8, &[nb, l.bpb], device);
    let shape: Vec<isize> = l.shape.iter().map(|&d| d as isize).collect();
    dequantize(&blocks, l.type_name, nb, device).reshape(&shape)
}

/// Columns `a..b` of the `[nb, bpb]` blocks.
fn cols(blocks: &Tensor, nb: usize, a: usize, b: usize) -> Tensor {
    blocks.shrink(&[(0, nb), (a, b)])
}

/// The little-endian fp16 at byte `off` of each block, as `[nb, 1]` float32.
fn f16_at(blocks: &Tensor, nb: usize, off: usize) -> Tensor {
    let lo = cols(blocks, nb, off, off + 1).cast(DType::UINT16);
    let hi = cols(blocks, nb, off + 1, off + 2)
        .cast(DType::UINT16)
        .lshift(8u16);
    lo.bitwise_or(&hi)
        .bitcast(DType::FLOAT16)
        .cast(DType::FLOAT32)
}

/// The low nibbles then the high nibbles of `[.., n]` bytes along the last axis: `[.., 2n]`.
fn nibbles(qs: &Tensor) -> Tensor {
    Tensor::cat(&[&qs.bitwise_and(0x0Fu8), &qs.rshift(4u8)], -1)
}

/// Bit `j` (0..32) of the little-endian u32 at bytes `off..off + 4` of each block: `[nb, 32]`
/// bytes of 0 or 1.
fn bits32(blocks: &Tensor, nb: usize, off: usize, device: &str) -> Tensor {
    let shifts = Tensor::from_slice_on(&[0u8, 1, 2, 3, 4, 5, 6, 7], &[1, 1, 8], device);
    cols(blocks, nb, off, off + 4)
        .reshape(&[nb as isize, 4, 1])
        .rshift(&shifts)
        .bitwise_and(1u8)
        .reshape(&[nb as isize, 32])
}

/// The `[nb, block]` float32 values of quantized blocks (the formulas and the order of their
/// float operations are `gguf.quants`'s, so the results are bit-exact).
pub(crate) fn dequantize(blocks: &Tensor, type_name: &str, nb: usize, device: &str) -> Tensor {
    let n = nb as isize;
    let f32_ = DType::FLOAT32;
    match type_name {
        "Q4_0" => {
            let d = f16_at(blocks, nb, 0);
            let q = nibbles(&cols(blocks, nb, 2, 18))
                .bitcast(DType::INT8)
                .sub(8i8)
                .cast(f32_);
            d.mul(&q)
        }
        "Q4_1" => {
            let (d, m) = (f16_at(blocks, nb, 0), f16_at(blocks, nb, 2));
            let q = nibbles(&cols(blocks, nb, 4, 20)).cast(f32_);
            d.mul(&q).add(&m)
        }
        "Q5_0" => {
            let d = f16_at(blocks, nb, 0);
            let qh = bits32(blocks, nb, 2, device);
            let ql = nibbles(&cols(blocks, nb, 6, 22));
            let q = ql
                .bitwise_or(&qh.lshift(4u8))
                .bitcast(DType::INT8)
                .sub(16i8)
                .cast(f32_);
            d.mul(&q)
        }
        "Q5_1" => {
            let (d, m) = (f16_at(blocks, nb, 0), f16_at(blocks, nb, 2));
            let qh = bits32(blocks, nb, 4, device);
            let ql = nibbles(&cols(blocks, nb, 8, 24));
            let q = ql.bitwise_or(&qh.lshift(4u8)).cast(f32_);
            d.mul(&q).add(&m)
        }
        "Q8_0" => {
            let d = f16_at(blocks, nb, 0);
            let x = cols(blocks, nb, 2, 34).bitcast(DType::INT8).cast(f32_);
            x.mul(&d)
        }
        "Q4_K" => {
            let (d, dmin) = (f16_at(blocks, nb, 0), f16_at(blocks, nb, 2));
            let (s0, s1, s2) = (
                cols(blocks, nb, 4, 8),
                cols(blocks, nb, 8, 12),
                cols(blocks, nb, 12, 16),
            );
            let sc = Tensor::cat(
                &[
                    &s0.bitwise_and(0x3Fu8),
                    &s2.bitwise_and(0x0Fu8)
                        .bitwise_or(&s0.rshift(2u8).bitwise_and(0x30u8)),
                ],
                1,
            );
            let mn = Tensor::cat(
                &[
                    &s1.bitwise_and(0x3Fu8),
                    &s2.rshift(4u8)
                        .bitwise_or(&s1.rshift(2u8).bitwise_and(0x30u8)),
                ],
                1,
            );
            let dd = d.mul(&sc.cast(f32_)).reshape(&[n, 8, 1]);
            let dm = dmin.mul(&mn.cast(f32_)).reshape(&[n, 8, 1]);
            let qs = cols(blocks, nb, 16, 144).reshape(&[n, 4, 1, 32]);
            let q = Tensor::cat(&[&qs.bitwise_and(0x0Fu8), &qs.rshift(4u8)], 2)
                .reshape(&[n, 8, 32])
                .cast(f32_);
            dd.mul(&q).sub(&dm).reshape(&[n, 256])
        }
        "Q6_K" => {
            let scales = cols(blocks, nb, 192, 208).bitcast(DType::INT8).cast(f32_);
            let d = f16_at(blocks, nb, 208);
            let dd = d.mul(&scales).reshape(&[n, 16, 1]);
            let ql = cols(blocks, nb, 0, 128).reshape(&[n, 2, 1, 64]);
            let ql =
                Tensor::cat(&[&ql.bitwise_and(0x0Fu8), &ql.rshift(4u8)], 2).reshape(&[n, 8, 32]);
            let qh = cols(blocks, nb, 128, 192).reshape(&[n, 2, 1, 32]);
            let parts: Vec<Tensor> = [0u8, 2, 4, 6]
                .iter()
                .map(|&s| qh.rshift(s).bitwise_and(0x03u8))
                .collect();
            let qh = Tensor::cat(&parts.iter().collect::<Vec<_>>(), 2).reshape(&[n, 8, 32]);
            let q = ql
                .bitwise_or(&qh.lshift(4u8))
                .bitcast(DType::INT8)
                .sub(32i8)
                .reshape(&[n, 16, 16])
                .cast(f32_);
            dd.mul(&q).reshape(&[n, 256])
        }
        other => unreachable!("ggml_type lists {other} as quantized"),
    }
}
