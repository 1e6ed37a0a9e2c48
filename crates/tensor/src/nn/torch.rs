//! PyTorch checkpoints (`torch.save`'s zip format, the default since torch 1.6), as tinygrad's
//! `nn.state.torch_load`: the tensors of the pickled object, by dotted name.
//!
//! The archive (`<name>/data.pkl` and one `<name>/data/<key>` entry per storage) is read with a
//! small zip reader (stored entries, which is how torch writes them; zip64 records; CRC-32s
//! checked), and `data.pkl` with a pickle interpreter for the opcodes of protocols 2 to 5 that
//! checkpoints use. Tensors come from `torch._utils._rebuild_tensor_v2` (any storage offset and
//! strides: transposed, sliced, expanded and permuted views; tensors sharing a storage share one
//! upload), `_rebuild_parameter` (`nn.Parameter`) and `torch._tensor._rebuild_from_type_v2`;
//! storages are `torch.FloatStorage`, `HalfStorage`, `BFloat16Storage`, `DoubleStorage`,
//! `LongStorage`, `IntStorage`, `ShortStorage`, `CharStorage`, `ByteStorage` and `BoolStorage`.
//! A view is built from its storage with movement ops (shrink, pad, reshape, expand, permute), so
//! its values are torch's, strides and all.
//!
//! The object is flattened as tinygrad's `get_state_dict` does: dicts (and `OrderedDict`s, lists
//! and tuples, by index) nest with dots (`{"model": {"w": t}}` gives `"model.w"`); leaves that are
//! not tensors (numbers, strings, objects of other classes) are skipped. A tensor saved alone
//! (`torch.save(t)`) is named `""`.
//!
//! Not supported (an `Err` naming the problem): the legacy pre-1.6 format
//! (`_use_new_zipfile_serialization=False`), compressed zip entries, big-endian checkpoints,
//! quantized, sparse and other `torch.*` rebuilds, pickles' text-protocol opcodes. Every error is
//! an `Err` naming the file and, where known, the tensor: any bytes, however hostile, never panic
//! or allocate beyond what the file holds.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::path::Path;
use std::rc::Rc;

use indexmap::IndexMap;
use tinygrad_dtype::DType;
use tinygrad_runtime::default_device;

use crate::Tensor;

/// A PyTorch checkpoint error: the file (or `<bytes>` for in-memory data), the tensor if one is at
/// fault (its dotted name), and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchError {
    /// The file path.
    pub path: String,
    /// The tensor at fault, if any.
    pub tensor: Option<String>,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for TorchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tensor {
            Some(t) => write!(f, "torch {}: tensor `{t}`: {}", self.path, self.message),
            None => write!(f, "torch {}: {}", self.path, self.message),
        }
    }
}

impl std::error::Error for TorchError {}

fn err(path: &str, tensor: Option<&str>, message: impl Into<String>) -> TorchError {
    TorchError {
        path: path.to_string(),
        tensor: tensor.map(str::to_string),
        message: message.into(),
    }
}

