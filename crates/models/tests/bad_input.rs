//! Bad input to the models: each an `Err` naming the file, tensor or field and what was expected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tinygrad_models::{Decoder, ModelError, Sampler, SamplingOptions, SentenceEncoder, Tokenizer};
use tinygrad_tensor::Tensor;
use tinygrad_tensor::nn::state::{safe_load_on, safe_save};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A scratch copy of the tiny GPT-2 directory, with `config.json` edited by `edit`.
fn gpt2_dir(tag: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tg_models_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = data("gpt2_tiny");
    std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    dir
}

fn load_err(dir: &Path) -> String {
    match Decoder::load(dir, "CPU") {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn config_errors_name_the_file_and_field() {
    let missing = std::env::temp_dir().join(format!("tg_models_none_{}", std::process::id()));
    std::fs::create_dir_all(&missing).unwrap();
    let e = load_err(&missing);
    assert!(
        e.contains("config.json") && e.contains("No such file"),
        "{e}"
    );

    let d = gpt2_dir("malformed", |_| {});
    std::fs::write(d.join("config.json"), "{\"n_embd\": 64,").unwrap();
    let e = load_err(&d);
    assert!(e.contains("config.json: not valid JSON"), "{e}");

    let d = gpt2_dir("arch", |c| c["model_type"] = "t5".into());
    let e = load_err(&d);
    assert!(
        e.contains("model_type Some(\"t5\") is not supported") && e.contains("\"llama\""),
        "{e}"
    );

    let d = gpt2_dir("field", |c| {
        c.as_object_mut().unwrap().remove("n_layer");
    });
    let e = load_err(&d);
    assert!(
        e.contains("field `n_layer`: missing (expected an integer"),
        "{e}"
    );

    let d = gpt2_dir("range", |c| c["n_head"] = (-4).into());
    let e = load_err(&d);
    assert!(
        e.contains("field `n_head`: expected an integer in 1..="),
        "{e}"
    );

    let d = gpt2_dir("act", |c| c["activation_function"] = "relu".into());
    let e = load_err(&d);
    assert!(
        e.contains("`activation_function`: \"relu\" is not supported"),
        "{e}"
    );
}

#[test]
fn weight_errors_name_the_tensor_and_the_shape_expected() {
    // the config says 3 layers; the checkpoint has 2
    let d = gpt2_dir("layers", |c| c["n_layer"] = 3.into());
    let e = load_err(&d);
    assert!(
        e.contains(
            "tensor `transformer.h.2.attn.c_attn.weight`: missing (expected shape [64, 192])"
        ),
        "{e}"
    );

    // a wider model than the weights
    let d = gpt2_dir("width", |c| c["n_embd"] = 128.into());
    let e = load_err(&d);
    assert!(
        e.contains("tensor `transformer.wte.weight`: expected shape [96, 128], got [96, 64]"),
        "{e}"
    );

    // one weight of the wrong shape
    let d = gpt2_dir("shape", |_| {});
    let mut sd: BTreeMap<String, Tensor> =
        safe_load_on(d.join("model.safetensors"), "CPU").unwrap();
    sd.insert(
        "transformer.h.1.mlp.c_fc.weight".into(),
        Tensor::zeros(&[64, 255], tinygrad_tensor::DType::FLOAT32),
    );
    safe_save(&sd, d.join("model.safetensors")).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("`transformer.h.1.mlp.c_fc.weight`: expected shape [64, 256], got [64, 255]"),
        "{e}"
    );

    // a corrupt weights file
    let d = gpt2_dir("corrupt", |_| {});
    std::fs::write(d.join("model.safetensors"), b"\x08\0\0\0\0\0\0\0{}").unwrap();
    assert!(matches!(
        Decoder::load(&d, "CPU"),
        Err(ModelError::Weight { .. })
    ));

    // a shard index naming a file outside the directory
    let d = gpt2_dir("index", |_| {});
    std::fs::remove_file(d.join("model.safetensors")).unwrap();
    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map": {"transformer.wte.weight": "../../etc/passwd"}}"#,
    )
    .unwrap();
    let e = load_err(&d);
    assert!(e.contains("must be a file in the model directory"), "{e}");

    // a GGUF file that is not one
    let f = std::env::temp_dir().join(format!("tg_models_bad_{}.gguf", std::process::id()));
    std::fs::write(&f, b"GGUF\x03\0\0\0garbage").unwrap();
    assert!(matches!(
        Decoder::load(&f, "CPU"),
        Err(ModelError::Weight { .. })
    ));
}

