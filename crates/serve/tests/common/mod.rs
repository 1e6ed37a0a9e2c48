//! What the server tests share: a tiny LLaMA-layout model with random weights written as a GGUF
//! file (SmolLM2's real tokenizer and chat template, from the models crate's test data), the
//! server started on a loopback port, and a small HTTP/1.1 client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tinygrad_tensor::nn::gguf::{GgufValue, gguf_metadata};

/// The tiny model's sizes: SmolLM2's vocabulary, 2 layers of width 64.
pub const HIDDEN: usize = 64;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const FFN: usize = 128;

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn type_id(v: &GgufValue) -> u32 {
    match v {
        GgufValue::U8(_) => 0,
        GgufValue::I8(_) => 1,
        GgufValue::U16(_) => 2,
        GgufValue::I16(_) => 3,
        GgufValue::U32(_) => 4,
        GgufValue::I32(_) => 5,
        GgufValue::F32(_) => 6,
        GgufValue::Bool(_) => 7,
        GgufValue::String(_) => 8,
        GgufValue::Array(_) => 9,
        GgufValue::U64(_) => 10,
        GgufValue::I64(_) => 11,
        GgufValue::F64(_) => 12,
    }
}

fn write_value(out: &mut Vec<u8>, v: &GgufValue) {
    match v {
        GgufValue::U8(x) => out.push(*x),
        GgufValue::I8(x) => out.extend(x.to_le_bytes()),
        GgufValue::U16(x) => out.extend(x.to_le_bytes()),
        GgufValue::I16(x) => out.extend(x.to_le_bytes()),
        GgufValue::U32(x) => out.extend(x.to_le_bytes()),
        GgufValue::I32(x) => out.extend(x.to_le_bytes()),
        GgufValue::F32(x) => out.extend(x.to_le_bytes()),
        GgufValue::Bool(x) => out.push(u8::from(*x)),
        GgufValue::String(s) => write_str(out, s),
        GgufValue::Array(items) => {
            out.extend(items.first().map_or(0, type_id).to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for it in items {
                write_value(out, it);
            }
        }
        GgufValue::U64(x) => out.extend(x.to_le_bytes()),
        GgufValue::I64(x) => out.extend(x.to_le_bytes()),
        GgufValue::F64(x) => out.extend(x.to_le_bytes()),
    }
}

/// A GGUF v3 file of `meta` and float32 `tensors` (name, numpy-order shape, values).
fn gguf_bytes(
    meta: &IndexMap<String, GgufValue>,
    tensors: &[(String, Vec<usize>, Vec<f32>)],
) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((meta.len() as u64).to_le_bytes());
    for (k, v) in meta {
        write_str(&mut out, k);
        out.extend(type_id(v).to_le_bytes());
        write_value(&mut out, v);
    }
    let mut offset = 0u64;
    for (name, shape, values) in tensors {
        write_str(&mut out, name);
        out.extend((shape.len() as u32).to_le_bytes());
        for d in shape.iter().rev() {
            out.extend((*d as u64).to_le_bytes());
        }
        out.extend(0u32.to_le_bytes()); // F32
        out.extend(offset.to_le_bytes());
        offset += (values.len() as u64 * 4).next_multiple_of(32);
    }
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    for (_, _, values) in tensors {
        let start = out.len();
        for v in values {
            out.extend(v.to_le_bytes());
        }
        while !(out.len() - start).is_multiple_of(32) {
            out.push(0);
        }
    }
    out
}

/// A seeded generator of small weights (xorshift): the same file every run.
struct Weights(u64);

impl Weights {
    fn take(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                ((self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale
            })
            .collect()
    }
}