/// Loads a PyTorch checkpoint onto the default device: its tensors by dotted name.
///
/// ```
/// use tinygrad_tensor::{DType, nn::torch::torch_load};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/torch_sd.pt");
/// let sd = torch_load(path).unwrap();
/// assert_eq!((sd["f32"].shape(), sd["f32"].dtype()), (vec![3, 4], DType::FLOAT32));
/// assert_eq!(sd["i64"].to_vec::<i64>(), vec![-3, -2, -1, 0, 1, 2]); // torch.arange(-3, 3)
/// assert_eq!(sd["model.weight"].shape(), vec![2, 3]); // a nested nn.Linear state_dict
/// assert!(!sd.contains_key("step")); // an int: not a tensor
/// ```
///
/// # Errors
/// If the file can't be read, is not a zip checkpoint, or its archive or pickle is malformed or
/// uses what this loader lacks (see the module docs).
pub fn torch_load(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>, TorchError> {
    torch_load_on(path, &default_device())
}

/// [`torch_load`] onto `device`.
///
/// ```
/// use tinygrad_tensor::nn::torch::torch_load_on;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/torch_sd.pt");
/// let sd = torch_load_on(path, "REF").unwrap();
/// let t = &sd["transposed"]; // torch.randn(3, 5).t(): strides (1, 5)
/// assert_eq!((t.device(), t.shape()), ("REF", vec![5, 3]));
/// assert_eq!(sd["scalar"].item::<f32>(), 3.5); // a 0-d tensor
/// ```
///
/// # Errors
/// As [`torch_load`], or if the device is unknown.
pub fn torch_load_on(
    path: impl AsRef<Path>,
    device: &str,
) -> Result<BTreeMap<String, Tensor>, TorchError> {
    let p = path.as_ref();
    let name = p.display().to_string();
    let file = File::open(p).map_err(|e| err(&name, None, format!("cannot open: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| err(&name, None, format!("cannot stat: {e}")))?;
    if !meta.is_file() {
        return Err(err(
            &name,
            None,
            "not a regular file (a zip archive is read from its end)",
        ));
    }
    if meta.len() == 0 {
        return load(&[], &name, device);
    }
    // SAFETY: the mapping is read-only and lives only during the load, which copies the
    // storages' bytes out. Another process truncating or rewriting the file meanwhile could
    // change or invalidate the mapped bytes: as with every memory-mapped reader, the file must
    // not be modified while it is being loaded.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) => load(&map, &name, device),
        Err(_) => {
            use std::io::Read;
            let mut bytes = Vec::new();
            let _ = bytes.try_reserve_exact(usize::try_from(meta.len()).unwrap_or(0));
            file.take(meta.len())
                .read_to_end(&mut bytes)
                .map_err(|e| err(&name, None, format!("cannot read: {e}")))?;
            load(&bytes, &name, device)
        }
    }
}

/// Loads a PyTorch checkpoint held in memory (errors name it `<bytes>`).
///
/// ```
/// use tinygrad_tensor::nn::torch::torch_load_bytes;
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/formats/torch_sd.pt");
/// let bytes = std::fs::read(path).unwrap();
/// let sd = torch_load_bytes(&bytes, "CPU").unwrap();
/// assert_eq!(sd["bool"].to_vec::<bool>(), vec![true, false, true, true]);
/// let e = torch_load_bytes(&bytes[..100], "CPU").unwrap_err();
/// assert_eq!((e.path.as_str(), e.tensor), ("<bytes>", None));
/// ```
///
/// # Errors
/// As [`torch_load_on`].
pub fn torch_load_bytes(
    bytes: &[u8],
    device: &str,
) -> Result<BTreeMap<String, Tensor>, TorchError> {
    load(bytes, "<bytes>", device)
}

fn load(bytes: &[u8], name: &str, device: &str) -> Result<BTreeMap<String, Tensor>, TorchError> {
    let device = tinygrad_runtime::get_device(device)
        .map_err(|e| err(name, None, e.to_string()))?
        .name()
        .to_string();
    let entries = zip_entries(bytes).map_err(|m| err(name, None, m))?;
    // the archive's folder: `<base>/data.pkl`
    let base = entries
        .keys()
        .find_map(|k| {
            k.strip_suffix("/data.pkl")
                .filter(|b| !b.contains('/'))
                .map(str::to_string)
        })
        .ok_or_else(|| {
            err(
                name,
                None,
                "no `<archive>/data.pkl` entry: not a torch.save checkpoint",
            )
        })?;
    if let Some(order) = entries.get(&format!("{base}/byteorder"))
        && *order != b"little"
    {
        return Err(err(
            name,
            None,
            format!(
                "byte order {:?} is not supported (only little-endian)",
                String::from_utf8_lossy(order)
            ),
        ));
    }
    let pkl = entries[&format!("{base}/data.pkl")];
    let root = unpickle(pkl).map_err(|m| err(name, None, format!("data.pkl: {m}")))?;
    let mut ctx = Build {
        entries: &entries,
        base: &base,
        device: &device,
        storages: HashMap::new(),
        out: BTreeMap::new(),
        visits: 0,
        max_visits: pkl.len().saturating_mul(4).saturating_add(1024),
        path: Vec::new(),
    };
    ctx.flatten(&root, String::new(), 0)
        .map_err(|(t, m)| err(name, t.as_deref(), m))?;
    Ok(ctx.out)
}

// ---------------------------------------------------------------------------------------------
// zip

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8)
    })
}