#[test]
fn prompts_beyond_the_context_or_vocabulary_are_errors() {
    let mut m = Decoder::load(&data("gpt2_tiny"), "CPU").unwrap();
    assert_eq!(m.context(), 64);
    let greedy = SamplingOptions::default();
    let e = m
        .generate(&[1; 60], 5, &greedy, None, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a prompt of 60 tokens plus 5 new ones exceeds the context of 64"),
        "{e}"
    );
    let e = m
        .generate(&[1, 96], 1, &greedy, None, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("token 96 is outside the vocabulary of 96"),
        "{e}"
    );
    let e = m
        .generate(&[], 1, &greedy, None, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no tokens"), "{e}");
    let e = m
        .forward(&Tensor::from_slice(&[1i32; 65], &[1, 65]), 0, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("positions 0..65 exceed the context of 64"),
        "{e}"
    );
    let e = m
        .forward(&Tensor::from_slice(&[1.0f32], &[1, 1]), 0, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected integer tokens"), "{e}");
    // ids outside the vocabulary would embed as zeros, positions past the cache's end would
    // attend over empty keys: both are errors, not logits
    let e = m
        .forward(&Tensor::from_slice(&[3i32, 96], &[1, 2]), 0, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("token ids span 3..=96; the vocabulary has 96"),
        "{e}"
    );
    let e = m
        .forward(&Tensor::from_slice(&[-1i32], &[1, 1]), 0, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("token ids span -1..=-1"), "{e}");
    m.reset_cache(1).unwrap();
    let e = m
        .forward(&Tensor::from_slice(&[1i32], &[1, 1]), 5, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("start 5 is past the 0 positions the KV cache holds"),
        "{e}"
    );
    m.forward(&Tensor::from_slice(&[1i32, 2, 3], &[1, 3]), 0, false)
        .unwrap();
    let e = m.decode_step(4, 4).unwrap_err().to_string();
    assert!(e.contains("position 4 is past the 3 positions"), "{e}");
    m.decode_step(4, 3).unwrap();
    // rewinding is allowed: position 1 again
    m.forward(&Tensor::from_slice(&[7i32], &[1, 1]), 1, false)
        .unwrap();
    assert!(m.decode_step(4, 3).is_err());
    assert!(m.set_context(65).is_err());
    let bad = SamplingOptions {
        top_p: 0.0,
        ..SamplingOptions::default()
    };
    assert!(Sampler::new(bad).is_err());
    let bad = SamplingOptions {
        temperature: f64::NAN,
        ..SamplingOptions::default()
    };
    assert!(m.generate(&[1], 1, &bad, None, &mut |_| true).is_err());
}

#[test]
fn a_tokenizer_file_that_does_not_parse_is_an_error() {
    let e = Tokenizer::from_bytes(b"{\"model\": 3}", "tokenizer.json")
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("tokenizer tokenizer.json: "), "{e}");
    let e = Tokenizer::from_file(Path::new("/nonexistent/tokenizer.json"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("/nonexistent/tokenizer.json"), "{e}");
    // a sentence-transformers directory whose config is not a BERT's
    let d = std::env::temp_dir().join(format!("tg_models_st_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.json"), r#"{"model_type": "gpt2"}"#).unwrap();
    let e = SentenceEncoder::load(&d, "CPU").err().unwrap().to_string();
    assert!(e.contains("not supported by the BERT encoder"), "{e}");
}
