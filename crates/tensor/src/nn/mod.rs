//! Neural networks, as tinygrad's `tinygrad.nn`: layers ([`layers`]), optimizers ([`optim`]),
//! weight files ([`state`], [`gguf`], [`torch`]), weights kept as GGUF's quantized blocks
//! ([`quant`]), 8-bit integer products accumulated in int32 ([`integer`]), a decode step's
//! attention over KV cache slots in one native kernel ([`attention`]) and weight initialization
//! ([`init`]).
//!
//! Models are plain structs of layers. Two traits connect them to the rest:
//! - [`Module`]: `forward(&self, x) -> Tensor` (tinygrad's `__call__`); closures are modules too,
//!   so `x.sequential(&[&conv, &|x: &Tensor| x.relu()])` reads like tinygrad's layer lists.
//! - [`Parameters`]: `named_parameters(prefix)` lists every state tensor with tinygrad's dotted
//!   names (`"l1.weight"`, `"layers.0.bias"`). It replaces tinygrad's walk over `__dict__`: each
//!   layer implements it, and [`impl_parameters!`](crate::impl_parameters) implements it for a
//!   user struct from its field names. As in tinygrad, the list includes buffers that are not
//!   trained (BatchNorm's running statistics): optimizers tell them apart by `requires_grad`.
//!
//! [`get_parameters`], [`get_state_dict`] and [`load_state_dict`] work on anything that
//! implements [`Parameters`].
//!
//! ```
//! use tinygrad_tensor::nn::{Linear, Module, get_state_dict, optim::{self, Optimizer}};
//! use tinygrad_tensor::{Axis, Tensor, impl_parameters};
//!
//! struct Net { l1: Linear, l2: Linear }
//! impl_parameters!(Net { l1, l2 });
//! impl Module for Net {
//!     fn forward(&self, x: &Tensor) -> Tensor {
//!         self.l2.forward(&self.l1.forward(x).relu())
//!     }
//! }
//!
//! let net = Net { l1: Linear::new(4, 8), l2: Linear::new(8, 2) };
//! let keys: Vec<String> = get_state_dict(&net).into_keys().collect();
//! assert_eq!(keys, ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]);
//!
//! let mut opt = optim::adam(tinygrad_tensor::nn::get_parameters(&net), 1e-3);
//! let _train = Tensor::train(true);
//! let x = Tensor::ones(&[3, 4], tinygrad_tensor::DType::FLOAT32);
//! opt.zero_grad();
//! let y = net.forward(&x);
//! let loss = (&y * &y).mean(Axis::All);
//! loss.backward();
//! opt.step_with(&[&loss]);
//! assert!(loss.item::<f32>().is_finite());
//! ```

pub mod attention;
pub mod gguf;
pub mod init;
pub mod integer;
pub mod layers;
pub mod optim;
pub mod quant;
pub mod state;
pub mod torch;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use tinygrad_dtype::DType;
use tinygrad_runtime::DeviceError;

use crate::Tensor;
use crate::tensor::Inner;

pub use layers::{
    BatchNorm, BatchNorm1d, BatchNorm2d, Conv2d, ConvOptions, ConvTranspose2d, Embedding,
    GroupNorm, InstanceNorm, LSTMCell, LayerNorm, Linear, RMSNorm,
};

/// Tensors marked by [`buffer`] (weak: dropped tensors leave on the next scan).
static BUFFERS: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// Marks `t` as a buffer: model state that is not trained (BatchNorm's running statistics). It
/// gets `requires_grad(false)`, and optimizers given it realize it with each step instead of
/// training it. Returns `t`.
///
/// ```
/// use tinygrad_tensor::{DType, Tensor, nn};
/// let running_mean = nn::buffer(Tensor::zeros(&[4], DType::FLOAT32).requires_grad(true));
/// assert!(nn::is_buffer(&running_mean));
/// assert!(!running_mean.is_requires_grad());
/// ```
pub fn buffer(t: Tensor) -> Tensor {
    t.set_requires_grad(false);
    let mut reg = BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|w| w.strong_count() > 0);
    reg.push(Arc::downgrade(&t.inner));
    drop(reg);
    t
}