/// The entries of a zip archive by name: each one's bytes (stored entries only).
fn zip_entries(b: &[u8]) -> Result<HashMap<String, &[u8]>, String> {
    let size = b.len();
    let not_zip = || {
        if b.len() >= 2 && b[0] == 0x80 && b[1] <= 5 {
            "not a zip archive: a bare pickle (torch's legacy pre-1.6 format, \
             `_use_new_zipfile_serialization=False`) is not supported"
                .to_string()
        } else {
            format!("not a zip archive ({size} bytes, no end-of-central-directory record)")
        }
    };
    if size < 22 {
        return Err(not_zip());
    }
    // the end-of-central-directory record: within the last 22 + 65535 bytes
    let lowest = size.saturating_sub(22 + 0xFFFF);
    let eocd = (lowest..=size - 22)
        .rev()
        .find(|&i| le32(b, i) == Some(0x0605_4b50))
        .ok_or_else(not_zip)?;
    let trunc = |what: &str| format!("truncated zip: {what}");
    let r16 = |at| le16(b, at).ok_or_else(|| trunc("end record"));
    let r32 = |at| le32(b, at).ok_or_else(|| trunc("end record"));
    let mut count = u64::from(r16(eocd + 10)?);
    let mut cd_size = u64::from(r32(eocd + 12)?);
    let mut cd_off = u64::from(r32(eocd + 16)?);
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_off == 0xFFFF_FFFF {
        // zip64: the locator right before the end record points at the zip64 end record
        let loc = eocd
            .checked_sub(20)
            .filter(|&l| le32(b, l) == Some(0x0706_4b50))
            .ok_or_else(|| "zip64 end record locator missing".to_string())?;
        let at = le64(b, loc + 8)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|&a| le32(b, a) == Some(0x0606_4b50))
            .ok_or_else(|| "zip64 end record missing or out of range".to_string())?;
        let r = |o| le64(b, at + o).ok_or_else(|| trunc("zip64 end record"));
        (count, cd_size, cd_off) = (r(32)?, r(40)?, r(48)?);
    }
    let cd_end = cd_off
        .checked_add(cd_size)
        .filter(|&e| e <= eocd as u64)
        .ok_or_else(|| {
            format!(
                "central directory ({cd_size} bytes at {cd_off}) runs past the end record at \
                 {eocd}"
            )
        })? as usize;
    if count.checked_mul(46).is_none_or(|n| n > cd_size) {
        return Err(format!(
            "central directory claims {count} entries in {cd_size} bytes"
        ));
    }
    let mut out = HashMap::with_capacity(count as usize);
    let mut p = cd_off as usize;
    for _ in 0..count {
        let cd = |o: usize, n: usize| {
            p.checked_add(o)
                .filter(|&a| a + n <= cd_end)
                .ok_or_else(|| trunc("central directory"))
        };
        if le32(b, cd(0, 4)?) != Some(0x0201_4b50) {
            return Err(format!("bad central directory entry at byte {p}"));
        }
        let flags = le16(b, cd(8, 2)?).unwrap_or(0);
        let method = le16(b, cd(10, 2)?).unwrap_or(0);
        let crc = le32(b, cd(16, 4)?).unwrap_or(0);
        let mut csize = u64::from(le32(b, cd(20, 4)?).unwrap_or(0));
        let mut usize_ = u64::from(le32(b, cd(24, 4)?).unwrap_or(0));
        let nlen = le16(b, cd(28, 2)?).unwrap_or(0) as usize;
        let elen = le16(b, cd(30, 2)?).unwrap_or(0) as usize;
        let clen = le16(b, cd(32, 2)?).unwrap_or(0) as usize;
        let mut local = u64::from(le32(b, cd(42, 4)?).unwrap_or(0));
        let name_at = cd(46, nlen + elen + clen)?;
        let name = std::str::from_utf8(&b[name_at..name_at + nlen])
            .map_err(|_| format!("zip entry name at byte {name_at} is not UTF-8"))?
            .to_string();
        // zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in order
        let mut extra = &b[name_at + nlen..name_at + nlen + elen];
        while extra.len() >= 4 {
            let (id, n) = (
                le16(extra, 0).unwrap_or(0),
                le16(extra, 2).unwrap_or(0) as usize,
            );
            let body = extra.get(4..4 + n).ok_or_else(|| trunc("extra field"))?;
            if id == 1 {
                let mut q = 0;
                for field in [&mut usize_, &mut csize, &mut local] {
                    if *field == 0xFFFF_FFFF {
                        *field = le64(body, q).ok_or_else(|| trunc("zip64 extra field"))?;
                        q += 8;
                    }
                }
            }
            extra = &extra[4 + n..];
        }
        p = name_at + nlen + elen + clen;
        let e = |m: String| format!("zip entry `{name}`: {m}");
        if flags & 1 != 0 {
            return Err(e("encrypted".into()));
        }
        if method != 0 {
            return Err(e(format!(
                "compression method {method} is not supported (only stored entries, as \
                 torch.save writes them)"
            )));
        }
        if csize != usize_ {
            return Err(e(format!(
                "stored entry with sizes {csize} and {usize_} that differ"
            )));
        }
        let local = usize::try_from(local)
            .ok()
            .filter(|&l| l <= size)
            .ok_or_else(|| e(format!("local header offset {local} is past the end")))?;
        if le32(b, local) != Some(0x0403_4b50) {
            return Err(e(format!("no local header at byte {local}")));
        }
        let (ln, le) = (
            le16(b, local + 26).ok_or_else(|| e("truncated local header".into()))?,
            le16(b, local + 28).ok_or_else(|| e("truncated local header".into()))?,
        );
        let start = local + 30 + ln as usize + le as usize;
        let end = usize::try_from(csize)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&end| end <= size)
            .ok_or_else(|| {
                e(format!(
                    "its {csize} bytes at byte {start} run past the end ({size} bytes)"
                ))
            })?;
        let data = &b[start..end];
        if crc32(data) != crc {
            return Err(e("CRC-32 mismatch (corrupted data)".into()));
        }
        if out.insert(name.clone(), data).is_some() {
            return Err(e("the name is repeated".into()));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// pickle

/// A storage: `(dtype, key in the archive, element count)`.
struct Storage {
    dtype: DType,
    key: String,
    numel: u64,
}

/// `_rebuild_tensor_v2`'s arguments.
struct Spec {
    storage: Rc<Storage>,
    offset: u64,
    size: Vec<u64>,
    stride: Vec<u64>,
}

/// A dict key: strings and ints compare as Python's; any other key is unique.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Str(Rc<str>),
    Int(i64),
    Other(usize),
}

type Dict = Rc<RefCell<IndexMap<Key, V>>>;

/// A pickled value (only what a checkpoint's structure needs; other objects are opaque).
#[derive(Clone)]
enum V {
    None,
    Bool(bool),
    Int(i64),
    /// A float (its value is never needed).
    Float,
    Str(Rc<str>),
    /// Bytes (their value is never needed).
    Bytes,
    Tuple(Rc<Vec<V>>),
    List(Rc<RefCell<Vec<V>>>),
    Dict(Dict),
    /// `module.name`, not yet called.
    Global(Rc<str>, Rc<str>),
    Storage(Rc<Storage>),
    Tensor(Rc<Spec>),
    /// An instance of another class (skipped when flattening).
    Object(Rc<str>),
}

