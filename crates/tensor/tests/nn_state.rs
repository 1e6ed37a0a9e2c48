//! safetensors files (`crates/tensor/src/nn/state.rs`): fixtures written by the reference Python
//! `safetensors` package (`tests/golden/gen_safetensors.py`) load bit-exactly; save -> load
//! round-trips every dtype bit-exactly; models save and load through state dicts; truncated,
//! corrupted and hostile files are `Err`s naming the file (and tensor), never panics.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::Value;
use tinygrad_tensor::nn::state::{
    safe_load, safe_load_bytes, safe_load_metadata, safe_load_on, safe_save, safe_save_bytes,
    safe_save_with_metadata,
};
use tinygrad_tensor::nn::{Linear, Module, get_state_dict, load_state_dict};
use tinygrad_tensor::{DType, Tensor, impl_parameters};

fn golden(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden")).join(name)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-nn-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn dtype_of(code: &str) -> DType {
    match code {
        "BOOL" => DType::BOOL,
        "U8" => DType::UINT8,
        "I8" => DType::INT8,
        "U16" => DType::UINT16,
        "I16" => DType::INT16,
        "U32" => DType::UINT32,
        "I32" => DType::INT32,
        "U64" => DType::UINT64,
        "I64" => DType::INT64,
        "F16" => DType::FLOAT16,
        "BF16" => DType::BFLOAT16,
        "F32" => DType::FLOAT32,
        "F64" => DType::FLOAT64,
        "F8_E4M3" => DType::FP8E4M3,
        "F8_E5M2" => DType::FP8E5M2,
        other => panic!("unknown dtype {other}"),
    }
}

fn expected() -> Value {
    let p = golden("safetensors.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn python_written_file_loads_bit_exactly() {
    let want = expected();
    for device in ["CPU", "REF"] {
        let got = safe_load_on(golden("dtypes.safetensors"), device).unwrap();
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(got.len(), tensors.len());
        for (k, w) in tensors {
            let t = &got[k];
            assert_eq!(t.device(), device);
            assert_eq!(t.dtype(), dtype_of(w["dtype"].as_str().unwrap()), "{k}");
            let shape: Vec<usize> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(t.shape(), shape, "{k}");
            assert_eq!(
                t.try_to_bytes().unwrap(),
                hex(w["hex"].as_str().unwrap()),
                "{k}"
            );
        }
    }
    let f = safe_load(golden("dtypes.safetensors")).unwrap();
    assert_eq!(
        f["f32"].to_vec::<f32>(),
        vec![0.5, -1.25, 3.0, 1e-3, -0.0, 65504.0]
    );
    assert_eq!(
        f["bf16"].to_f64_vec(),
        vec![1.0, -2.0, 0.15625, 3.00405527047391e38]
    );
    assert_eq!(f["f8_e4m3"].to_f64_vec()[..3], [1.0, -1.0, 448.0]);
    assert_eq!(
        f["scalar"].shape(),
        vec![1],
        "the Python package writes a 0-d array as [1]"
    );
    assert_eq!(f["empty"].shape(), vec![0, 3]);
    let meta = safe_load_metadata(golden("dtypes.safetensors"))
        .unwrap()
        .unwrap();
    assert_eq!(meta["producer"], "tests/golden/gen_safetensors.py");
}

struct Mlp {
    l1: Linear,
    l2: Linear,
}
impl_parameters!(Mlp { l1, l2 });

#[test]
fn python_written_weights_load_into_a_model() {
    let want = expected();
    let mut m = Mlp {
        l1: Linear::new(4, 5),
        l2: Linear::new(5, 3),
    };
    load_state_dict(&mut m, &safe_load(golden("mlp.safetensors")).unwrap(), true).unwrap();
    let xs: Vec<f32> = want["mlp"]["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let x = Tensor::from_slice(&xs, &[2, 4]);
    let y = m.l2.forward(&m.l1.forward(&x).relu()).to_f64_vec();
    for (g, w) in y.iter().zip(want["mlp"]["y"].as_array().unwrap()) {
        let w = w.as_f64().unwrap();
        assert!((g - w).abs() < 1e-5 + 1e-4 * w.abs(), "{y:?}");
    }
}

/// Deterministic bytes, valid for the dtype (bools 0/1).
fn bytes_for(dt: DType, n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n * dt.itemsize())
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if dt == DType::BOOL {
                (s & 1) as u8
            } else {
                s as u8
            }
        })
        .collect()
}