/// Whether `t` was marked by [`buffer`].
///
/// ```
/// use tinygrad_tensor::{DType, Tensor, nn};
/// let t = Tensor::zeros(&[2], DType::FLOAT32);
/// assert!(!nn::is_buffer(&t));
/// let b = nn::buffer(t.clone());
/// assert!(nn::is_buffer(&b) && nn::is_buffer(&t)); // clones share the tensor
/// assert!(!nn::is_buffer(&Tensor::zeros(&[2], DType::FLOAT32)));
/// ```
pub fn is_buffer(t: &Tensor) -> bool {
    let reg = BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
    reg.iter().any(|w| w.as_ptr() == Arc::as_ptr(&t.inner))
}

/// A layer or model: maps an input tensor to an output (tinygrad's `__call__`).
pub trait Module {
    /// Applies the layer.
    fn forward(&self, x: &Tensor) -> Tensor;
}

impl<F: Fn(&Tensor) -> Tensor> Module for F {
    fn forward(&self, x: &Tensor) -> Tensor {
        self(x)
    }
}

impl Tensor {
    /// Applies `layers` in order (tinygrad's `sequential`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[-1.0f32, 2.0], &[2]);
    /// let y = x.sequential(&[&|x: &Tensor| x * 2.0, &|x: &Tensor| x.relu(), &|x: &Tensor| x + 1]);
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0, 5.0]);
    /// ```
    pub fn sequential(&self, layers: &[&dyn Module]) -> Tensor {
        layers.iter().fold(self.clone(), |x, l| l.forward(&x))
    }
}

/// Lists a model's state tensors with their names (tinygrad's `get_state_dict` walk).
pub trait Parameters {
    /// Every state tensor (trained parameters and buffers such as running statistics), named
    /// `prefix` + the field path with dots: `"l1.weight"`. `prefix` is empty or ends with a dot.
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)>;
}

impl Parameters for Tensor {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        vec![(prefix.trim_matches('.').to_string(), self.clone())]
    }
}

impl<T: Parameters> Parameters for Option<T> {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.as_ref()
            .map_or_else(Vec::new, |t| t.named_parameters(prefix))
    }
}

impl<T: Parameters> Parameters for [T] {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.iter()
            .enumerate()
            .flat_map(|(i, t)| t.named_parameters(&format!("{prefix}{i}.")))
            .collect()
    }
}

impl<T: Parameters> Parameters for Vec<T> {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.as_slice().named_parameters(prefix)
    }
}

impl<T: Parameters, const N: usize> Parameters for [T; N] {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.as_slice().named_parameters(prefix)
    }
}

impl<T: Parameters + ?Sized> Parameters for Box<T> {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        (**self).named_parameters(prefix)
    }
}

impl<T: Parameters + ?Sized> Parameters for &T {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        (**self).named_parameters(prefix)
    }
}

impl<T: Parameters> Parameters for BTreeMap<String, T> {
    fn named_parameters(&self, prefix: &str) -> Vec<(String, Tensor)> {
        self.iter()
            .flat_map(|(k, t)| t.named_parameters(&format!("{prefix}{k}.")))
            .collect()
    }
}