impl V {
    fn kind(&self) -> &'static str {
        match self {
            V::None => "None",
            V::Bool(_) => "bool",
            V::Int(_) => "int",
            V::Float => "float",
            V::Str(_) => "str",
            V::Bytes => "bytes",
            V::Tuple(_) => "tuple",
            V::List(_) => "list",
            V::Dict(_) => "dict",
            V::Global(..) => "class or function",
            V::Storage(_) => "storage",
            V::Tensor(_) => "tensor",
            V::Object(_) => "object",
        }
    }

    /// The items of a tuple or list.
    fn items(&self) -> Option<Vec<V>> {
        match self {
            V::Tuple(t) => Some(t.as_ref().clone()),
            V::List(l) => Some(l.borrow().clone()),
            _ => None,
        }
    }
}

impl Drop for V {
    /// Drops nested containers with a loop, not recursion: a hostile pickle can nest a million
    /// lists in two bytes each, which a recursive drop would overflow the stack on.
    fn drop(&mut self) {
        fn take_children(v: &mut V, out: &mut Vec<V>) {
            match v {
                V::Tuple(t) => {
                    if let Some(items) = Rc::get_mut(t) {
                        out.append(items);
                    }
                }
                V::List(l) => {
                    if let Some(items) = Rc::get_mut(l) {
                        out.append(items.get_mut());
                    }
                }
                V::Dict(d) => {
                    if let Some(map) = Rc::get_mut(d) {
                        out.extend(map.get_mut().drain(..).map(|(_, v)| v));
                    }
                }
                _ => {}
            }
        }
        let mut pending = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut v) = pending.pop() {
            take_children(&mut v, &mut pending);
        }
    }
}

struct Vm<'a> {
    b: &'a [u8],
    pos: usize,
    stack: Vec<V>,
    marks: Vec<usize>,
    memo: HashMap<u32, V>,
    next_key: usize,
}

impl<'a> Vm<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.b.len() - self.pos {
            return Err(format!(
                "truncated: an operand of {n} bytes at byte {}, {} left",
                self.pos,
                self.b.len() - self.pos
            ));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn n<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A length operand, checked against the bytes left.
    fn len_of(&mut self, n: u64) -> Result<usize, String> {
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.b.len() - self.pos)
            .ok_or_else(|| {
                format!(
                    "length {n} at byte {} is more than the {} bytes left",
                    self.pos,
                    self.b.len() - self.pos
                )
            })
    }

    fn line(&mut self) -> Result<&'a str, String> {
        let rest = &self.b[self.pos..];
        let n = rest
            .iter()
            .position(|&c| c == b'\n')
            .ok_or_else(|| format!("truncated: unterminated line at byte {}", self.pos))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| format!("a GLOBAL name at byte {} is not UTF-8", self.pos))?;
        self.pos += n + 1;
        Ok(s)
    }

    fn pop(&mut self) -> Result<V, String> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err("pops past a MARK".into());
        }
        self.stack.pop().ok_or_else(|| "pops an empty stack".into())
    }

    fn top(&mut self) -> Result<&mut V, String> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err("reads past a MARK".into());
        }
        self.stack
            .last_mut()
            .ok_or_else(|| "reads an empty stack".into())
    }

    /// The items since the last MARK (removing the mark).
    fn pop_mark(&mut self) -> Result<Vec<V>, String> {
        let m = self.marks.pop().ok_or("no MARK to pop to")?;
        Ok(self.stack.split_off(m))
    }

    fn key(&mut self, k: &V) -> Key {
        match k {
            V::Str(s) => Key::Str(s.clone()),
            V::Int(i) => Key::Int(*i),
            V::Bool(b) => Key::Int(i64::from(*b)),
            _ => {
                self.next_key += 1;
                Key::Other(self.next_key)
            }
        }
    }

    fn set_items(&mut self, items: Vec<V>) -> Result<(), String> {
        if !items.len().is_multiple_of(2) {
            return Err("SETITEMS with an odd number of items".into());
        }
        let keyed: Vec<(Key, V)> = items
            .chunks(2)
            .map(|kv| (self.key(&kv[0]), kv[1].clone()))
            .collect();
        match self.top()? {
            V::Dict(d) => {
                d.borrow_mut().extend(keyed);
                Ok(())
            }
            V::Object(_) => Ok(()), // an object's `__setitem__`: its contents are skipped
            other => Err(format!("SETITEM on a {}", other.kind())),
        }
    }

    fn append(&mut self, items: Vec<V>) -> Result<(), String> {
        match self.top()? {
            V::List(l) => {
                l.borrow_mut().extend(items);
                Ok(())
            }
            V::Object(_) => Ok(()),
            other => Err(format!("APPEND to a {}", other.kind())),
        }
    }

    fn int(&mut self, bytes: &[u8]) -> V {
        // two's complement little-endian, as LONG1/LONG4
        if bytes.len() > 8 {
            return V::Object("int (more than 64 bits)".into());
        }
        let mut a = [0u8; 8];
        a[..bytes.len()].copy_from_slice(bytes);
        if bytes.last().is_some_and(|&h| h & 0x80 != 0) {
            for x in &mut a[bytes.len()..] {
                *x = 0xFF;
            }
        }
        V::Int(i64::from_le_bytes(a))
    }
}

