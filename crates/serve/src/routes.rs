//! The HTTP routes: OpenAI's `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`,
//! `/v1/models`, plus `/health` and the chat page at `/`. Every failure is an OpenAI-shaped
//! error ([`ApiError`]); no request can panic the server or reach another request's tokens
//! (each has its own sequence and its own event channel in the engine).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};
use tinygrad_models::{Message, SamplingOptions, Tokenizer};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_stream::wrappers::ReceiverStream;

use crate::embed::Embedder;
use crate::engine::{Engine, Event, Finish, Job};
use crate::openai::{
    ApiError, ChatRequest, CompletionRequest, Content, EmbeddingInput, EmbeddingRequest, Prompt,
    Sampling, Stop, now_secs, parse, usage,
};

/// The chat page (one static file, no build step, no CDN).
const PAGE: &str = include_str!("page.html");

/// Request bodies larger than this are refused with a 413.
pub const BODY_LIMIT: usize = 4 << 20;

/// What the handlers share.
pub struct AppState {
    /// The generation engine.
    pub engine: Engine,
    /// The language model's tokenizer (chat template, encoding).
    pub tokenizer: Arc<Tokenizer>,
    /// The language model's name (`/v1/models`, `model` fields).
    pub model: String,
    /// Tokens of prompt plus reply at most.
    pub context: usize,
    /// The embedding model and its name, when one is served.
    pub embedder: Option<(Embedder, String)>,
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/embeddings", post(embeddings))
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                message: "Unknown route: this server serves /v1/chat/completions, \
                          /v1/completions, /v1/embeddings, /v1/models, /health and /"
                    .into(),
                kind: "invalid_request_error",
                param: None,
                code: None,
            }
        })
        .method_not_allowed_fallback(|| async {
            ApiError {
                status: StatusCode::METHOD_NOT_ALLOWED,
                message: "Method not allowed on this route".into(),
                kind: "invalid_request_error",
                param: None,
                code: None,
            }
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// A request id: `prefix`-, a counter and the time, unique within the process.
fn request_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:x}{n:06x}", now_secs())
}

/// The body's bytes, or the error for a body that could not be read (413 when too large).
fn body(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|r| {
        let status = r.status();
        ApiError {
            status,
            message: if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("Request body too large: at most {BODY_LIMIT} bytes")
            } else {
                format!("Could not read the request body: {r}")
            },
            kind: "invalid_request_error",
            param: None,
            code: None,
        }
    })
}

/// Refuses a `model` other than `served` (a missing one means the served model).
fn check_model(asked: Option<&str>, served: &str) -> Result<(), ApiError> {
    match asked {
        Some(m) if m != served => Err(ApiError::unknown_model(m, &[served])),
        _ => Ok(()),
    }
}

async fn health(State(s): State<Arc<AppState>>) -> Json<Value> {
    let load = &s.engine.load;
    Json(json!({
        "status": "ok",
        "waiting": load.waiting.load(Ordering::SeqCst),
        "active": load.active.load(Ordering::SeqCst),
    }))
}

async fn models(State(s): State<Arc<AppState>>) -> Json<Value> {
    let created = now_secs();
    let mut data = vec![json!({
        "id": s.model, "object": "model", "created": created, "owned_by": "tinygrad-rs",
    })];
    if let Some((_, name)) = &s.embedder {
        data.push(json!({
            "id": name, "object": "model", "created": created, "owned_by": "tinygrad-rs",
        }));
    }
    Json(json!({"object": "list", "data": data}))
}