/// Implements [`Parameters`] for a struct from the names of its fields (each a [`Tensor`], a
/// layer, an `Option`, a `Vec`, ... — anything that implements `Parameters`). Fields not listed
/// are not part of the state.
///
/// ```
/// use tinygrad_tensor::nn::{Conv2d, Linear, get_state_dict};
/// use tinygrad_tensor::{Tensor, impl_parameters};
///
/// struct Net { convs: Vec<Conv2d>, head: Linear, scale: Tensor }
/// impl_parameters!(Net { convs, head, scale });
/// let net = Net {
///     convs: vec![Conv2d::new(1, 4, 3)],
///     head: Linear::new(4, 2),
///     scale: Tensor::ones(&[1], tinygrad_tensor::DType::FLOAT32),
/// };
/// let keys: Vec<String> = get_state_dict(&net).into_keys().collect();
/// assert_eq!(keys, ["convs.0.bias", "convs.0.weight", "head.bias", "head.weight", "scale"]);
/// ```
///
/// A field can go by another name in the state dict, `field as "name"` — checkpoint names that
/// are not Rust identifiers (`self`, `LayerNorm`) or paths of several parts:
///
/// ```
/// use tinygrad_tensor::nn::{LayerNorm, Linear, get_state_dict};
/// use tinygrad_tensor::impl_parameters;
///
/// struct Attention { query: Linear, norm: LayerNorm }
/// impl_parameters!(Attention { query as "self.query", norm as "output.LayerNorm" });
/// let a = Attention { query: Linear::new(4, 4), norm: LayerNorm::new(&[4]) };
/// let keys: Vec<String> = get_state_dict(&a).into_keys().collect();
/// assert_eq!(
///     keys,
///     ["output.LayerNorm.bias", "output.LayerNorm.weight", "self.query.bias", "self.query.weight"]
/// );
/// ```
#[macro_export]
macro_rules! impl_parameters {
    // the state-dict name of a field: its `as` name, else the field's
    (@name $field:ident $name:literal) => {
        $name
    };
    (@name $field:ident) => {
        stringify!($field)
    };
    ($ty:ty { $($field:ident $(as $name:literal)?),* $(,)? }) => {
        impl $crate::nn::Parameters for $ty {
            fn named_parameters(&self, prefix: &str) -> Vec<(String, $crate::Tensor)> {
                let mut out = Vec::new();
                $(
                    out.extend($crate::nn::Parameters::named_parameters(
                        &self.$field,
                        &format!(
                            "{prefix}{}.",
                            $crate::impl_parameters!(@name $field $($name)?)
                        ),
                    ));
                )*
                out
            }
        }
    };
}

/// The model's state tensors by name (tinygrad's `get_state_dict`): parameters and buffers.
/// The tensors are shared with the model (not copies).
///
/// ```
/// use tinygrad_tensor::nn::{Linear, get_state_dict};
/// let l = Linear::new(3, 2);
/// let sd = get_state_dict(&l);
/// assert_eq!(sd.keys().cloned().collect::<Vec<String>>(), ["bias", "weight"]);
/// assert_eq!((sd["weight"].shape(), sd["bias"].shape()), (vec![2, 3], vec![2]));
/// ```
pub fn get_state_dict(model: &(impl Parameters + ?Sized)) -> BTreeMap<String, Tensor> {
    let mut out = BTreeMap::new();
    for (k, t) in model.named_parameters("") {
        out.entry(k).or_insert(t);
    }
    out
}

/// The model's state tensors in declaration order, each once (tinygrad's `get_parameters`):
/// what an optimizer takes. Includes buffers such as running statistics (the optimizer realizes
/// them with each step but does not train them).
///
/// ```
/// use tinygrad_tensor::nn::{Linear, get_parameters};
/// let l = Linear::new(3, 2);
/// let shapes: Vec<Vec<usize>> = get_parameters(&l).iter().map(|t| t.shape()).collect();
/// assert_eq!(shapes, vec![vec![2, 3], vec![2]]); // weight, then bias
/// ```
pub fn get_parameters(model: &(impl Parameters + ?Sized)) -> Vec<Tensor> {
    let mut seen = HashSet::new();
    model
        .named_parameters("")
        .into_iter()
        .filter(|(_, t)| seen.insert(Arc::as_ptr(&t.inner)))
        .map(|(_, t)| t)
        .collect()
}

/// One entry of a state dict that does not fit the model (see [`StateDictError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongEntry {
    /// The key.
    pub key: String,
    /// The model tensor's shape and dtype.
    pub expected: (Vec<usize>, DType),
    /// The state dict tensor's shape and dtype.
    pub got: (Vec<usize>, DType),
}

