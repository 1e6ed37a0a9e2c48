//! GGUF and PyTorch checkpoint loaders (`crates/tensor/src/nn/gguf.rs`, `nn/torch.rs`): fixtures
//! written by the reference Python packages (`tests/golden/gen_formats.py`: `gguf`'s writer and
//! `gguf.quants.dequantize`, `torch.save`) load bit-exactly; the metadata reads back with its
//! types; truncated, corrupted and hostile files are `Err`s naming the file (and tensor), never
//! panics.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use tinygrad_tensor::Tensor;
use tinygrad_tensor::nn::gguf::{GgufValue, gguf_load, gguf_load_bytes, gguf_load_on};
use tinygrad_tensor::nn::state::safe_load_on;
use tinygrad_tensor::nn::torch::{torch_load, torch_load_bytes, torch_load_on};

fn golden(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/formats"
    ))
    .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(golden(name)).unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-nn-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Same names, dtypes, shapes and bytes.
fn assert_same(got: &BTreeMap<String, Tensor>, want: &BTreeMap<String, Tensor>, what: &str) {
    let (gk, wk): (Vec<&String>, Vec<&String>) = (got.keys().collect(), want.keys().collect());
    assert_eq!(gk, wk, "{what}: names");
    for (k, w) in want {
        let g = &got[k];
        assert_eq!(g.dtype(), w.dtype(), "{what}: `{k}` dtype");
        assert_eq!(g.shape(), w.shape(), "{what}: `{k}` shape");
        assert_eq!(
            g.try_to_bytes().unwrap(),
            w.try_to_bytes().unwrap(),
            "{what}: `{k}` bytes"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// GGUF

/// `v` against the generator's `{"type": ..., "value": ...}`.
fn check_value(v: &GgufValue, j: &Value, key: &str) {
    let ty = j["type"].as_str().unwrap();
    let val = &j["value"];
    match (ty, v) {
        ("UINT8", GgufValue::U8(x)) => assert_eq!(Some(u64::from(*x)), val.as_u64(), "{key}"),
        ("INT8", GgufValue::I8(x)) => assert_eq!(Some(i64::from(*x)), val.as_i64(), "{key}"),
        ("UINT16", GgufValue::U16(x)) => assert_eq!(Some(u64::from(*x)), val.as_u64(), "{key}"),
        ("INT16", GgufValue::I16(x)) => assert_eq!(Some(i64::from(*x)), val.as_i64(), "{key}"),
        ("UINT32", GgufValue::U32(x)) => assert_eq!(Some(u64::from(*x)), val.as_u64(), "{key}"),
        ("INT32", GgufValue::I32(x)) => assert_eq!(Some(i64::from(*x)), val.as_i64(), "{key}"),
        ("UINT64", GgufValue::U64(x)) => assert_eq!(Some(*x), val.as_u64(), "{key}"),
        ("INT64", GgufValue::I64(x)) => assert_eq!(Some(*x), val.as_i64(), "{key}"),
        ("FLOAT32", GgufValue::F32(x)) => assert_eq!(Some(f64::from(*x)), val.as_f64(), "{key}"),
        ("FLOAT64", GgufValue::F64(x)) => assert_eq!(Some(*x), val.as_f64(), "{key}"),
        ("BOOL", GgufValue::Bool(x)) => assert_eq!(Some(*x), val.as_bool(), "{key}"),
        ("STRING", GgufValue::String(x)) => assert_eq!(Some(x.as_str()), val.as_str(), "{key}"),
        ("ARRAY", GgufValue::Array(items)) => {
            let want = val.as_array().unwrap();
            assert_eq!(items.len(), want.len(), "{key}: array length");
            let item_type = j["item_type"].as_str().unwrap();
            for (x, w) in items.iter().zip(want) {
                if item_type == "ARRAY" {
                    check_value(x, w, key);
                } else {
                    check_value(x, &serde_json::json!({"type": item_type, "value": w}), key);
                }
            }
        }
        _ => panic!("{key}: {v:?} is not a {ty}"),
    }
}

#[test]
fn gguf_fixture_loads_bit_exactly() {
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(golden("quants_meta.json")).unwrap())
            .unwrap();
    for device in ["CPU", "REF"] {
        let g = gguf_load_on(golden("quants.gguf"), device).unwrap();
        let want = safe_load_on(golden("quants_ref.safetensors"), device).unwrap();
        assert_same(&g.tensors, &want, &format!("quants.gguf on {device}"));
        assert!(g.tensors.values().all(|t| t.device() == device));
        // file order
        assert_eq!(
            g.tensor_order,
            [
                "f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "q4_0", "q4_1", "q5_0",
                "q5_1", "q8_0", "q4_k", "q6_k"
            ]
        );
        let keys: Vec<&str> = g.metadata.keys().map(String::as_str).collect();
        assert_eq!(
            keys[..3],
            ["general.architecture", "general.alignment", "test.u8"]
        );
        let m = meta.as_object().unwrap();
        assert_eq!(g.metadata.len(), m.len());
        for (k, j) in m {
            check_value(&g.metadata[k], j, k);
        }
    }
}

#[test]
fn gguf_version_2_loads_and_version_1_is_refused() {
    let mut b = read("quants.gguf");
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let g = gguf_load_bytes(&b, "CPU").unwrap();
    let v3 = gguf_load(golden("quants.gguf")).unwrap();
    assert_eq!(
        g.tensors["q6_k"].to_vec::<f32>(),
        v3.tensors["q6_k"].to_vec::<f32>()
    );
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    let e = gguf_load_bytes(&b, "CPU").unwrap_err();
    assert!(e.message.contains("version 1"), "{e}");
}

/// A minimal GGUF v3 file: `kv` raw metadata pairs, then `tensors` (name, ne, type, offset),
/// padded to `align`, then `data`.
fn gguf_bytes(
    kv: &[(&str, u32, Vec<u8>)],
    tensors: &[(&str, &[u64], u32, u64)],
    data: &[u8],
) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kv.len() as u64).to_le_bytes());
    for (k, ty, v) in kv {
        b.extend((k.len() as u64).to_le_bytes());
        b.extend(k.as_bytes());
        b.extend(ty.to_le_bytes());
        b.extend(v);
    }
    for (name, ne, ty, off) in tensors {
        b.extend((name.len() as u64).to_le_bytes());
        b.extend(name.as_bytes());
        b.extend((ne.len() as u32).to_le_bytes());
        for d in *ne {
            b.extend(d.to_le_bytes());
        }
        b.extend(ty.to_le_bytes());
        b.extend(off.to_le_bytes());
    }
    b.resize(b.len().next_multiple_of(32), 0);
    b.extend(data);
    b
}