/// Writes the tiny model (once per test binary) and returns its path.
pub fn tiny_model() -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-tiny-smollm2-vocab.gguf");
    if path.exists() {
        return path;
    }
    let vocab_file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/smollm2-vocab.gguf");
    let tok = gguf_metadata(&vocab_file).expect("SmolLM2's tokenizer metadata");
    let vocab = tok["tokenizer.ggml.tokens"]
        .as_array()
        .expect("the token list")
        .len();
    let mut meta = IndexMap::new();
    let s = |v: &str| GgufValue::String(v.into());
    meta.insert("general.architecture".into(), s("llama"));
    meta.insert("general.name".into(), s("tiny random llama"));
    for (k, v) in [
        ("context_length", 512u32),
        ("embedding_length", HIDDEN as u32),
        ("block_count", LAYERS as u32),
        ("feed_forward_length", FFN as u32),
        ("attention.head_count", HEADS as u32),
        ("attention.head_count_kv", KV_HEADS as u32),
        ("vocab_size", vocab as u32),
    ] {
        meta.insert(format!("llama.{k}"), GgufValue::U32(v));
    }
    meta.insert("llama.rope.freq_base".into(), GgufValue::F32(10000.0));
    meta.insert(
        "llama.attention.layer_norm_rms_epsilon".into(),
        GgufValue::F32(1e-5),
    );
    for (k, v) in tok.iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
        meta.insert(k.clone(), v.clone());
    }
    let mut w = Weights(0x9e37_79b9_7f4a_7c15);
    let hd = HIDDEN / HEADS;
    let mut tensors = vec![(
        "token_embd.weight".to_string(),
        vec![vocab, HIDDEN],
        w.take(vocab * HIDDEN, 1.0),
    )];
    for i in 0..LAYERS {
        let mut t = |name: &str, shape: Vec<usize>, scale: f32| {
            let n = shape.iter().product();
            tensors.push((format!("blk.{i}.{name}.weight"), shape, w.take(n, scale)));
        };
        t("attn_norm", vec![HIDDEN], 0.1);
        t("attn_q", vec![HEADS * hd, HIDDEN], 0.3);
        t("attn_k", vec![KV_HEADS * hd, HIDDEN], 0.3);
        t("attn_v", vec![KV_HEADS * hd, HIDDEN], 0.3);
        t("attn_output", vec![HIDDEN, HEADS * hd], 0.3);
        t("ffn_norm", vec![HIDDEN], 0.1);
        t("ffn_gate", vec![FFN, HIDDEN], 0.3);
        t("ffn_up", vec![FFN, HIDDEN], 0.3);
        t("ffn_down", vec![HIDDEN, FFN], 0.3);
    }
    // norms near 1
    for (name, _, values) in &mut tensors {
        if name.ends_with("norm.weight") {
            values.iter_mut().for_each(|v| *v += 1.0);
        }
    }
    let mut norm = w.take(HIDDEN, 0.1);
    norm.iter_mut().for_each(|v| *v += 1.0);
    tensors.push(("output_norm.weight".into(), vec![HIDDEN], norm));
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, gguf_bytes(&meta, &tensors)).expect("write the tiny model");
    std::fs::rename(&tmp, &path).expect("move the tiny model into place");
    path
}

/// A running server, killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts `tinygrad-serve` with `args` on a free loopback port and waits for its URL line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tinygrad-serve"))
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tinygrad-serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the server's first line");
        let addr = line
            .trim()
            .strip_prefix("tinygrad-serve: listening on http://")
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("unexpected first line from tinygrad-serve: {line:?}")
            })
            .to_string();
        Server {
            child,
            addr,
            _stdout: stdout,
        }
    }

    /// The base URL of OpenAI's API on this server.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM-like termination: kills the process and waits.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let _ = self.child.kill();
        self.child.wait().expect("wait for the server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, headers (lower-case names) and the body (de-chunked).
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The `data:` payloads of a server-sent event stream, in order.
    pub fn events(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.strip_prefix("data:").map(|d| d.trim().to_string()))
            .collect()
    }
}

/// Sends one HTTP/1.1 request (`Connection: close`) and reads the whole response.
pub fn request(addr: &str, method: &str, path: &str, body: Option<&[u8]>) -> Response {
    let mut s = TcpStream::connect(addr).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    if let Some(b) = body {
        // a server may answer (413) and close before reading a large body
        let _ = s.write_all(b);
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_response(&raw)
}

/// POSTs a JSON value.
pub fn post(addr: &str, path: &str, v: &serde_json::Value) -> Response {
    request(addr, "POST", path, Some(v.to_string().as_bytes()))
}

fn parse_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&rest[..nl])
                    .split(';')
                    .next()
                    .unwrap_or("0")
                    .trim(),
                16,
            )
            .unwrap_or(0);
            if size == 0 {
                break;
            }
            let start = nl + 2;
            out.extend(&rest[start..(start + size).min(rest.len())]);
            rest = &rest[(start + size + 2).min(rest.len())..];
        }
        body = out;
    }
    Response {
        status,
        headers,
        body,
    }
}

/// Polls `/health` until `ok(json)` or `limit` passes; the last JSON.
pub fn wait_health(
    addr: &str,
    limit: Duration,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let h = request(addr, "GET", "/health", None).json();
        if ok(&h) || start.elapsed() > limit {
            return h;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Python interpreter that has `module`, from `SERVE_PYTHON` or `python3`; `None` (with the
/// reason printed) when there is none — a test then skips, unless
/// `TINYGRAD_REQUIRE_SERVE_CLIENTS=1` (CI) makes it fail.
pub fn python_with(module: &str) -> Option<String> {
    let py = std::env::var("SERVE_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&py)
        .args(["-c", &format!("import {module}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(py);
    }
    let why = format!("{py} cannot import {module} (set SERVE_PYTHON to a Python that can)");
    if std::env::var("TINYGRAD_REQUIRE_SERVE_CLIENTS").is_ok_and(|v| v == "1") {
        panic!("TINYGRAD_REQUIRE_SERVE_CLIENTS=1 but {why}");
    }
    println!("skipped: {why}");
    None
}