/// Runs the pickle to its STOP: the object it builds.
fn unpickle(b: &[u8]) -> Result<V, String> {
    let mut vm = Vm {
        b,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        next_key: 0,
    };
    loop {
        let at = vm.pos;
        let op = *vm
            .take(1)
            .map_err(|_| format!("truncated: the pickle ends at byte {at} without a STOP opcode"))?
            .first()
            .unwrap_or(&0);
        let fail = |m: String| format!("opcode {op:#04x} at byte {at}: {m}");
        step(&mut vm, op).map_err(fail)?;
        if op == b'.' {
            return vm
                .stack
                .pop()
                .ok_or_else(|| fail("STOP with an empty stack".into()));
        }
    }
}

fn step(vm: &mut Vm<'_>, op: u8) -> Result<(), String> {
    match op {
        0x80 => {
            let p = vm.n::<1>()?[0];
            if p > 5 {
                return Err(format!("pickle protocol {p} is not supported"));
            }
        }
        0x95 => {
            vm.n::<8>()?; // FRAME: a hint
        }
        b'.' => {} // STOP
        b'}' => vm.stack.push(V::Dict(Rc::default())),
        b']' | 0x8f => vm.stack.push(V::List(Rc::default())), // EMPTY_LIST, EMPTY_SET
        b')' => vm.stack.push(V::Tuple(Rc::default())),
        b'(' => vm.marks.push(vm.stack.len()),
        b'N' => vm.stack.push(V::None),
        0x88 => vm.stack.push(V::Bool(true)),
        0x89 => vm.stack.push(V::Bool(false)),
        b'J' => {
            let v = i32::from_le_bytes(vm.n()?);
            vm.stack.push(V::Int(v.into()));
        }
        b'K' => {
            let v = vm.n::<1>()?[0];
            vm.stack.push(V::Int(v.into()));
        }
        b'M' => {
            let v = u16::from_le_bytes(vm.n()?);
            vm.stack.push(V::Int(v.into()));
        }
        0x8a | 0x8b => {
            let n = if op == 0x8a {
                u64::from(vm.n::<1>()?[0])
            } else {
                u64::from(u32::from_le_bytes(vm.n()?))
            };
            let n = vm.len_of(n)?;
            let bytes = vm.take(n)?;
            let v = vm.int(bytes);
            vm.stack.push(v);
        }
        b'G' => {
            vm.n::<8>()?;
            vm.stack.push(V::Float);
        }
        b'X' | 0x8c | 0x8d => {
            let n = match op {
                b'X' => u64::from(u32::from_le_bytes(vm.n()?)),
                0x8c => u64::from(vm.n::<1>()?[0]),
                _ => u64::from_le_bytes(vm.n()?),
            };
            let n = vm.len_of(n)?;
            let s = std::str::from_utf8(vm.take(n)?).map_err(|_| "a string is not UTF-8")?;
            vm.stack.push(V::Str(s.into()));
        }
        b'B' | b'C' | 0x8e | b'T' | b'U' => {
            let n = match op {
                b'B' | b'T' => u64::from(u32::from_le_bytes(vm.n()?)),
                b'C' | b'U' => u64::from(vm.n::<1>()?[0]),
                _ => u64::from_le_bytes(vm.n()?),
            };
            let n = vm.len_of(n)?;
            vm.take(n)?;
            vm.stack.push(V::Bytes);
        }
        b't' | 0x91 => {
            // TUPLE, FROZENSET
            let items = vm.pop_mark()?;
            vm.stack.push(V::Tuple(Rc::new(items)));
        }
        0x85..=0x87 => {
            let n = usize::from(op - 0x84);
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(vm.pop()?);
            }
            items.reverse();
            vm.stack.push(V::Tuple(Rc::new(items)));
        }
        b'l' => {
            let items = vm.pop_mark()?;
            vm.stack.push(V::List(Rc::new(RefCell::new(items))));
        }
        b'd' => {
            let items = vm.pop_mark()?;
            vm.stack.push(V::Dict(Rc::default()));
            vm.set_items(items)?;
        }
        b's' => {
            let v = vm.pop()?;
            let k = vm.pop()?;
            vm.set_items(vec![k, v])?;
        }
        b'u' => {
            let items = vm.pop_mark()?;
            vm.set_items(items)?;
        }
        b'a' => {
            let v = vm.pop()?;
            vm.append(vec![v])?;
        }
        b'e' | 0x90 => {
            // APPENDS, ADDITEMS
            let items = vm.pop_mark()?;
            vm.append(items)?;
        }
        b'q' | b'r' | 0x94 => {
            let i = match op {
                b'q' => u32::from(vm.n::<1>()?[0]),
                b'r' => u32::from_le_bytes(vm.n()?),
                _ => u32::try_from(vm.memo.len()).map_err(|_| "memo overflow")?,
            };
            let v = vm.top()?.clone();
            vm.memo.insert(i, v);
        }
        b'h' | b'j' => {
            let i = if op == b'h' {
                u32::from(vm.n::<1>()?[0])
            } else {
                u32::from_le_bytes(vm.n()?)
            };
            let v = vm
                .memo
                .get(&i)
                .cloned()
                .ok_or_else(|| format!("memo entry {i} was never stored"))?;
            vm.stack.push(v);
        }
        b'0' => {
            vm.pop()?;
        }
        b'1' => {
            vm.pop_mark()?;
        }
        b'2' => {
            let v = vm.top()?.clone();
            vm.stack.push(v);
        }
        b'c' => {
            let module = vm.line()?;
            let name = vm.line()?;
            vm.stack.push(V::Global(module.into(), name.into()));
        }
        0x93 => {
            let name = vm.pop()?;
            let module = vm.pop()?;
            match (&module, &name) {
                (V::Str(m), V::Str(n)) => vm.stack.push(V::Global(m.clone(), n.clone())),
                _ => return Err("STACK_GLOBAL of non-strings".into()),
            }
        }
        b'R' | 0x81 => {
            let args = vm.pop()?;
            let callable = vm.pop()?;
            let args = args
                .items()
                .ok_or_else(|| format!("call with {} arguments, not a tuple", args.kind()))?;
            let v = call(&callable, &args)?;
            vm.stack.push(v);
        }
        0x92 => {
            // NEWOBJ_EX: cls, args, kwargs
            let _kwargs = vm.pop()?;
            let args = vm.pop()?;
            let cls = vm.pop()?;
            let args = args.items().ok_or("NEWOBJ_EX arguments are not a tuple")?;
            let v = call(&cls, &args)?;
            vm.stack.push(v);
        }
        b'b' => {
            // BUILD: an object's state (an OrderedDict's `_metadata`, ...): not needed
            let _state = vm.pop()?;
            vm.top()?;
        }
        b'Q' => {
            let pid = vm.pop()?;
            let v = persistent_load(&pid)?;
            vm.stack.push(v);
        }
        _ => {
            return Err(format!(
                "unknown or unsupported pickle opcode {op:#04x} ({:?})",
                char::from(op)
            ));
        }
    }
    Ok(())
}