#[test]
fn save_load_round_trips_every_dtype_bit_exactly() {
    let mut sd = BTreeMap::new();
    let mut raw = BTreeMap::new();
    for (i, dt) in DType::ALL.iter().enumerate() {
        let shape = [[3usize, 5].as_slice(), &[7], &[2, 1, 3], &[]][i % 4];
        let n = shape.iter().product();
        let b = bytes_for(*dt, n, i as u64 + 1);
        sd.insert(format!("t.{dt}"), Tensor::from_bytes(&b, *dt, shape, "CPU"));
        raw.insert(format!("t.{dt}"), (b, shape.to_vec(), *dt));
    }
    // a lazy tensor is realized on save
    sd.insert("lazy".into(), Tensor::arange(0, 6, 1).reshape(&[2, 3]) * 2);
    raw.insert(
        "lazy".into(),
        (
            [0i32, 2, 4, 6, 8, 10]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            vec![2, 3],
            DType::INT32,
        ),
    );
    let path = tmp("all_dtypes.safetensors");
    let mut meta = HashMap::new();
    meta.insert("k".to_string(), "v".to_string());
    safe_save_with_metadata(&sd, Some(&meta), &path).unwrap();
    for device in ["CPU", "REF"] {
        let back = safe_load_on(&path, device).unwrap();
        assert_eq!(back.len(), raw.len());
        for (k, (b, shape, dt)) in &raw {
            let t = &back[k];
            assert_eq!((t.dtype(), t.shape()), (*dt, shape.clone()), "{k}");
            assert_eq!(&t.try_to_bytes().unwrap(), b, "{k} on {device}");
        }
    }
    assert_eq!(safe_load_metadata(&path).unwrap().unwrap()["k"], "v");
    // in memory: the same bytes as the file
    let bytes = safe_save_bytes(&sd, Some(&meta)).unwrap();
    assert_eq!(bytes, std::fs::read(&path).unwrap());
    let back = safe_load_bytes(&bytes, "CPU").unwrap();
    assert_eq!(back["lazy"].to_vec::<i32>(), vec![0, 2, 4, 6, 8, 10]);
    // overwrite in place
    safe_save(
        &BTreeMap::from([("x".to_string(), Tensor::from_vec(vec![1u8]))]),
        &path,
    )
    .unwrap();
    assert_eq!(safe_load(&path).unwrap().len(), 1);
}

#[test]
fn model_save_and_load() {
    let a = Mlp {
        l1: Linear::new(4, 5),
        l2: Linear::new(5, 3),
    };
    let path = tmp("model.safetensors");
    safe_save(&get_state_dict(&a), &path).unwrap();
    let mut b = Mlp {
        l1: Linear::new(4, 5),
        l2: Linear::new(5, 3),
    };
    load_state_dict(&mut b, &safe_load(&path).unwrap(), true).unwrap();
    let x = Tensor::ones(&[1, 4], DType::FLOAT32);
    assert_eq!(
        a.l2.forward(&a.l1.forward(&x)).to_vec::<f32>(),
        b.l2.forward(&b.l1.forward(&x)).to_vec::<f32>()
    );
}

// ---- bad files ----

fn header_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend(header.as_bytes());
    v.extend(data);
    v
}

fn load_err(bytes: &[u8], name: &str) -> String {
    let path = tmp(name);
    std::fs::write(&path, bytes).unwrap();
    let e = safe_load(&path).expect_err("a bad file must not load");
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "error must name the file: {msg}"
    );
    msg
}

#[test]
fn truncated_files_are_errors() {
    let good = std::fs::read(golden("dtypes.safetensors")).unwrap();
    for cut in [0, 1, 7, 8, 9, 100, good.len() / 2, good.len() - 1] {
        let msg = load_err(&good[..cut], &format!("cut{cut}.safetensors"));
        assert!(!msg.is_empty());
    }
    assert!(load_err(&good[..0], "empty.safetensors").contains("truncated: 0 bytes"));
    let msg = load_err(&good[..good.len() - 1], "short.safetensors");
    assert!(msg.contains("don't cover"), "{msg}");
}

#[test]
fn bad_header_length() {
    let mut v = u64::MAX.to_le_bytes().to_vec();
    v.extend(b"{}");
    let msg = load_err(&v, "huge.safetensors");
    assert!(
        msg.contains("bad header length 18446744073709551615"),
        "{msg}"
    );
    let mut v = 1000u64.to_le_bytes().to_vec();
    v.extend(b"{}");
    assert!(load_err(&v, "long.safetensors").contains("bad header length 1000"));
}

#[test]
fn corrupted_headers() {
    let msg = load_err(&header_file("{not json", &[]), "json.safetensors");
    assert!(msg.contains("JSON"), "{msg}");
    let msg = load_err(
        &header_file(
            r#"{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,4]}}"#,
            &[0; 4],
        ),
        "dtype.safetensors",
    );
    assert!(msg.contains("F7"), "{msg}");
    let msg = load_err(
        &header_file(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}}"#,
            &[0; 8],
        ),
        "past_end.safetensors",
    );
    assert!(msg.contains('a'), "{msg}");
    let msg = load_err(
        &header_file(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
            &[0; 12],
        ),
        "overlap.safetensors",
    );
    assert!(msg.contains("invalid data offsets"), "{msg}");
    let msg = load_err(
        &header_file(
            r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ),
        "shape.safetensors",
    );
    assert!(msg.contains("shape"), "{msg}");
    let msg = load_err(
        &header_file(
            r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ),
        "overflow.safetensors",
    );
    assert!(!msg.is_empty());
    let msg = load_err(
        &header_file(
            r#"{"c":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ),
        "c64.safetensors",
    );
    assert!(
        msg.contains("tensor `c`: dtype C64 is not supported"),
        "{msg}"
    );
}

#[test]
fn hostile_bytes_never_panic() {
    // random mutations of a valid file: every outcome is Ok or Err, and loaded tensors read fine
    let good = std::fs::read(golden("dtypes.safetensors")).unwrap();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..300 {
        let mut v = good.clone();
        for _ in 0..3 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let i = (s as usize) % v.len();
            v[i] = (s >> 32) as u8;
        }
        if let Ok(ts) = safe_load_bytes(&v, "CPU") {
            for t in ts.values() {
                let _ = t.try_to_bytes().unwrap();
            }
        }
    }
}

#[test]
fn missing_file_and_bad_device() {
    let e = safe_load("/nonexistent/dir/model.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/dir/model.safetensors: cannot open"),
        "{e}"
    );
    let e = safe_load_on(golden("mlp.safetensors"), "NOPE")
        .unwrap_err()
        .to_string();
    assert!(e.contains("NOPE"), "{e}");
}
