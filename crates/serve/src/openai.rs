//! OpenAI's API shapes as its clients send and read them: the request bodies (parsed with
//! serde, unknown fields ignored as OpenAI does), the error body `{"error": {...}}` with its
//! status code, and the helpers that build responses and stream chunks.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// An error as OpenAI returns it: a status code and `{"error": {"message", "type", "param",
/// "code"}}`.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// OpenAI's error type (`invalid_request_error`, `not_found_error`, `server_error`).
    pub kind: &'static str,
    /// The request field at fault, when there is one.
    pub param: Option<&'static str>,
    /// OpenAI's error code (`model_not_found`, `context_length_exceeded`), when there is one.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 `invalid_request_error` about `param`.
    pub fn invalid(param: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }

    /// The same error with OpenAI's `code`.
    pub fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// A 404 for a model this server does not serve.
    pub fn unknown_model(name: &str, served: &[&str]) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "The model `{name}` does not exist: this server serves {}",
                served.join(", ")
            ),
            kind: "invalid_request_error",
            param: Some("model"),
            code: Some("model_not_found"),
        }
    }

    /// A 500: the model or the device failed on a valid request.
    pub fn server(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    /// The JSON body (also the payload of an error event in a stream).
    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// A request body parsed as `T`, or the 400 that names what is wrong with it (serde's message
/// names the field and the type it expected).
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("Invalid request body: {e}")))
}

/// `stop`: one string or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop sequence.
    One(String),
    /// Several (OpenAI allows up to 4).
    Many(Vec<String>),
}

/// A message's `content`: text, or a list of parts of which the text ones are read.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// `[{"type": "text", "text": "..."}]` parts.
    Parts(Vec<ContentPart>),
}

/// One part of a message's content.
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    /// `text` (other kinds, such as images, are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// One message of a chat request.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What it says (`null` for an assistant turn without text).
    #[serde(default)]
    pub content: Option<Content>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// A last chunk with the usage counts before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// The sampling and length fields that chat and text completions share.
#[derive(Debug, Deserialize)]
pub struct Sampling {
    /// New tokens at most.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// The newer name of `max_tokens` (chat).
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature (OpenAI's default 1; 0: greedy).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Nucleus sampling (default 1).
    #[serde(default)]
    pub top_p: Option<f64>,
    /// The sampler's seed: the same seed, prompt and options give the same tokens.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Stop sequences, left out of the text.
    #[serde(default)]
    pub stop: Option<Stop>,
    /// Choices per request (only 1).
    #[serde(default)]
    pub n: Option<u64>,
    /// Server-sent events instead of one JSON body.
    #[serde(default)]
    pub stream: bool,
    /// Options of the stream.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The model (must be the one served; may be left out).
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Sampling, length and streaming.
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// A text completion's `prompt`: one string (a list of one string is accepted too).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// The prompt.
    One(String),
    /// A list of prompts (one only: `n` choices per prompt are not served).
    Many(Vec<String>),
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    /// The model (must be the one served; may be left out).
    #[serde(default)]
    pub model: Option<String>,
    /// The text to continue.
    pub prompt: Prompt,
    /// Sampling, length and streaming.
    #[serde(flatten)]
    pub sampling: Sampling,
}

/// `input` of an embeddings request.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    /// One text.
    One(String),
    /// Several texts.
    Many(Vec<String>),
}

/// `POST /v1/embeddings`.
#[derive(Debug, Deserialize)]
pub struct EmbeddingRequest {
    /// The embedding model (must be the one served; may be left out).
    #[serde(default)]
    pub model: Option<String>,
    /// The texts.
    pub input: EmbeddingInput,
    /// `float` (default) or `base64` (little-endian float32 bytes: the openai client's choice).
    #[serde(default)]
    pub encoding_format: Option<String>,
}

/// Seconds since the Unix epoch (OpenAI's `created`).
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `usage`.
pub fn usage(prompt: usize, completion: usize) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}