/// Why [`load_state_dict`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDictError {
    /// The state dict does not fit the model; nothing was loaded.
    Mismatch {
        /// Model keys absent from the state dict (reported unless the check is lenient).
        missing: Vec<String>,
        /// State dict keys the model does not have (reported when the check is exact).
        unexpected: Vec<String>,
        /// Keys whose shape or dtype differs.
        wrong: Vec<WrongEntry>,
    },
    /// Moving or realizing the loaded tensors failed.
    Device(DeviceError),
    /// An entry a layer is built from ([`Linear::from_state_dict`], ...) does not fit it.
    Invalid {
        /// The key.
        key: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

impl fmt::Display for StateDictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateDictError::Device(e) => write!(f, "load_state_dict: {e}"),
            StateDictError::Invalid { key, message } => write!(f, "state dict `{key}`: {message}"),
            StateDictError::Mismatch {
                missing,
                unexpected,
                wrong,
            } => {
                write!(f, "load_state_dict: the state dict does not fit the model")?;
                if !missing.is_empty() {
                    write!(f, "; missing keys: {missing:?}")?;
                }
                if !unexpected.is_empty() {
                    write!(f, "; unexpected keys: {unexpected:?}")?;
                }
                for w in wrong {
                    write!(
                        f,
                        "; `{}`: expected shape {:?} {}, got shape {:?} {}",
                        w.key, w.expected.0, w.expected.1, w.got.0, w.got.1
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for StateDictError {}

/// Loads `state_dict` into the model: each model tensor takes the value of the entry with its
/// name (moved to its device; sharded like it when the model tensor is sharded and the entry is
/// on one device), and all are realized together. Shapes and dtypes must match
/// exactly (except `[]` and `[1]`, which are interchangeable, as in tinygrad). With `strict`,
/// missing and unexpected keys are errors too; without, missing keys keep their values and
/// unexpected ones are ignored. On any error nothing is loaded, and the error lists every
/// problem.
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::Tensor;
/// use tinygrad_tensor::nn::{Linear, Module, load_state_dict};
/// let mut l = Linear::new(2, 1);
/// let mut sd = BTreeMap::new();
/// sd.insert("weight".to_string(), Tensor::from_slice(&[1.0f32, 2.0], &[1, 2]));
/// sd.insert("bias".to_string(), Tensor::from_slice(&[0.5f32], &[1]));
/// load_state_dict(&mut l, &sd, true).unwrap();
/// let y = l.forward(&Tensor::from_slice(&[3.0f32, 4.0], &[1, 2]));
/// assert_eq!(y.to_vec::<f32>(), vec![11.5]); // 1*3 + 2*4 + 0.5
/// sd.remove("bias"); // a missing key is an error only when strict
/// assert!(load_state_dict(&mut l, &sd, true).is_err());
/// assert!(load_state_dict(&mut l, &sd, false).is_ok());
/// ```
pub fn load_state_dict(
    model: &mut (impl Parameters + ?Sized),
    state_dict: &BTreeMap<String, Tensor>,
    strict: bool,
) -> Result<(), StateDictError> {
    let mode = if strict {
        KeyCheck::Exact
    } else {
        KeyCheck::Lenient
    };
    load_state_dict_with(model, state_dict, mode).map(|_| ())
}

/// Which key mismatches [`load_state_dict_with`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// Missing and unexpected keys are errors (`load_state_dict(.., true)`).
    Exact,
    /// Missing keys are errors; unexpected ones are reported and ignored (tinygrad's
    /// `strict=True`: a checkpoint may carry more than the model uses, but no model tensor may
    /// silently keep its initial value).
    NoMissing,
    /// Both are reported and tolerated: missing keys keep their values (`load_state_dict(..,
    /// false)`).
    Lenient,
}

/// What [`load_state_dict_with`] did not match: model keys absent from the state dict and state
/// dict keys the model lacks, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Model keys the state dict lacks (their tensors kept their values).
    pub missing: Vec<String>,
    /// State dict keys the model lacks (ignored).
    pub unexpected: Vec<String>,
}

/// [`load_state_dict`] with a choice of which key mismatches are errors, returning the
/// mismatches it tolerated. Shape and dtype mismatches are always errors; on any error nothing is
/// loaded.
///
/// ```
/// use std::collections::BTreeMap;
/// use tinygrad_tensor::Tensor;
/// use tinygrad_tensor::nn::{KeyCheck, Linear, load_state_dict_with};
/// let mut l = Linear::new(2, 1);
/// let mut sd = BTreeMap::new();
/// sd.insert("weight".to_string(), Tensor::from_slice(&[1.0f32, 2.0], &[1, 2]));
/// sd.insert("bias".to_string(), Tensor::from_slice(&[0.5f32], &[1]));
/// sd.insert("pooler.weight".to_string(), Tensor::from_slice(&[0.0f32], &[1]));
/// // a checkpoint with more than the model: allowed, and reported
/// let report = load_state_dict_with(&mut l, &sd, KeyCheck::NoMissing).unwrap();
/// assert_eq!((report.missing.len(), report.unexpected), (0, vec!["pooler.weight".to_string()]));
/// assert_eq!(l.weight.to_vec::<f32>(), vec![1.0, 2.0]);
/// // a misspelled key leaves a model tensor unloaded: an error, naming it
/// sd.insert("biass".to_string(), sd["bias"].clone());
/// sd.remove("bias");
/// let e = load_state_dict_with(&mut l, &sd, KeyCheck::NoMissing).unwrap_err();
/// assert!(e.to_string().contains("missing keys: [\"bias\"]"), "{e}");
/// let report = load_state_dict_with(&mut l, &sd, KeyCheck::Lenient).unwrap();
/// assert_eq!(report.missing, vec!["bias".to_string()]);
/// ```
///
/// # Errors
/// As [`load_state_dict`], with missing keys errors under [`KeyCheck::Exact`] and
/// [`KeyCheck::NoMissing`], unexpected ones under [`KeyCheck::Exact`].
pub fn load_state_dict_with(
    model: &mut (impl Parameters + ?Sized),
    state_dict: &BTreeMap<String, Tensor>,
    mode: KeyCheck,
) -> Result<LoadReport, StateDictError> {
    let own = get_state_dict(&*model);
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    let mut todo = Vec::new();
    for (k, t) in &own {
        let Some(v) = state_dict.get(k) else {
            missing.push(k.clone());
            continue;
        };
        let (ts, vs) = (t.shape(), v.shape());
        let scalar_like = |s: &[usize]| s.is_empty() || s == [1];
        if (ts != vs && !(scalar_like(&ts) && scalar_like(&vs))) || t.dtype() != v.dtype() {
            wrong.push(WrongEntry {
                key: k.clone(),
                expected: (ts, t.dtype()),
                got: (vs, v.dtype()),
            });
            continue;
        }
        todo.push((t.clone(), v.clone()));
    }
    let unexpected: Vec<String> = state_dict
        .keys()
        .filter(|k| !own.contains_key(*k))
        .cloned()
        .collect();
    let missing_err = mode != KeyCheck::Lenient && !missing.is_empty();
    let unexpected_err = mode == KeyCheck::Exact && !unexpected.is_empty();
    if !wrong.is_empty() || missing_err || unexpected_err {
        return Err(StateDictError::Mismatch {
            missing: if mode == KeyCheck::Lenient {
                Vec::new()
            } else {
                missing
            },
            unexpected: if mode == KeyCheck::Exact {
                unexpected
            } else {
                Vec::new()
            },
            wrong,
        });
    }
    let mut moved = Vec::new();
    for (t, v) in &todo {
        let v = if crate::multi::is_multi(t.device()) && !crate::multi::is_multi(v.device()) {
            // a sharded model shards the entry like itself (tinygrad's `shard(v.device, axis)`)
            let devices = t.devices();
            let refs: Vec<&str> = devices.iter().map(String::as_str).collect();
            v.shard(&refs, t.shard_axis().map(|a| a as isize))
        } else {
            v.try_to(t.device()).map_err(StateDictError::Device)?
        };
        let v = if v.shape() == t.shape() {
            v
        } else {
            let s: Vec<isize> = t.shape().iter().map(|&d| d as isize).collect();
            v.reshape(&s)
        };
        moved.push(v);
    }
    for ((t, _), v) in todo.iter().zip(&moved) {
        t.replace(v);
    }
    let mut devices: Vec<&str> = todo.iter().map(|(t, _)| t.device()).collect();
    devices.sort_unstable();
    devices.dedup();
    for dev in devices {
        let refs: Vec<&Tensor> = todo
            .iter()
            .map(|(t, _)| t)
            .filter(|t| t.device() == dev)
            .collect();
        Tensor::try_realize_all(&refs).map_err(StateDictError::Device)?;
    }
    Ok(LoadReport {
        missing,
        unexpected,
    })
}
