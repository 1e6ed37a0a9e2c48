//! PyTorch checkpoints (`torch.save`'s zip format, the default since torch 1.6), as tinygrad's
//! `nn.state.torch_load`: the tensors of the pickled object, by dotted name.
//!
//! The archive (`<name>/data.pkl` and one `<name>/data/<key>` entry per storage) is read with a
//! small zip reader (`zip`: stored entries, which is how torch writes them; zip64 records; CRC-32s
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

mod rebuild;
mod zip;

use rebuild::load;

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