/// The dtype of a `torch.<Name>Storage` class.
fn storage_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "FloatStorage" => DType::FLOAT32,
        "HalfStorage" => DType::FLOAT16,
        "BFloat16Storage" => DType::BFLOAT16,
        "DoubleStorage" => DType::FLOAT64,
        "LongStorage" => DType::INT64,
        "IntStorage" => DType::INT32,
        "ShortStorage" => DType::INT16,
        "CharStorage" => DType::INT8,
        "ByteStorage" => DType::UINT8,
        "BoolStorage" => DType::BOOL,
        _ => return None,
    })
}

/// `('storage', torch.<Type>Storage, key, location, numel)`.
fn persistent_load(pid: &V) -> Result<V, String> {
    let items = pid
        .items()
        .ok_or_else(|| format!("persistent id is a {}, not a tuple", pid.kind()))?;
    match items.as_slice() {
        [V::Str(tag), V::Global(m, n), key, _location, V::Int(numel)] if &**tag == "storage" => {
            let dtype = storage_dtype(n)
                .filter(|_| &**m == "torch")
                .ok_or_else(|| format!("storage class {m}.{n} is not supported"))?;
            let key = match key {
                V::Str(s) => s.to_string(),
                V::Int(i) => i.to_string(),
                other => return Err(format!("storage key is a {}", other.kind())),
            };
            let numel = u64::try_from(*numel).map_err(|_| format!("storage size {numel}"))?;
            Ok(V::Storage(Rc::new(Storage { dtype, key, numel })))
        }
        _ => Err("persistent id is not ('storage', class, key, location, size)".into()),
    }
}

fn ints(v: &V, what: &str) -> Result<Vec<u64>, String> {
    v.items()
        .ok_or_else(|| format!("{what} is a {}, not a tuple", v.kind()))?
        .iter()
        .map(|x| match x {
            V::Int(i) => u64::try_from(*i).map_err(|_| format!("{what} holds {i}")),
            other => Err(format!("{what} holds a {}", other.kind())),
        })
        .collect()
}

/// Calls (REDUCE, NEWOBJ) a global with `args`.
fn call(callable: &V, args: &[V]) -> Result<V, String> {
    let V::Global(module, name) = callable else {
        // calling the result of a call (an opaque object) builds another opaque object
        return match callable {
            V::Object(n) => Ok(V::Object(n.clone())),
            other => Err(format!("calls a {}", other.kind())),
        };
    };
    let q = format!("{module}.{name}");
    let root = module.split('.').next().unwrap_or("");
    Ok(match (&**module, &**name) {
        ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => {
            let [storage, offset, size, stride, ..] = args else {
                return Err(format!("{q} with {} arguments", args.len()));
            };
            let V::Storage(storage) = storage else {
                return Err(format!("{q}: the storage is a {}", storage.kind()));
            };
            let V::Int(offset) = offset else {
                return Err(format!("{q}: the offset is a {}", offset.kind()));
            };
            let offset = u64::try_from(*offset).map_err(|_| format!("{q}: offset {offset}"))?;
            let (size, stride) = (ints(size, "the size")?, ints(stride, "the stride")?);
            if size.len() != stride.len() {
                return Err(format!(
                    "{q}: size {size:?} and stride {stride:?} differ in length"
                ));
            }
            V::Tensor(Rc::new(Spec {
                storage: storage.clone(),
                offset,
                size,
                stride,
            }))
        }
        ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
            match args.first() {
                Some(t @ V::Tensor(_)) => t.clone(),
                _ => return Err(format!("{q} without a tensor")),
            }
        }
        ("torch._tensor", "_rebuild_from_type_v2") => {
            // (func, new_type, args, state): the tensor `func(*args)` makes
            let [func, _ty, inner, ..] = args else {
                return Err(format!("{q} with {} arguments", args.len()));
            };
            let inner = inner
                .items()
                .ok_or_else(|| format!("{q}: arguments not a tuple"))?;
            if matches!(func, V::Global(m, n) if &**m == "torch._tensor" && &**n == "_rebuild_from_type_v2")
            {
                return Err(format!("{q} rebuilding itself"));
            }
            call(func, &inner)?
        }
        ("torch", "Size") => match args.first() {
            Some(t) if t.items().is_some() => t.clone(),
            _ => V::Tuple(Rc::default()),
        },
        ("collections", "OrderedDict") | ("builtins" | "__builtin__", "dict") => {
            let d: Dict = Rc::default();
            if let Some(pairs) = args.first().and_then(V::items) {
                let mut next = 0usize;
                for p in pairs {
                    if let Some([k, v]) = p.items().as_deref() {
                        let key = match k {
                            V::Str(s) => Key::Str(s.clone()),
                            V::Int(i) => Key::Int(*i),
                            _ => {
                                next += 1;
                                Key::Other(usize::MAX - next)
                            }
                        };
                        d.borrow_mut().insert(key, v.clone());
                    }
                }
            }
            V::Dict(d)
        }
        _ if root == "torch" => {
            return Err(format!("{q} is not supported"));
        }
        // any other class: an opaque object, as tinygrad's `Dummy`
        _ => V::Object(q.into()),
    })
}

