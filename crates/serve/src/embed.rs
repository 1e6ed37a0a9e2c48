//! The embedding worker: one thread owns the sentence encoder (BERT/MiniLM) and encodes each
//! request's texts as one batch, in the order requests come.

use std::path::Path;
use std::sync::mpsc::{Sender, channel};

use tinygrad_models::SentenceEncoder;
use tokio::sync::oneshot;

/// Embeddings of a request's texts (one row per text) and the number of tokens they took.
pub type Embedded = Result<(Vec<Vec<f32>>, usize), String>;

struct Job {
    texts: Vec<String>,
    reply: oneshot::Sender<Embedded>,
}

/// The handle the request handlers hold.
pub struct Embedder {
    jobs: Sender<Job>,
}

impl Embedder {
    /// Loads the sentence-transformers directory `dir` on `device` and starts its thread.
    ///
    /// # Errors
    /// If the model does not load.
    pub fn start(dir: &Path, device: &str) -> Result<Embedder, String> {
        let (tx, rx) = channel::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let dir = dir.to_path_buf();
        let device = device.to_string();
        std::thread::Builder::new()
            .name("tinygrad-serve embeddings".into())
            .spawn(move || {
                let encoder = match SentenceEncoder::load(&dir, &device) {
                    Ok(e) => {
                        let _ = ready_tx.send(Ok(()));
                        e
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{}: {e}", dir.display())));
                        return;
                    }
                };
                for job in rx {
                    let _ = job.reply.send(encode(&encoder, &job.texts));
                }
            })
            .map_err(|e| e.to_string())?;
        ready_rx
            .recv()
            .map_err(|_| "the embedding thread ended while loading".to_string())??;
        Ok(Embedder { jobs: tx })
    }

    /// The embeddings of `texts`.
    pub async fn embed(&self, texts: Vec<String>) -> Embedded {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { texts, reply })
            .map_err(|_| "the embedding worker stopped".to_string())?;
        answer
            .await
            .map_err(|_| "the embedding worker stopped".to_string())?
    }
}

fn encode(encoder: &SentenceEncoder, texts: &[String]) -> Embedded {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = encoder.tokenize(&refs).map_err(|e| e.to_string())?;
    let tokens = ids.iter().map(Vec::len).sum();
    let emb = encoder.encode_ids(&ids).map_err(|e| e.to_string())?;
    let dim = emb.shape()[1];
    let values = emb.try_to_vec::<f32>().map_err(|e| e.to_string())?;
    Ok((values.chunks(dim).map(<[f32]>::to_vec).collect(), tokens))
}