/// The engine job for `prompt` under `sampling`, after OpenAI's checks, and its event channel.
fn job(
    s: &AppState,
    prompt: Vec<u32>,
    sampling: &Sampling,
) -> Result<(Job, UnboundedReceiver<Event>), ApiError> {
    if sampling.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(
            Some("n"),
            "Only n = 1 is supported: send one request per choice",
        ));
    }
    if prompt.is_empty() {
        return Err(ApiError::invalid(None, "The prompt has no tokens"));
    }
    let context_error = |asked: usize| {
        ApiError::invalid(
            Some("messages"),
            format!(
                "This model's maximum context length is {} tokens. However, you requested {} \
                 tokens ({} in the prompt, {asked} for the completion)",
                s.context,
                prompt.len() + asked,
                prompt.len()
            ),
        )
        .with_code("context_length_exceeded")
    };
    if prompt.len() >= s.context {
        return Err(context_error(1));
    }
    let max_tokens = match sampling.max_completion_tokens.or(sampling.max_tokens) {
        Some(0) => {
            return Err(ApiError::invalid(
                Some("max_tokens"),
                "max_tokens must be at least 1",
            ));
        }
        Some(n) => {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            if prompt.len().saturating_add(n) > s.context {
                return Err(context_error(n));
            }
            n
        }
        None => s.context - prompt.len(),
    };
    let temperature = sampling.temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid(
            Some("temperature"),
            format!("temperature {temperature} is not between 0 and 2"),
        ));
    }
    let top_p = sampling.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid(
            Some("top_p"),
            format!("top_p {top_p} is not in (0, 1]"),
        ));
    }
    let stop = match &sampling.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) if v.len() <= 4 => v.clone(),
        Some(Stop::Many(v)) => {
            return Err(ApiError::invalid(
                Some("stop"),
                format!("At most 4 stop sequences, got {}", v.len()),
            ));
        }
    };
    let seed = match sampling.seed {
        Some(seed) => seed as u64,
        // a fresh seed per request when none is given
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    };
    let (events, rx) = unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        sampling: SamplingOptions {
            temperature,
            top_k: 0,
            top_p,
            seed,
        },
        stop,
        events,
    };
    Ok((job, rx))
}

/// How a generation's events become a response: one JSON body or a stream of chunks.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Chat,
    Text,
}

/// Runs the prompt `ids` with the request's `sampling` and answers with its reply: a JSON
/// body, or server-sent chunks when the request streams.
async fn generate(
    s: Arc<AppState>,
    kind: Kind,
    ids: Vec<u32>,
    sampling: &Sampling,
) -> Result<Response, ApiError> {
    let (job, mut rx) = job(&s, ids, sampling)?;
    let stream = sampling.stream;
    let include_usage = sampling
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let prompt_tokens = job.prompt.len();
    if !s.engine.submit(job) {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "The server is shutting down".into(),
            kind: "server_error",
            param: None,
            code: None,
        });
    }
    let id = request_id(if kind == Kind::Chat {
        "chatcmpl"
    } else {
        "cmpl"
    });
    let created = now_secs();
    let model = s.model.clone();
    if stream {
        let (tx, out) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(64);
        tokio::spawn(async move {
            let chunk = |delta: Option<&str>, finish: Option<Finish>, first: bool| -> Value {
                let choice = match kind {
                    Kind::Chat => {
                        let mut d = serde_json::Map::new();
                        if first {
                            d.insert("role".into(), "assistant".into());
                        }
                        if let Some(t) = delta {
                            d.insert("content".into(), t.into());
                        }
                        json!({"index": 0, "delta": d, "logprobs": null,
                               "finish_reason": finish.map(Finish::as_str)})
                    }
                    Kind::Text => json!({"index": 0, "text": delta.unwrap_or(""),
                                         "logprobs": null,
                                         "finish_reason": finish.map(Finish::as_str)}),
                };
                json!({"id": id, "object": if kind == Kind::Chat {
                        "chat.completion.chunk" } else { "text_completion" },
                       "created": created, "model": model, "choices": [choice]})
            };
            let send = |v: Value| SseEvent::default().data(v.to_string());
            if kind == Kind::Chat
                && tx
                    .send(Ok(send(chunk(Some(""), None, true))))
                    .await
                    .is_err()
            {
                return;
            }
            while let Some(ev) = rx.recv().await {
                let msg = match ev {
                    Event::Text(t) => send(chunk(Some(&t), None, false)),
                    Event::Done {
                        finish,
                        prompt_tokens,
                        completion_tokens,
                    } => {
                        let _ = tx.send(Ok(send(chunk(None, Some(finish), false)))).await;
                        if include_usage {
                            let mut u = chunk(None, None, false);
                            u["choices"] = json!([]);
                            u["usage"] = usage(prompt_tokens, completion_tokens);
                            let _ = tx.send(Ok(send(u))).await;
                        }
                        break;
                    }
                    Event::Error(e) => {
                        let _ = tx.send(Ok(send(ApiError::server(e).body()))).await;
                        break;
                    }
                };
                if tx.send(Ok(msg)).await.is_err() {
                    return; // the client went away: dropping rx frees its slot
                }
            }
            let _ = tx.send(Ok(SseEvent::default().data("[DONE]"))).await;
        });
        return Ok(Sse::new(ReceiverStream::new(out))
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let mut text = String::new();
    loop {
        match rx.recv().await {
            Some(Event::Text(t)) => text.push_str(&t),
            Some(Event::Done {
                finish,
                completion_tokens,
                ..
            }) => {
                let choice = match kind {
                    Kind::Chat => json!({"index": 0, "logprobs": null,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish.as_str()}),
                    Kind::Text => json!({"index": 0, "text": text, "logprobs": null,
                        "finish_reason": finish.as_str()}),
                };
                let object = if kind == Kind::Chat {
                    "chat.completion"
                } else {
                    "text_completion"
                };
                return Ok(Json(json!({
                    "id": id, "object": object, "created": created, "model": model,
                    "choices": [choice], "usage": usage(prompt_tokens, completion_tokens),
                }))
                .into_response());
            }
            Some(Event::Error(e)) => return Err(ApiError::server(e)),
            None => return Err(ApiError::server("The engine stopped")),
        }
    }
}

async fn chat_completions(
    State(s): State<Arc<AppState>>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: ChatRequest = parse(&body(b)?)?;
    check_model(req.model.as_deref(), &s.model)?;
    if req.messages.is_empty() {
        return Err(ApiError::invalid(Some("messages"), "messages is empty"));
    }
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        let text = match &m.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => {
                let mut t = String::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(x)) => t.push_str(x),
                        (other, _) => {
                            return Err(ApiError::invalid(
                                Some("messages"),
                                format!("Content parts of type {other:?} are not supported"),
                            ));
                        }
                    }
                }
                t
            }
        };
        messages.push(Message::new(m.role.clone(), text));
    }
    let prompt = s
        .tokenizer
        .apply_chat_template(&messages, true)
        .map_err(|e| ApiError::invalid(Some("messages"), e.to_string()))?;
    // the template writes every special token itself
    let ids = s
        .tokenizer
        .encode(&prompt, false)
        .map_err(|e| ApiError::invalid(Some("messages"), e.to_string()))?;
    generate(s.clone(), Kind::Chat, ids, &req.sampling).await
}

