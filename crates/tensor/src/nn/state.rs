//! Weight files: [safetensors](https://github.com/huggingface/safetensors) load and save, through
//! the `safetensors` crate (the format's reference implementation, which validates the header:
//! its length, JSON, dtypes, and that the tensors' byte ranges tile the data exactly — no gaps,
//! overlaps or offsets past the end).
//!
//! Loading memory-maps the file and copies each tensor straight from the mapping into its device
//! buffer (no intermediate read of the whole file). Every dtype of the format that tinygrad has
//! loads: `BOOL`, `U8`..`U64`, `I8`..`I64`, `F16`, `BF16`, `F32`, `F64`, `F8_E4M3`, `F8_E5M2`.
//! Every error is an `Err` naming the file and, where it applies, the tensor — a truncated,
//! corrupted or hostile file never panics or reads out of bounds.
//!
//! With [`get_state_dict`](super::get_state_dict) and [`load_state_dict`](super::load_state_dict):
//! `safe_save(&get_state_dict(&model), "model.safetensors")?` and
//! `load_state_dict(&mut model, &safe_load("model.safetensors")?, true)?`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};
use tinygrad_dtype::DType;
use tinygrad_runtime::default_device;

use crate::Tensor;

/// A safetensors error: the file (or `<bytes>` for in-memory data), the tensor if one is at
/// fault, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetensorsError {
    /// The file path.
    pub path: String,
    /// The tensor at fault, if any.
    pub tensor: Option<String>,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for SafetensorsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tensor {
            Some(t) => write!(
                f,
                "safetensors {}: tensor `{t}`: {}",
                self.path, self.message
            ),
            None => write!(f, "safetensors {}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for SafetensorsError {}

fn err(path: &str, tensor: Option<&str>, message: impl Into<String>) -> SafetensorsError {
    SafetensorsError {
        path: path.to_string(),
        tensor: tensor.map(str::to_string),
        message: message.into(),
    }
}

/// The tinygrad dtype of a safetensors dtype.
fn from_safe(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::BOOL,
        Dtype::U8 => DType::UINT8,
        Dtype::I8 => DType::INT8,
        Dtype::U16 => DType::UINT16,
        Dtype::I16 => DType::INT16,
        Dtype::U32 => DType::UINT32,
        Dtype::I32 => DType::INT32,
        Dtype::U64 => DType::UINT64,
        Dtype::I64 => DType::INT64,
        Dtype::F16 => DType::FLOAT16,
        Dtype::BF16 => DType::BFLOAT16,
        Dtype::F32 => DType::FLOAT32,
        Dtype::F64 => DType::FLOAT64,
        Dtype::F8_E4M3 => DType::FP8E4M3,
        Dtype::F8_E5M2 => DType::FP8E5M2,
        _ => return None,
    })
}

/// The safetensors dtype of a tinygrad dtype.
fn to_safe(d: DType) -> Option<Dtype> {
    [
        Dtype::BOOL,
        Dtype::U8,
        Dtype::I8,
        Dtype::U16,
        Dtype::I16,
        Dtype::U32,
        Dtype::I32,
        Dtype::U64,
        Dtype::I64,
        Dtype::F16,
        Dtype::BF16,
        Dtype::F32,
        Dtype::F64,
        Dtype::F8_E4M3,
        Dtype::F8_E5M2,
    ]
    .into_iter()
    .find(|&s| from_safe(s) == Some(d))
}

// ---------------------------------------------------------------------------------------------
// loading

/// Loads a safetensors file onto the default device: its tensors by name.
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::{DType, Tensor, nn::state::{safe_load, safe_save}};
/// let path = std::env::temp_dir().join(format!("tg_doc_load_{}.st", std::process::id()));
/// let w = Tensor::from_slice(&[1.5f32, -2.0, 3.0], &[3, 1]);
/// safe_save(&BTreeMap::from([("w".to_string(), w)]), &path).unwrap();
/// let back = safe_load(&path).unwrap();
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!((back["w"].shape(), back["w"].dtype()), (vec![3, 1], DType::FLOAT32));
/// assert_eq!(back["w"].to_vec::<f32>(), vec![1.5, -2.0, 3.0]);
/// ```
///
/// # Errors
/// If the file can't be read, its header is malformed (length, JSON, offsets), or a tensor has a
/// dtype tinygrad lacks (`F4`, `C64`, ...).
pub fn safe_load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>, SafetensorsError> {
    safe_load_on(path, &default_device())
}

