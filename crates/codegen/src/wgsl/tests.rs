//! Unit tests of the WGSL renderer.

use tinygrad_dtype::ConstValue;

use super::alu::int_lit;
use super::*;

#[test]
fn storage_is_padded_to_words() {
    assert_eq!(storage_bytes(DType::FLOAT32, 3), 12);
    assert_eq!(storage_bytes(DType::BOOL, 5), 8);
    assert_eq!(storage_bytes(DType::FLOAT16, 0), 4);
    assert_eq!(storage_bytes(DType::INT64, 1), 8);
}

#[test]
fn int_literals() {
    assert_eq!(int_lit(5, "i", i64::from(i32::MIN)), "5i");
    assert_eq!(int_lit(-5, "i", i64::from(i32::MIN)), "(-5i)");
    assert_eq!(
        int_lit(i64::from(i32::MIN), "i", i64::from(i32::MIN)),
        "bitcast<i32>(0x80000000u)"
    );
}

#[test]
fn refuses_64_bit_without_features() {
    let r = WgslRenderer::new(false, false);
    assert!(r.refuses(DType::INT64).unwrap().contains("SHADER_INT64"));
    assert!(r.refuses(DType::FLOAT64).unwrap().contains("SHADER_F64"));
    assert!(r.refuses(DType::FLOAT32).is_none());
    let r = WgslRenderer::new(true, true);
    assert!(r.refuses(DType::INT64).is_none() && r.refuses(DType::FLOAT64).is_none());
}

/// Parses and validates `src` with naga (64-bit integers and floats allowed).
fn validate(src: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
    let caps = naga::valid::Capabilities::SHADER_INT64 | naga::valid::Capabilities::FLOAT64;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| e.emit_to_string(src))?;
    Ok(())
}

#[test]
fn helpers_and_special_literals_validate() {
    let mut src = String::new();
    for h in [
        "isnan_f32",
        "isnan_f64",
        "ftoi_lo_f32",
        "ftoi_lo_f64",
        "ftoi64_f32",
        "ftoi64_f64",
        "ftou64_f32",
        "ftou64_f64",
        "f16_to_f32",
        "f32_to_f16",
        "f32_to_bf16",
    ] {
        assert!(!helper_source(h).is_empty(), "{h}");
        src.push_str(helper_source(h));
    }
    let r = WgslRenderer::new(true, true);
    let cx = Ctx {
        r,
        body: String::new(),
        depth: 0,
        names: HashMap::new(),
        accs: HashMap::new(),
        loops: Vec::new(),
        next: 0,
        plan: GridPlan {
            ranges: Vec::new(),
            total: 1,
        },
        group: None,
        shared: Vec::new(),
        grid_at: HashSet::new(),
        helpers: BTreeSet::new(),
        atomic: HashSet::new(),
        globals: HashMap::new(),
        vars: Vec::new(),
    };
    let lit = |v: ConstValue, dt: DType| cx.literal(v, dt).unwrap();
    let cases = [
        ("f32", lit(ConstValue::Float(f64::INFINITY), DType::FLOAT32)),
        ("f32", lit(ConstValue::Float(f64::NAN), DType::FLOAT32)),
        ("f32", lit(ConstValue::Float(-0.0), DType::FLOAT32)),
        ("f32", lit(ConstValue::Float(1e-45), DType::FLOAT32)),
        ("f32", lit(ConstValue::Float(-3.5), DType::FLOAT32)),
        ("f32", lit(ConstValue::Float(3.4028235e38), DType::FLOAT32)),
        (
            "f64",
            lit(ConstValue::Float(f64::NEG_INFINITY), DType::FLOAT64),
        ),
        ("f64", lit(ConstValue::Float(0.1), DType::FLOAT64)),
        (
            "i32",
            lit(ConstValue::Int(i64::from(i32::MIN)), DType::INT32),
        ),
        ("i32", lit(ConstValue::Int(-7), DType::INT8)),
        ("i64", lit(ConstValue::Int(i64::MIN), DType::INT64)),
        ("u64", lit(ConstValue::UInt(u64::MAX), DType::UINT64)),
        ("u32", lit(ConstValue::Float(f64::INFINITY), DType::FLOAT16)),
        ("bool", lit(ConstValue::Int(1), DType::BOOL)),
    ];
    src.push_str("@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n");
    src.push_str("@compute @workgroup_size(1)\nfn main() {\n");
    for (i, (ty, e)) in cases.iter().enumerate() {
        src.push_str(
            &format!("  let c{i}: {ty} = {e};\n  let d{i}: {ty} = c{i} - c{i};\n").replace(
                &format!("let d{i}: bool = c{i} - c{i};"),
                &format!("let d{i}: bool = !c{i};"),
            ),
        );
    }
    src.push_str("  out[0] = f32_to_f16(f16_to_f32(1u)) + ftoi_lo_f32(-3e9f, false) + u32(ftoi64_f64(2.5lf)) + u32(ftou64_f32(1e19f)) + f32_to_bf16(1.0f) + ftoi_lo_f64(1.0lf, true) + u32(ftoi64_f32(1.0f)) + u32(ftou64_f64(1.0lf));\n}\n");
    validate(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
}
