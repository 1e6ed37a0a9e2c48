//! The one error type of this crate: every failure to load or run a model, naming the file,
//! tensor or field at fault and what was expected.

use std::fmt;

use tinygrad_tensor::DeviceError;

/// Why loading or running a model failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    /// A file could not be read.
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A configuration file (`config.json`, GGUF metadata, ...) is malformed, lacks a field, or
    /// has a value out of range.
    Config {
        /// The file.
        path: String,
        /// The field at fault (empty when the whole file is).
        field: String,
        /// What was wrong and what was expected.
        message: String,
    },
    /// The model's architecture (or one of its options) is not one this crate runs.
    Unsupported {
        /// The file that names it.
        path: String,
        /// What is not supported, and what is.
        message: String,
    },
    /// A weight is missing, of the wrong shape or dtype, or its file is malformed.
    Weight {
        /// The weights file (or directory).
        path: String,
        /// The tensor's name in the checkpoint.
        tensor: String,
        /// What was wrong and what was expected.
        message: String,
    },
    /// `tokenizer.json` does not parse, or text could not be encoded or decoded.
    Tokenizer {
        /// The file.
        path: String,
        /// The tokenizer's message.
        message: String,
    },
    /// The input does not fit the model (a prompt longer than the context, a token id outside the
    /// vocabulary, an empty batch).
    Input {
        /// What was wrong and what was expected.
        message: String,
    },
    /// The device failed (allocation, compilation, launch).
    Device(DeviceError),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Io { path, message } => write!(f, "{path}: {message}"),
            ModelError::Config {
                path,
                field,
                message,
            } if field.is_empty() => write!(f, "{path}: {message}"),
            ModelError::Config {
                path,
                field,
                message,
            } => write!(f, "{path}: field `{field}`: {message}"),
            ModelError::Unsupported { path, message } => write!(f, "{path}: {message}"),
            ModelError::Weight {
                path,
                tensor,
                message,
            } => write!(f, "{path}: tensor `{tensor}`: {message}"),
            ModelError::Tokenizer { path, message } => write!(f, "tokenizer {path}: {message}"),
            ModelError::Input { message } => write!(f, "{message}"),
            ModelError::Device(e) => write!(f, "device: {e}"),
        }
    }
}

impl std::error::Error for ModelError {}

impl From<DeviceError> for ModelError {
    fn from(e: DeviceError) -> Self {
        ModelError::Device(e)
    }
}

impl From<tinygrad_tensor::TensorError> for ModelError {
    fn from(e: tinygrad_tensor::TensorError) -> Self {
        match e {
            tinygrad_tensor::TensorError::Device(d) => ModelError::Device(d),
            other => ModelError::Input {
                message: other.to_string(),
            },
        }
    }
}

/// This crate's results.
pub type Result<T> = std::result::Result<T, ModelError>;

/// Checks that every id in `tokens` (an integer tensor) is in `0..vocab` (an embedding would
/// give an id outside it a row of zeros: a silent wrong answer). Reads two numbers back.
pub(crate) fn check_token_ids(
    tokens: &tinygrad_tensor::Tensor,
    vocab: usize,
    op: &str,
) -> Result<()> {
    use tinygrad_tensor::DType;
    let t = tokens.cast(DType::INT64).flatten(0, -1);
    let lo: Vec<i64> = t.min(None::<isize>).try_to_vec()?;
    let hi: Vec<i64> = t.max(None::<isize>).try_to_vec()?;
    match (lo.first(), hi.first()) {
        (Some(&lo), Some(&hi)) if lo < 0 || hi >= vocab as i64 => Err(ModelError::Input {
            message: format!(
                "{op}: token ids span {lo}..={hi}; the vocabulary has {vocab} (ids 0..{vocab})"
            ),
        }),
        _ => Ok(()),
    }
}