#[test]
fn gguf_hand_built_files() {
    // default alignment 32, an empty array, a 0-d tensor and an empty tensor
    let mut empty_arr = 0u32.to_le_bytes().to_vec();
    empty_arr.extend(0u64.to_le_bytes());
    let data: Vec<u8> = [7.5f32].iter().flat_map(|x| x.to_le_bytes()).collect();
    let b = gguf_bytes(
        &[("e", 9, empty_arr)],
        &[("s", &[], 0, 0), ("z", &[0, 3], 2, 4)],
        &data,
    );
    let g = gguf_load_bytes(&b, "CPU").unwrap();
    assert_eq!(g.metadata["e"], GgufValue::Array(vec![]));
    assert_eq!(g.tensors["s"].shape(), Vec::<usize>::new());
    assert_eq!(g.tensors["s"].to_vec::<f32>(), vec![7.5]);
    assert_eq!(g.tensors["z"].shape(), vec![3, 0]);
    // a file is read the same from disk
    let p = tmp("hand.gguf");
    std::fs::write(&p, &b).unwrap();
    assert_eq!(
        gguf_load(&p).unwrap().tensors["s"].to_vec::<f32>(),
        vec![7.5]
    );
}

#[test]
fn gguf_errors_name_the_file_and_tensor() {
    let f32_data = vec![0u8; 64];
    let cases: Vec<(Vec<u8>, Option<&str>, &str)> = vec![
        (b"GGUX".to_vec(), None, "not a GGUF file"),
        (
            gguf_bytes(&[], &[("w", &[4], 99, 0)], &f32_data),
            Some("w"),
            "ggml type 99",
        ),
        (
            gguf_bytes(&[], &[("w", &[4], 10, 0)], &f32_data),
            Some("w"),
            "Q2_K",
        ),
        (
            gguf_bytes(&[], &[("w", &[17], 0, 0)], &f32_data),
            Some("w"),
            "truncated",
        ),
        (
            gguf_bytes(&[], &[("w", &[4], 0, u64::MAX)], &f32_data),
            Some("w"),
            "past",
        ),
        (
            gguf_bytes(&[], &[("w", &[16], 2, 0)], &f32_data),
            Some("w"),
            "blocks",
        ),
        (
            gguf_bytes(&[], &[("w", &[u64::MAX, u64::MAX], 0, 0)], &f32_data),
            Some("w"),
            "too large",
        ),
        (
            gguf_bytes(&[], &[("w", &[4], 0, 0), ("w", &[4], 0, 0)], &f32_data),
            Some("w"),
            "repeated",
        ),
        (
            gguf_bytes(
                &[("k", 4, vec![1, 0, 0, 0]), ("k", 4, vec![1, 0, 0, 0])],
                &[],
                &[],
            ),
            None,
            "repeated",
        ),
        (
            gguf_bytes(&[("k", 13, vec![0])], &[], &[]),
            None,
            "unknown type 13",
        ),
        (
            gguf_bytes(&[("general.alignment", 4, vec![0, 0, 0, 0])], &[], &[]),
            None,
            "alignment",
        ),
        (
            gguf_bytes(&[("k", 8, vec![0xff, 0xfe, 0, 0, 0, 0, 0, 0])], &[], &[]),
            None,
            "more than",
        ),
    ];
    for (b, tensor, msg) in cases {
        let e = gguf_load_bytes(&b, "CPU").unwrap_err();
        assert_eq!(e.path, "<bytes>");
        assert_eq!(e.tensor.as_deref(), tensor, "{e}");
        assert!(e.message.contains(msg), "{e} (wanted {msg:?})");
        assert!(e.to_string().starts_with("gguf <bytes>: "), "{e}");
    }
    let e = gguf_load(tmp("missing.gguf")).unwrap_err();
    assert!(e.message.contains("cannot open"), "{e}");
    assert!(gguf_load_bytes(&gguf_bytes(&[], &[], &[]), "NOPE").is_err());
}

