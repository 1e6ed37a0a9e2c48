//! `keccak` and `hash` against Python's hashlib (`tests/golden/keccak_cases.json`, from
//! `gen_keccak.py`) on every device, byte for byte.

mod common;

use serde_json::Value;
use tinygrad_tensor::{DType, Tensor};

fn input(spec: &Value, device: &str) -> Tensor {
    let shape = common::usizes(&spec["shape"]);
    let data = spec["data"].as_array().expect("data");
    match spec["dtype"].as_str().expect("dtype") {
        "uint8" => {
            let v: Vec<u8> = data.iter().map(|x| common::int(x) as u8).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "int32" => {
            let v: Vec<i32> = data.iter().map(|x| common::int(x) as i32).collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        "float32" => {
            let v: Vec<f32> = data
                .iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect();
            Tensor::from_slice_on(&v, &shape, device)
        }
        other => panic!("unknown dtype {other}"),
    }
}

fn run_case(case: &Value, device: &str) -> Result<(), String> {
    let x = input(&case["input"], device);
    let got = match case["op"].as_str().expect("op") {
        "keccak" => x.keccak(case["cfg"].as_str().expect("cfg")),
        "hash" => x.hash(),
        other => return Err(format!("unknown op {other}")),
    };
    let want = &case["out"];
    let shape = common::usizes(&want["shape"]);
    if got.shape() != shape || got.dtype() != DType::UINT8 {
        return Err(format!(
            "got {:?} {}, expected {shape:?} uint8",
            got.shape(),
            got.dtype()
        ));
    }
    let want: Vec<u8> = want["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|x| common::int(x) as u8)
        .collect();
    let got = got.to_vec::<u8>();
    if got != want {
        return Err(format!("digest {got:02x?}, expected {want:02x?}"));
    }
    Ok(())
}

/// `skip_hash`: REF, the reference interpreter, leaves out the `hash` cases (a MiB of data
/// through 1,200 Keccak rounds takes it minutes); its `keccak` cases cover the same rounds.
fn run_suite(device: &str, skip_hash: bool) {
    let all = common::load_cases("keccak_cases.json");
    let cases: Vec<&Value> = all
        .iter()
        .filter(|c| !(skip_hash && c["op"] == "hash"))
        .collect();
    if cases.len() < all.len() {
        eprintln!(
            "{device}: {} hash cases left out (too slow on this device)",
            all.len() - cases.len()
        );
    }
    common::run_cases(device, "keccak", &cases, |case| run_case(case, device));
}

#[test]
fn keccak_golden_cpu() {
    run_suite("CPU", false);
}

#[test]
fn keccak_golden_ref() {
    run_suite("REF", true);
}

#[test]
fn keccak_golden_webgpu() {
    common::on_webgpu("keccak_golden_webgpu", |d| run_suite(d, false));
}

#[test]
#[should_panic(expected = "keccak: unknown cfg \"md5\" (tensor shape [3])")]
fn keccak_unknown_cfg() {
    let _ = Tensor::from_vec(vec![1u8, 2, 3]).keccak("md5");
}

#[test]
#[should_panic(expected = "keccak: rate 100 must be a multiple of 8 in 8..=192")]
fn keccak_bad_rate() {
    let _ = Tensor::from_vec(vec![1u8, 2, 3]).keccak_with(100, 6);
}
