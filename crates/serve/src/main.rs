//! `tinygrad-serve`: an OpenAI-compatible HTTP server for a tinygrad-rs language model (a GGUF
//! file or a Hugging Face directory), with continuous batching, optional embeddings (a
//! sentence-transformers directory) and a chat page at `/`.
//!
//! ```text
//! tinygrad-serve --model SmolLM2-135M-Instruct.Q4_1.gguf [--embedding-model DIR] [--port 8080]
//! ```
//!
//! Module map:
//! - [`openai`]: the API's request bodies, errors and response pieces.
//! - [`routes`]: the HTTP routes (axum) and their checks.
//! - [`engine`]: the thread that owns the decoder and decodes every active request together.
//! - [`embed`]: the thread that owns the sentence encoder.
//! - `page.html`: the chat page, embedded in the binary.

mod embed;
mod engine;
mod openai;
mod routes;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use hyper_util::rt::TokioIo;
use tinygrad_models::{Decoder, Tokenizer};
use tinygrad_tensor::{default_device, environment};

/// An OpenAI-compatible server for a local language model: chat and text completions (streamed
/// or not) with continuous batching, embeddings, and a chat page at `/`.
#[derive(Parser)]
#[command(name = "tinygrad-serve", version, after_help = environment::help())]
struct Args {
    /// The language model: a `.gguf` file (its own tokenizer and chat template) or a Hugging
    /// Face directory with `tokenizer.json`.
    #[arg(long)]
    model: PathBuf,
    /// A sentence-transformers directory (e.g. all-MiniLM-L6-v2) for `/v1/embeddings`.
    #[arg(long)]
    embedding_model: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The port (0: any free one; the URL is printed).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests decoded together at most (more wait for a slot).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=64))]
    max_batch: u64,
    /// Tokens of prompt plus reply per request at most (at most the model's own context).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(2..))]
    context: u64,
    /// Seconds a connection may take to send a request's head (and an idle one to start the
    /// next): then it is closed, so idle or stalled clients do not hold connections forever.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
}

/// The name a model is served under: its file name without the extension.
fn model_name(path: &Path) -> String {
    path.file_stem()
        .or(path.file_name())
        .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned())
}

/// The model's tokenizer: `tokenizer.json` in a directory, else the GGUF file's own.
fn load_tokenizer(model: &Path) -> Result<Tokenizer, String> {
    let t = if model.is_dir() {
        Tokenizer::from_file(&model.join("tokenizer.json"))
    } else {
        Tokenizer::from_gguf(model)
    };
    t.map_err(|e| format!("{}: no usable tokenizer: {e}", model.display()))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let args = Args::parse();
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tinygrad-serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> Result<(), String> {
    let device = default_device();
    let mut decoder = Decoder::load(&args.model, &device)
        .map_err(|e| format!("{}: {e}", args.model.display()))?;
    let max_context = decoder.config.max_context;
    let context = usize::try_from(args.context)
        .unwrap_or(usize::MAX)
        .min(max_context);
    if context < args.context as usize {
        tracing::info!("the model's context is {max_context} tokens: serving {context}");
    }
    decoder.set_context(context).map_err(|e| e.to_string())?;
    let tokenizer = Arc::new(load_tokenizer(&args.model)?);
    let eos = tokenizer
        .eos_token()
        .and_then(|t| tokenizer.token_to_id(t))
        .or(decoder.config.eos_token_id);
    let embedder = match &args.embedding_model {
        Some(dir) => Some((embed::Embedder::start(dir, &device)?, model_name(dir))),
        None => None,
    };
    let model = model_name(&args.model);
    tracing::info!(
        "{model}: {:?}, {} layers, context {context}, batch up to {}, on {device}",
        decoder.config.arch,
        decoder.config.num_layers,
        args.max_batch
    );
    let engine = engine::Engine::start(decoder, tokenizer.clone(), eos, args.max_batch as usize);
    let state = Arc::new(routes::AppState {
        engine,
        tokenizer,
        model,
        context,
        embedder,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async move {
        let addr = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("listening on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        // the line the tests and scripts wait for
        println!("tinygrad-serve: listening on http://{bound}");
        let stopping = state.clone();
        accept(
            listener,
            routes::router(state),
            Duration::from_secs(args.header_timeout),
            async move {
                shutdown_signal().await;
                tracing::info!("shutting down: in-flight replies end now");
                stopping.engine.stop();
            },
        )
        .await;
        Ok(())
    })
}

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then waits
/// for the connections' in-flight replies to end. Each connection is HTTP/1 with a
/// `header_timeout` to send a request's head (hyper's timer; `axum::serve` sets none, so a
/// client that stalls or idles kept its connection forever).
async fn accept(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    header_timeout: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // (out of descriptors, say: the connections that hold them may end)
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout);
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