async fn completions(
    State(s): State<Arc<AppState>>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: CompletionRequest = parse(&body(b)?)?;
    check_model(req.model.as_deref(), &s.model)?;
    let prompt = match req.prompt {
        Prompt::One(p) => p,
        Prompt::Many(mut v) if v.len() == 1 => v.remove(0),
        Prompt::Many(v) => {
            return Err(ApiError::invalid(
                Some("prompt"),
                format!("One prompt per request is supported, got {}", v.len()),
            ));
        }
    };
    let ids = s
        .tokenizer
        .encode(&prompt, true)
        .map_err(|e| ApiError::invalid(Some("prompt"), e.to_string()))?;
    generate(s.clone(), Kind::Text, ids, &req.sampling).await
}

/// Texts per embeddings request at most (OpenAI's limit).
const MAX_EMBEDDING_INPUTS: usize = 2048;

async fn embeddings(
    State(s): State<Arc<AppState>>,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: EmbeddingRequest = parse(&body(b)?)?;
    let Some((embedder, name)) = &s.embedder else {
        return Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: "This server has no embedding model (start it with --embedding-model DIR)"
                .into(),
            kind: "invalid_request_error",
            param: Some("model"),
            code: Some("model_not_found"),
        });
    };
    check_model(req.model.as_deref(), name)?;
    let texts = match req.input {
        EmbeddingInput::One(t) => vec![t],
        EmbeddingInput::Many(v) => v,
    };
    if texts.is_empty() || texts.len() > MAX_EMBEDDING_INPUTS {
        return Err(ApiError::invalid(
            Some("input"),
            format!(
                "input must hold 1 to {MAX_EMBEDDING_INPUTS} texts, got {}",
                texts.len()
            ),
        ));
    }
    if texts.iter().any(String::is_empty) {
        return Err(ApiError::invalid(Some("input"), "input has an empty text"));
    }
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                Some("encoding_format"),
                format!("encoding_format {other:?} is not float or base64"),
            ));
        }
    };
    let (rows, tokens) = embedder.embed(texts).await.map_err(ApiError::server)?;
    let data: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(row)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(Json(json!({
        "object": "list", "data": data, "model": name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response())
}
