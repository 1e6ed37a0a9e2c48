//! [`OnnxError`]: every way loading or running a model can fail, each naming the file, node or
//! input and what was expected.

use std::fmt;

/// A failure to load or run an ONNX model.
#[derive(Debug)]
pub enum OnnxError {
    /// The file (or an external data file) could not be read.
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX protobuf message.
    Decode {
        /// What was being decoded.
        what: String,
        /// The decoder's message.
        message: String,
    },
    /// A tensor (an initializer, a `Constant`, an input file) that can't be made.
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A node that can't run: an unknown op, an unsupported attribute or dtype, a missing
    /// input, or its op failing on the shapes it got.
    Node {
        /// The node's name (or its first output's when unnamed).
        node: String,
        /// Its op type.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// An input given to [`crate::OnnxModel::run`] that doesn't fit the graph: missing, unknown,
    /// or of another dtype or shape than declared.
    Input {
        /// The input's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Running the model's kernels failed (a device error).
    Run {
        /// What failed.
        message: String,
    },
}

impl fmt::Display for OnnxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OnnxError::Io { path, source } => write!(f, "onnx: {path}: {source}"),
            OnnxError::Decode { what, message } => write!(f, "onnx: decoding {what}: {message}"),
            OnnxError::Tensor { name, message } => write!(f, "onnx: tensor {name:?}: {message}"),
            OnnxError::Node { node, op, message } => {
                write!(f, "onnx: node {node:?} ({op}): {message}")
            }
            OnnxError::Input { name, message } => write!(f, "onnx: input {name:?}: {message}"),
            OnnxError::Run { message } => write!(f, "onnx: running the model: {message}"),
        }
    }
}

impl std::error::Error for OnnxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OnnxError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, OnnxError>;