// ---------------------------------------------------------------------------------------------
// tensors

/// Nesting deeper than this is refused (a hostile pickle could exhaust the stack).
const MAX_DEPTH: usize = 64;

struct Build<'a> {
    entries: &'a HashMap<String, &'a [u8]>,
    base: &'a str,
    device: &'a str,
    /// Each storage's tensor (of unsigned ints of its item size), uploaded once.
    storages: HashMap<String, Tensor>,
    out: BTreeMap<String, Tensor>,
    visits: usize,
    max_visits: usize,
    /// The containers being walked (a cycle is skipped).
    path: Vec<usize>,
}

type BuildErr = (Option<String>, String);

impl Build<'_> {
    fn flatten(&mut self, v: &V, prefix: String, depth: usize) -> Result<(), BuildErr> {
        self.visits += 1;
        if self.visits > self.max_visits {
            return Err((
                None,
                format!(
                    "the pickle's shared containers expand to more than {} entries",
                    self.max_visits
                ),
            ));
        }
        if depth > MAX_DEPTH {
            return Err((
                Some(prefix),
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        let join = |k: &str| {
            if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            }
        };
        let (id, children): (usize, Vec<(String, V)>) = match v {
            V::Tensor(spec) => {
                let t = self.tensor(spec).map_err(|m| (Some(prefix.clone()), m))?;
                if self.out.insert(prefix.clone(), t).is_some() {
                    return Err((Some(prefix), "two tensors flatten to this name".to_string()));
                }
                return Ok(());
            }
            V::Dict(d) => (
                Rc::as_ptr(d) as *const () as usize,
                d.borrow()
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Key::Str(s) => Some((join(s), v.clone())),
                        Key::Int(i) => Some((join(&i.to_string()), v.clone())),
                        Key::Other(_) => None,
                    })
                    .collect(),
            ),
            V::List(l) => (
                Rc::as_ptr(l) as *const () as usize,
                l.borrow()
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (join(&i.to_string()), v.clone()))
                    .collect(),
            ),
            V::Tuple(t) => (
                Rc::as_ptr(t) as *const () as usize,
                t.iter()
                    .enumerate()
                    .map(|(i, v)| (join(&i.to_string()), v.clone()))
                    .collect(),
            ),
            _ => return Ok(()), // not a tensor
        };
        if self.path.contains(&id) {
            return Ok(()); // a container holding itself
        }
        self.path.push(id);
        for (k, c) in children {
            self.flatten(&c, k, depth + 1)?;
        }
        self.path.pop();
        Ok(())
    }

    /// The tensor of a `_rebuild_tensor_v2` call, its strides applied to its storage.
    fn tensor(&mut self, spec: &Spec) -> Result<Tensor, String> {
        let st = &spec.storage;
        let dtype = st.dtype;
        let item = dtype.itemsize();
        let entry = format!("{}/data/{}", self.base, st.key);
        let data = *self
            .entries
            .get(&entry)
            .ok_or_else(|| format!("storage `{}` is missing (no entry `{entry}`)", st.key))?;
        let n = usize::try_from(st.numel)
            .ok()
            .filter(|&n| n.checked_mul(item).is_some_and(|b| b <= data.len()))
            .ok_or_else(|| {
                format!(
                    "storage `{}` of {} {dtype} elements needs more than its {} bytes",
                    st.key,
                    st.numel,
                    data.len()
                )
            })?;
        let size: Vec<usize> = spec
            .size
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("size {:?} too large", spec.size)))
            .collect::<Result<_, _>>()?;
        let numel = tinygrad_uop::shape::checked_numel(&size, item)
            .ok_or_else(|| format!("size {size:?} of {dtype} is too large for a tensor"))?;
        if numel == 0 {
            return Ok(Tensor::from_bytes(&[], dtype, &size, self.device));
        }
        // the last element the view reads: offset + sum((size - 1) * stride)
        let last = spec
            .size
            .iter()
            .zip(&spec.stride)
            .try_fold(spec.offset, |a, (&s, &st)| {
                (s - 1).checked_mul(st).and_then(|x| a.checked_add(x))
            });
        if last.is_none_or(|l| l >= st.numel) {
            return Err(format!(
                "the view (offset {}, size {:?}, stride {:?}) reads past its storage `{}` of {} \
                 elements",
                spec.offset, spec.size, spec.stride, st.key, st.numel
            ));
        }
        let bits = match item {
            1 => DType::UINT8,
            2 => DType::UINT16,
            4 => DType::UINT32,
            _ => DType::UINT64,
        };
        let device = self.device;
        let base = self
            .storages
            .entry(st.key.clone())
            .or_insert_with(|| Tensor::from_bytes(&data[..n * item], bits, &[n], device))
            .clone();
        // every value fits in usize now: the view lies inside a storage of n elements
        let stride: Vec<usize> = spec.stride.iter().map(|&s| s as usize).collect();
        let view = strided(&base, spec.offset as usize, &size, &stride)?;
        Ok(if dtype == DType::BOOL {
            view.ne(0u8)
        } else {
            view.bitcast(dtype)
        })
    }
}