#[test]
fn gguf_hostile_counts_are_errs_before_allocating() {
    // 2^60 tensors, 2^60 metadata pairs, a 1 TB string, a 2^60-item array, 2^31 dims
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((1u64 << 60).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    assert!(
        gguf_load_bytes(&b, "CPU")
            .unwrap_err()
            .message
            .contains("tensor count")
    );
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((1u64 << 60).to_le_bytes());
    assert!(
        gguf_load_bytes(&b, "CPU")
            .unwrap_err()
            .message
            .contains("metadata count")
    );
    let tb = gguf_bytes(&[("k", 8, (1u64 << 40).to_le_bytes().to_vec())], &[], &[]);
    assert!(
        gguf_load_bytes(&tb, "CPU")
            .unwrap_err()
            .message
            .contains("more than")
    );
    let mut arr = 0u32.to_le_bytes().to_vec();
    arr.extend((1u64 << 60).to_le_bytes());
    let e = gguf_load_bytes(&gguf_bytes(&[("k", 9, arr)], &[], &[]), "CPU").unwrap_err();
    assert!(e.message.contains("array length"), "{e}");
    // arrays nested without end
    let mut deep = Vec::new();
    for _ in 0..10_000 {
        deep.extend(9u32.to_le_bytes());
        deep.extend(1u64.to_le_bytes());
    }
    let e = gguf_load_bytes(&gguf_bytes(&[("k", 9, deep)], &[], &[]), "CPU").unwrap_err();
    assert!(e.message.contains("nested"), "{e}");
    let mut b = gguf_bytes(&[], &[("w", &[4], 0, 0)], &[0; 16]);
    let at = 24 + 8 + 1; // the dimension count
    b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = gguf_load_bytes(&b, "CPU").unwrap_err();
    assert_eq!(e.tensor.as_deref(), Some("w"), "{e}");
}

#[test]
fn gguf_truncations_and_flips_never_panic() {
    let b = read("quants.gguf");
    let full = gguf_load_bytes(&b, "CPU").unwrap();
    assert_eq!(full.tensors.len(), 15);
    // the last tensor (q6_k, 1260 bytes at byte 3328) ends at 4588; the writer pads the file to
    // the alignment after it
    let end = 3328 + 1260;
    assert!(gguf_load_bytes(&b[..end], "CPU").is_ok());
    for n in (0..end).step_by(7).chain([end - 1]) {
        let e = gguf_load_bytes(&b[..n], "CPU").unwrap_err();
        assert_eq!(e.path, "<bytes>");
        assert!(!e.message.is_empty());
    }
    // flipped bytes anywhere: an Err or tensors that read back
    let mut x = 0x9E37_79B9u32;
    for i in 0..400 {
        let mut c = b.clone();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let at = if i < 200 {
            (x as usize) % 1408 // the header
        } else {
            (x as usize) % c.len()
        };
        c[at] ^= 1 << (x % 8);
        if let Ok(g) = gguf_load_bytes(&c, "CPU") {
            for t in g.tensors.values() {
                let bytes = t.try_to_bytes().unwrap();
                assert_eq!(bytes.len(), t.nbytes());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// PyTorch

#[test]
fn torch_fixture_loads_bit_exactly() {
    for device in ["CPU", "REF"] {
        let got = torch_load_on(golden("torch_sd.pt"), device).unwrap();
        let want = safe_load_on(golden("torch_ref.safetensors"), device).unwrap();
        assert_same(&got, &want, &format!("torch_sd.pt on {device}"));
    }
    let sd = torch_load(golden("torch_sd.pt")).unwrap();
    assert_eq!(sd["scalar"].shape(), Vec::<usize>::new());
    assert_eq!(sd["expanded"].shape(), vec![3, 4]);
    assert_eq!(sd["permuted"].shape(), vec![4, 2, 3]);
    let b = read("torch_sd.pt");
    assert_same(
        &torch_load_bytes(&b, "CPU").unwrap(),
        &sd,
        "torch_load_bytes",
    );
}

/// crc-32 (IEEE), bit by bit.
fn crc(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A zip archive of stored entries.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let (mut out, mut cd) = (Vec::new(), Vec::new());
    for (name, data) in entries {
        let off = out.len() as u32;
        let mut common = Vec::new();
        common.extend(20u16.to_le_bytes()); // version needed
        common.extend(0u16.to_le_bytes()); // flags
        common.extend(0u16.to_le_bytes()); // stored
        common.extend(0u32.to_le_bytes()); // time, date
        common.extend(crc(data).to_le_bytes());
        common.extend((data.len() as u32).to_le_bytes());
        common.extend((data.len() as u32).to_le_bytes());
        common.extend((name.len() as u16).to_le_bytes());
        common.extend(0u16.to_le_bytes()); // extra
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend(&common);
        out.extend(name.as_bytes());
        out.extend(*data);
        cd.extend(0x0201_4b50u32.to_le_bytes());
        cd.extend(20u16.to_le_bytes()); // version made by
        cd.extend(&common);
        cd.extend([0u8; 6]); // comment length, disk, internal attributes
        cd.extend(0u32.to_le_bytes()); // external attributes
        cd.extend(off.to_le_bytes());
        cd.extend(name.as_bytes());
    }
    let cd_off = out.len() as u32;
    out.extend(&cd);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((cd.len() as u32).to_le_bytes());
    out.extend(cd_off.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// A BINUNICODE string.
fn s(x: &str) -> Vec<u8> {
    let mut b = vec![b'X'];
    b.extend((x.len() as u32).to_le_bytes());
    b.extend(x.as_bytes());
    b
}

/// `{name: _rebuild_tensor_v2(storage('0', FloatStorage, numel), offset, size, stride)}`.
fn tensor_pickle(name: &str, numel: u8, offset: u8, size: &[u8], stride: &[u8]) -> Vec<u8> {
    let mut p = vec![0x80, 2, b'}', b'('];
    p.extend(s(name));
    p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n(");
    p.push(b'(');
    p.extend(s("storage"));
    p.extend(b"ctorch\nFloatStorage\n");
    p.extend(s("0"));
    p.extend(s("cpu"));
    p.extend([b'K', numel, b't', b'Q', b'K', offset, b'(']);
    for &d in size {
        p.extend([b'K', d]);
    }
    p.extend([b't', b'(']);
    for &d in stride {
        p.extend([b'K', d]);
    }
    p.extend([b't', 0x89, b'N', b't', b'R', b'u', b'.']);
    p
}

fn checkpoint(pkl: &[u8], storage: &[u8]) -> Vec<u8> {
    zip_of(&[("archive/data.pkl", pkl), ("archive/data/0", storage)])
}

/// A view's size, stride, storage offset and values.
type ViewCase = (&'static [u8], &'static [u8], u8, Vec<f32>);

#[test]
fn torch_hand_built_views() {
    let data: Vec<u8> = (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect();
    // overlapping windows, a stride-0 axis, size-1 axes with odd strides, a permutation
    let cases: &[ViewCase] = &[
        (
            &[3, 4],
            &[2, 1],
            1,
            vec![1., 2., 3., 4., 3., 4., 5., 6., 5., 6., 7., 8.],
        ),
        (&[2, 3], &[0, 3], 0, vec![0., 3., 6., 0., 3., 6.]),
        (&[1, 3, 1], &[9, 2, 7], 2, vec![2., 4., 6.]),
        (
            &[2, 2, 3],
            &[1, 6, 2],
            0,
            vec![0., 2., 4., 6., 8., 10., 1., 3., 5., 7., 9., 11.],
        ),
        (&[4], &[3], 0, vec![0., 3., 6., 9.]),
        (&[2, 2], &[1, 1], 10, vec![]),
    ];
    for (size, stride, offset, want) in &cases[..5] {
        let b = checkpoint(&tensor_pickle("t", 12, *offset, size, stride), &data);
        let sd = torch_load_bytes(&b, "CPU").unwrap();
        let t = &sd["t"];
        assert_eq!(
            t.shape(),
            size.iter().map(|&d| d as usize).collect::<Vec<_>>()
        );
        assert_eq!(&t.to_vec::<f32>(), want, "size {size:?} stride {stride:?}");
    }
    // the last case reads element 12 of 12: past the storage
    let (size, stride, offset, _) = &cases[5];
    let b = checkpoint(&tensor_pickle("t", 12, *offset, size, stride), &data);
    let e = torch_load_bytes(&b, "CPU").unwrap_err();
    assert_eq!(e.tensor.as_deref(), Some("t"), "{e}");
    assert!(e.message.contains("past its storage"), "{e}");
}

#[test]
fn torch_errors_name_the_file_and_tensor() {
    let data = vec![0u8; 48];
    let ok = tensor_pickle("w", 12, 0, &[12], &[1]);
    let swap = |from: &[u8], to: &[u8]| {
        let pos = ok.windows(from.len()).position(|w| w == from).unwrap();
        let mut p = ok[..pos].to_vec();
        p.extend(to);
        p.extend(&ok[pos + from.len()..]);
        p
    };
    let cases: Vec<(Vec<u8>, Option<&str>, &str)> = vec![
        (
            b"not a zip at all, just some bytes".to_vec(),
            None,
            "not a zip",
        ),
        (vec![0x80, 2, b'K', 1, b'.'], None, "legacy"),
        (checkpoint(&ok, &data[..40]), Some("w"), "needs more than"),
        (
            checkpoint(&tensor_pickle("w", 12, 1, &[12], &[1]), &data),
            Some("w"),
            "past its storage",
        ),
        (
            checkpoint(&swap(b"FloatStorage", b"QInt8Storage"), &data),
            None,
            "not supported",
        ),
        (
            checkpoint(&swap(b"_rebuild_tensor_v2", b"_rebuild_qtensor"), &data),
            None,
            "_rebuild_qtensor",
        ),
        (
            checkpoint(&swap(b"\x89N", b"\x89\xff"), &data),
            None,
            "opcode",
        ),
        (
            checkpoint(&ok[..ok.len() - 1], &data),
            None,
            "without a STOP",
        ),
        (zip_of(&[("archive/data/0", &data)]), None, "data.pkl"),
        (zip_of(&[("archive/data.pkl", &ok)]), Some("w"), "missing"),
        (
            zip_of(&[
                ("archive/data.pkl", &ok),
                ("archive/data/0", &data),
                ("archive/byteorder", b"big"),
            ]),
            None,
            "byte order",
        ),
    ];
    for (b, tensor, msg) in cases {
        let e = torch_load_bytes(&b, "CPU").unwrap_err();
        assert_eq!(e.path, "<bytes>");
        assert_eq!(e.tensor.as_deref(), tensor, "{e}");
        assert!(e.message.contains(msg), "{e} (wanted {msg:?})");
        assert!(e.to_string().starts_with("torch <bytes>: "), "{e}");
    }
    assert_eq!(
        torch_load_bytes(&checkpoint(&ok, &data), "CPU").unwrap()["w"].shape(),
        vec![12]
    );
    let e = torch_load(tmp("missing.pt")).unwrap_err();
    assert!(e.message.contains("cannot open"), "{e}");
    let e = torch_load(std::env::temp_dir()).unwrap_err();
    assert!(e.message.contains("regular file"), "{e}");
    assert!(torch_load_bytes(&checkpoint(&ok, &data), "NOPE").is_err());
}

#[test]
fn torch_hostile_pickles_are_errs_without_overflow() {
    let data = vec![0u8; 4];
    let hostile: Vec<Vec<u8>> = vec![
        // a million nested lists (drop and walk must not recurse)
        [
            vec![0x80, 2],
            vec![b']'; 1_000_000],
            vec![b'a'; 999_999],
            vec![b'.'],
        ]
        .concat(),
        // a million nested tuples via MARK
        [
            vec![0x80, 2],
            vec![b'('; 500_000],
            vec![b't'; 500_000],
            vec![b'.'],
        ]
        .concat(),
        // huge lengths
        [
            vec![0x80, 2, b'X'],
            u32::MAX.to_le_bytes().to_vec(),
            vec![b'.'],
        ]
        .concat(),
        [
            vec![0x80, 4, 0x8d],
            u64::MAX.to_le_bytes().to_vec(),
            vec![b'.'],
        ]
        .concat(),
        [vec![0x80, 2, 0x8b], u32::MAX.to_le_bytes().to_vec()].concat(),
        // memo reads of entries never stored, pops of an empty stack
        vec![0x80, 2, b'j', 0xff, 0xff, 0xff, 0xff, b'.'],
        vec![0x80, 2, b's', b'.'],
        vec![0x80, 2, b'(', b'0', b'.'],
        // a list holding itself: skipped
        vec![0x80, 2, b']', b'q', 0, b'h', 0, b'a', b'.'],
        // doubling shared dicts: 2^40 paths
        {
            let mut p = vec![0x80, 2, b'}', b'q', 0];
            for i in 0..40u8 {
                p.extend([b'}', b'(']);
                p.extend(s("a"));
                p.extend([b'h', i]);
                p.extend(s("b"));
                p.extend([b'h', i, b'u', b'q', i + 1]);
            }
            p.push(b'.');
            p
        },
    ];
    for p in hostile {
        let b = checkpoint(&p, &data);
        if let Ok(sd) = torch_load_bytes(&b, "CPU") {
            assert!(sd.is_empty());
        }
    }
}

#[test]
fn torch_truncations_and_flips_never_panic() {
    let b = read("torch_sd.pt");
    for n in (0..b.len()).step_by(5) {
        let e = torch_load_bytes(&b[..n], "CPU").unwrap_err();
        assert_eq!(e.path, "<bytes>");
    }
    let mut x = 0x1234_5678u32;
    for _ in 0..400 {
        let mut c = b.clone();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let at = (x as usize) % c.len();
        c[at] ^= 1 << (x % 8);
        if let Ok(sd) = torch_load_bytes(&c, "CPU") {
            for t in sd.values() {
                assert_eq!(t.try_to_bytes().unwrap().len(), t.nbytes());
            }
        }
    }
}