/// [`safe_load`] onto `device`.
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::{DType, Tensor, nn::state::{safe_load_on, safe_save}};
/// let path = std::env::temp_dir().join(format!("tg_doc_load_on_{}.st", std::process::id()));
/// let ids = Tensor::from_slice(&[7i64, -1], &[2]);
/// safe_save(&BTreeMap::from([("ids".to_string(), ids)]), &path).unwrap();
/// let back = safe_load_on(&path, "REF").unwrap();
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!((back["ids"].device(), back["ids"].dtype()), ("REF", DType::INT64));
/// assert_eq!(back["ids"].to_vec::<i64>(), vec![7, -1]);
/// ```
///
/// # Errors
/// As [`safe_load`], or if the device is unknown.
pub fn safe_load_on(
    path: impl AsRef<Path>,
    device: &str,
) -> Result<BTreeMap<String, Tensor>, SafetensorsError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    with_file_bytes(p, &name, |bytes| load_bytes(bytes, &name, device))
}

/// The `__metadata__` string map of a safetensors file (`None` when it has none).
///
/// ```
/// use std::collections::{BTreeMap, HashMap};
/// use tinygrad_tensor::{Tensor, nn::state::{safe_load_metadata, safe_save_with_metadata}};
/// let path = std::env::temp_dir().join(format!("tg_doc_meta_{}.st", std::process::id()));
/// let sd = BTreeMap::from([("b".to_string(), Tensor::from_slice(&[0.5f32], &[1]))]);
/// let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
/// safe_save_with_metadata(&sd, Some(&meta), &path).unwrap();
/// let back = safe_load_metadata(&path).unwrap();
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!(back, Some(meta));
/// ```
///
/// # Errors
/// As [`safe_load`].
pub fn safe_load_metadata(
    path: impl AsRef<Path>,
) -> Result<Option<HashMap<String, String>>, SafetensorsError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    with_file_bytes(p, &name, |bytes| {
        let (_, meta) =
            SafeTensors::read_metadata(bytes).map_err(|e| err(&name, None, e.to_string()))?;
        Ok(meta.metadata().clone())
    })
}

/// Loads safetensors data held in memory (errors name it `<bytes>`).
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::{Tensor, nn::state::{safe_load_bytes, safe_save_bytes}};
/// let sd = BTreeMap::from([("m".to_string(), Tensor::from_slice(&[1u8, 2, 3, 4], &[2, 2]))]);
/// let back = safe_load_bytes(&safe_save_bytes(&sd, None).unwrap(), "CPU").unwrap();
/// assert_eq!((back["m"].shape(), back["m"].to_vec::<u8>()), (vec![2, 2], vec![1, 2, 3, 4]));
/// let e = safe_load_bytes(b"short", "CPU").unwrap_err();
/// assert_eq!((e.path.as_str(), e.tensor), ("<bytes>", None));
/// ```
///
/// # Errors
/// As [`safe_load`].
pub fn safe_load_bytes(
    bytes: &[u8],
    device: &str,
) -> Result<BTreeMap<String, Tensor>, SafetensorsError> {
    load_bytes(bytes, "<bytes>", device)
}