/// `base[offset + sum(i_k * stride_k)]` for each index of `size` (no zero sizes), with movement
/// ops only: the axes of size > 1 and stride > 0, outermost stride first, are cut from a window
/// of the storage one at a time — reshaping `[.., n * s]` to `[.., n, s]` when rows don't
/// overlap, else repeating the window `n` times and reading it with a row pitch of
/// `window + s` — then permuted back to their order; stride-0 axes are expanded.
///
/// # Errors
/// When overlapping rows would make the repeated window larger than a tensor can be.
fn strided(
    base: &Tensor,
    offset: usize,
    size: &[usize],
    stride: &[usize],
) -> Result<Tensor, String> {
    let mut real: Vec<usize> = (0..size.len())
        .filter(|&k| size[k] > 1 && stride[k] > 0)
        .collect();
    real.sort_by_key(|&k| std::cmp::Reverse(stride[k]));
    // extent[j]: the elements axes j.. of `real` span
    let mut extent = vec![1usize; real.len() + 1];
    for j in (0..real.len()).rev() {
        extent[j] = extent[j + 1] + (size[real[j]] - 1) * stride[real[j]];
    }
    let mut t = base.shrink(&[(offset, offset + extent[0])]);
    let mut lead: Vec<isize> = Vec::new();
    // the elements of the axes cut so far: every intermediate view's size is checked
    let mut lead_numel = 1usize;
    let too_large = |what: usize| {
        format!(
            "strides {stride:?} for size {size:?} need an intermediate view of more than {what} \
             elements: too large"
        )
    };
    let limit = tinygrad_uop::shape::MAX_BYTES / 8;
    for (j, &k) in real.iter().enumerate() {
        let (n, s, w, next) = (size[k], stride[k], extent[j], extent[j + 1]);
        let mut shape = lead.clone();
        let axis = lead.len();
        // the elements of the view before the cut to `next`: lead * n * (s or w + s)
        let row = if s >= next { Some(s) } else { w.checked_add(s) };
        if row
            .and_then(|r| r.checked_mul(n))
            .and_then(|x| x.checked_mul(lead_numel))
            .is_none_or(|x| x > limit)
        {
            return Err(too_large(limit));
        }
        lead_numel *= n;
        if s >= next {
            // rows of s elements, of which the first `next` are this axis' window
            let need = n * s;
            t = resize_last(&t, axis, w, need);
            shape.extend([n as isize, s as isize]);
            t = t.reshape(&shape);
        } else {
            // overlapping rows: n copies of the window, read with a pitch of w + s
            let mut rep = lead.clone();
            rep.extend([n as isize, w as isize]);
            t = t.unsqueeze(axis as isize).expand(&rep);
            let mut flat = lead.clone();
            flat.push((n * w) as isize);
            t = t.reshape(&flat);
            t = resize_last(&t, axis, n * w, n * (w + s));
            shape.extend([n as isize, (w + s) as isize]);
            t = t.reshape(&shape);
        }
        let mut bounds: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
        bounds[axis + 1] = (0, next);
        t = t.shrink(&bounds);
        lead.push(n as isize);
    }
    // [sizes in stride order..., 1] -> the real axes in their own order
    t = t.reshape(&lead);
    let mut order: Vec<usize> = (0..real.len()).collect();
    order.sort_by_key(|&j| real[j]);
    if order.iter().enumerate().any(|(a, &b)| a != b) {
        let perm: Vec<isize> = order.iter().map(|&j| j as isize).collect();
        t = t.permute(&perm);
    }
    let with_ones: Vec<isize> = (0..size.len())
        .map(|k| {
            if real.contains(&k) {
                size[k] as isize
            } else {
                1
            }
        })
        .collect();
    let full: Vec<isize> = size.iter().map(|&d| d as isize).collect();
    t = t.reshape(&with_ones);
    if with_ones != full {
        t = t.expand(&full);
    }
    Ok(t)
}

/// `t` with its last axis (index `axis`, now of `have` elements) cut or zero-padded to `want`.
fn resize_last(t: &Tensor, axis: usize, have: usize, want: usize) -> Tensor {
    let mut bounds: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
    if want < have {
        bounds[axis] = (0, want);
        t.shrink(&bounds)
    } else if want > have {
        let mut pad = vec![(0, 0); bounds.len()];
        pad[axis] = (0, want - have);
        t.pad(&pad, 0)
    } else {
        t.clone()
    }
}