/// The largest header the format allows (the `safetensors` crate's limit).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Runs `f` on the file's bytes: memory-mapped for a regular file, else read from the handle
/// already opened (a FIFO or device can be opened only once, or gives different data the second
/// time), bounded by the sizes its header declares (`/dev/zero` never ends).
fn with_file_bytes<R>(
    p: &Path,
    name: &str,
    f: impl FnOnce(&[u8]) -> Result<R, SafetensorsError>,
) -> Result<R, SafetensorsError> {
    let file = File::open(p).map_err(|e| err(name, None, format!("cannot open: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| err(name, None, format!("cannot stat: {e}")))?;
    if meta.is_dir() {
        return Err(err(name, None, "is a directory"));
    }
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the mapping is read-only and lives only during `f`, which copies the tensors
        // out. Another process truncating or rewriting the file meanwhile could change or
        // invalidate the mapped bytes: as with every memory-mapped reader, the file must not be
        // modified while it is being loaded.
        if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
            return f(&map);
        }
    }
    let bytes = read_bounded(file, name)?;
    f(&bytes)
}

/// Reads a safetensors stream from `file`: the header length, the header, then exactly the data
/// bytes the header's offsets cover (plus one, so a longer stream is reported as padded).
fn read_bounded(file: File, name: &str) -> Result<Vec<u8>, SafetensorsError> {
    use std::io::Read;
    let read_err = |e: std::io::Error| err(name, None, format!("cannot read: {e}"));
    let mut r = file.take(8);
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() < 8 {
        return Ok(bytes); // the parser reports the truncation
    }
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    if header_len > MAX_HEADER_BYTES {
        return Err(err(
            name,
            None,
            format!("bad header length {header_len} (more than {MAX_HEADER_BYTES} bytes)"),
        ));
    }
    let mut r = r.into_inner().take(header_len);
    r.read_to_end(&mut bytes).map_err(read_err)?;
    if (bytes.len() as u64) < 8 + header_len {
        return Ok(bytes);
    }
    // The data size is the largest end offset; a header that does not parse reads no data and
    // is reported by the parser.
    let data_len = serde_json::from_slice::<serde_json::Value>(&bytes[8..])
        .ok()
        .and_then(|v| {
            v.as_object().map(|o| {
                o.iter()
                    .filter(|(k, _)| k.as_str() != "__metadata__")
                    .filter_map(|(_, t)| t.get("data_offsets")?.get(1)?.as_u64())
                    .max()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    let mut r = r.into_inner().take(data_len.saturating_add(1));
    let mut data = Vec::new();
    // reserve what the header claims up to 64 MiB (a short stream with a huge claim is then a
    // truncation error, not an allocation failure); beyond that the buffer grows as data comes
    let _ = data.try_reserve_exact(usize::try_from(data_len).unwrap_or(0).min(1 << 26));
    r.read_to_end(&mut data).map_err(read_err)?;
    bytes.extend_from_slice(&data);
    Ok(bytes)
}

fn load_bytes(
    bytes: &[u8],
    name: &str,
    device: &str,
) -> Result<BTreeMap<String, Tensor>, SafetensorsError> {
    let device = tinygrad_runtime::get_device(device)
        .map_err(|e| err(name, None, e.to_string()))?
        .name()
        .to_string();
    if bytes.len() < 8 {
        return Err(err(
            name,
            None,
            format!(
                "truncated: {} bytes, not even the 8-byte header length",
                bytes.len()
            ),
        ));
    }
    let st = SafeTensors::deserialize(bytes).map_err(|e| err(name, None, describe(&e, bytes)))?;
    let mut out = BTreeMap::new();
    for (key, view) in st.iter() {
        let dtype = from_safe(view.dtype()).ok_or_else(|| {
            err(
                name,
                Some(key),
                format!("dtype {:?} is not supported", view.dtype()),
            )
        })?;
        let shape = view.shape().to_vec();
        if tinygrad_uop::shape::checked_numel(&shape, dtype.itemsize()).is_none() {
            return Err(err(
                name,
                Some(key),
                format!(
                    "shape {shape:?} of {dtype} is too large for a tensor (its sizes, zeros \
                     counted as 1, exceed {} bytes)",
                    tinygrad_uop::shape::MAX_BYTES
                ),
            ));
        }
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.itemsize()));
        if n != Some(view.data().len()) {
            return Err(err(
                name,
                Some(key),
                format!(
                    "shape {shape:?} of {dtype} needs {n:?} bytes, the file gives {}",
                    view.data().len()
                ),
            ));
        }
        let t = if dtype == DType::BOOL {
            let norm: Vec<u8> = view.data().iter().map(|&b| u8::from(b != 0)).collect();
            Tensor::from_bytes(&norm, dtype, &shape, &device)
        } else {
            Tensor::from_bytes(view.data(), dtype, &shape, &device)
        };
        out.insert(key.to_string(), t);
    }
    Ok(out)
}

/// The crate's error, with the facts a reader needs to see what is wrong with the file.
fn describe(e: &safetensors::SafeTensorError, bytes: &[u8]) -> String {
    use safetensors::SafeTensorError as E;
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    match e {
        E::InvalidHeaderLength | E::HeaderTooLarge => format!(
            "bad header length {header_len} for a file of {} bytes ({e})",
            bytes.len()
        ),
        E::MetadataIncompleteBuffer => format!(
            "the tensors' data offsets don't cover the {} data bytes exactly (truncated or \
             padded file)",
            bytes.len() as u64 - (8 + header_len).min(bytes.len() as u64)
        ),
        E::InvalidOffset(t) => format!(
            "tensor `{t}` has invalid data offsets (overlapping, out of order or past the end)"
        ),
        E::TensorInvalidInfo => {
            "a tensor's shape and dtype don't match its data offsets".to_string()
        }
        E::ValidationOverflow => "a tensor's shape overflows (hostile header)".to_string(),
        _ => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// saving

/// One tensor's data for the `safetensors` writer.
struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Entry {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn entries(
    tensors: &BTreeMap<String, Tensor>,
    name: &str,
) -> Result<Vec<(String, Entry)>, SafetensorsError> {
    if tensors.contains_key("__metadata__") {
        return Err(err(
            name,
            Some("__metadata__"),
            "the name is reserved for the file's metadata map: the file could not be loaded back",
        ));
    }
    // realize everything first, one schedule per device
    let mut devices: Vec<&str> = tensors.values().map(Tensor::device).collect();
    devices.sort_unstable();
    devices.dedup();
    for dev in devices {
        let on: Vec<&Tensor> = tensors.values().filter(|t| t.device() == dev).collect();
        Tensor::try_realize_all(&on).map_err(|e| err(name, None, e.to_string()))?;
    }
    tensors
        .iter()
        .map(|(k, t)| {
            let dtype = to_safe(t.dtype()).ok_or_else(|| {
                err(
                    name,
                    Some(k),
                    format!("dtype {} has no safetensors equivalent", t.dtype()),
                )
            })?;
            let data = t
                .try_to_bytes()
                .map_err(|e| err(name, Some(k), e.to_string()))?;
            Ok((
                k.clone(),
                Entry {
                    dtype,
                    shape: t.shape(),
                    data,
                },
            ))
        })
        .collect()
}

/// Saves `tensors` (realizing them) as a safetensors file, written to a temporary file next to
/// `path` and renamed (an existing file is replaced whole).
///
/// ```
/// use tinygrad_tensor::nn::state::{safe_load, safe_save};
/// use tinygrad_tensor::nn::{Linear, get_state_dict, load_state_dict};
/// let path = std::env::temp_dir().join(format!("tg_doc_save_{}.st", std::process::id()));
/// let (a, mut b) = (Linear::new(3, 2), Linear::new(3, 2));
/// safe_save(&get_state_dict(&a), &path).unwrap();
/// load_state_dict(&mut b, &safe_load(&path).unwrap(), true).unwrap();
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!(b.weight.to_vec::<f32>(), a.weight.to_vec::<f32>());
/// assert_eq!(b.bias.unwrap().to_vec::<f32>(), a.bias.unwrap().to_vec::<f32>());
/// ```
///
/// # Errors
/// If realizing fails or the file can't be written.
pub fn safe_save(
    tensors: &BTreeMap<String, Tensor>,
    path: impl AsRef<Path>,
) -> Result<(), SafetensorsError> {
    safe_save_with_metadata(tensors, None, path)
}

/// [`safe_save`] with a `__metadata__` string map.
///
/// ```
/// use std::collections::{BTreeMap, HashMap};
/// use tinygrad_tensor::Tensor;
/// use tinygrad_tensor::nn::state::{safe_load, safe_load_metadata, safe_save_with_metadata};
/// let path = std::env::temp_dir().join(format!("tg_doc_save_meta_{}.st", std::process::id()));
/// let sd = BTreeMap::from([("x".to_string(), Tensor::from_slice(&[true, false], &[2]))]);
/// let meta = HashMap::from([("step".to_string(), "100".to_string())]);
/// safe_save_with_metadata(&sd, Some(&meta), &path).unwrap();
/// let (back, m) = (safe_load(&path).unwrap(), safe_load_metadata(&path).unwrap().unwrap());
/// std::fs::remove_file(&path).unwrap();
/// assert_eq!((back["x"].to_vec::<bool>(), m["step"].as_str()), (vec![true, false], "100"));
/// ```
///
/// # Errors
/// As [`safe_save`].
pub fn safe_save_with_metadata(
    tensors: &BTreeMap<String, Tensor>,
    metadata: Option<&HashMap<String, String>>,
    path: impl AsRef<Path>,
) -> Result<(), SafetensorsError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    let es = entries(tensors, &name)?;
    safetensors::serialize_to_file(
        es.iter().map(|(k, e)| (k.as_str(), e)),
        metadata.cloned(),
        p,
    )
    .map_err(|e| err(&name, None, format!("cannot write: {e}")))
}

/// The safetensors bytes of `tensors` (realizing them).
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::{Tensor, nn::state::safe_save_bytes};
/// let sd = BTreeMap::from([("v".to_string(), Tensor::from_slice(&[1.0f32, 2.0], &[2]))]);
/// let bytes = safe_save_bytes(&sd, None).unwrap();
/// let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize; // header length
/// let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
/// assert!(header.contains(r#""v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#));
/// assert_eq!(bytes[8 + n..], [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat()); // data
/// ```
///
/// # Errors
/// If realizing fails.
pub fn safe_save_bytes(
    tensors: &BTreeMap<String, Tensor>,
    metadata: Option<&HashMap<String, String>>,
) -> Result<Vec<u8>, SafetensorsError> {
    let es = entries(tensors, "<bytes>")?;
    safetensors::serialize(es.iter().map(|(k, e)| (k.as_str(), e)), metadata.cloned())
        .map_err(|e| err("<bytes>", None, e.to_string()))
}
