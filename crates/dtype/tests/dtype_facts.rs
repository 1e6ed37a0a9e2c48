//! Per-dtype facts (priority, sizes, bounds, finfo, predicates) against tinygrad's `dtypes`
//! definitions, and dtype name parsing.

use tinygrad_dtype::dtype::DTYPE_NAMES;
use tinygrad_dtype::{AddrSpace, ConstValue, DType, ParseDTypeError};

struct Facts {
    dt: DType,
    name: &'static str,
    c_name: &'static str,
    priority: i8,
    bitsize: u32,
    itemsize: usize,
    finfo: Option<(u32, u32)>,
}

/// tinygrad's `DType.new(priority, bitsize, name, fmt)` for each dtype (fnuz fp8 omitted); `index`
/// is tinygrad's `weakint`, which tinygrad-rs gives 64 bits instead of tinygrad's symbolic 800.
const FACTS: &[Facts] = &[
    f(DType::BOOL, "bool", "bool", 0, 1, 1, None),
    f(DType::INT8, "int8", "signed char", 1, 8, 1, None),
    f(DType::UINT8, "uint8", "unsigned char", 2, 8, 1, None),
    f(DType::INT16, "int16", "short", 3, 16, 2, None),
    f(DType::UINT16, "uint16", "unsigned short", 4, 16, 2, None),
    f(DType::INT32, "int32", "int", 5, 32, 4, None),
    f(DType::UINT32, "uint32", "unsigned int", 6, 32, 4, None),
    f(DType::INT64, "int64", "long", 7, 64, 8, None),
    f(DType::UINT64, "uint64", "unsigned long", 8, 64, 8, None),
    f(
        DType::FP8E4M3,
        "fp8e4m3",
        "float8_e4m3",
        9,
        8,
        1,
        Some((4, 3)),
    ),
    f(
        DType::FP8E5M2,
        "fp8e5m2",
        "float8_e5m2",
        10,
        8,
        1,
        Some((5, 2)),
    ),
    f(DType::FLOAT16, "float16", "half", 11, 16, 2, Some((5, 10))),
    f(
        DType::BFLOAT16,
        "bfloat16",
        "__bf16",
        12,
        16,
        2,
        Some((8, 7)),
    ),
    f(DType::FLOAT32, "float32", "float", 13, 32, 4, Some((8, 23))),
    f(
        DType::FLOAT64,
        "float64",
        "double",
        14,
        64,
        8,
        Some((11, 52)),
    ),
];

const fn f(
    dt: DType,
    name: &'static str,
    c_name: &'static str,
    priority: i8,
    bitsize: u32,
    itemsize: usize,
    finfo: Option<(u32, u32)>,
) -> Facts {
    Facts {
        dt,
        name,
        c_name,
        priority,
        bitsize,
        itemsize,
        finfo,
    }
}

#[test]
fn facts_match_tinygrad() {
    assert_eq!(FACTS.len(), DType::ALL.len());
    for (fa, &dt) in FACTS.iter().zip(DType::ALL.iter()) {
        assert_eq!(fa.dt, dt, "DType::ALL order");
        assert_eq!(dt.name(), fa.name);
        assert_eq!(dt.c_name(), fa.c_name, "{dt}");
        assert_eq!(dt.priority(), fa.priority, "{dt}");
        assert_eq!(dt.bitsize(), fa.bitsize, "{dt}");
        assert_eq!(dt.itemsize(), fa.itemsize, "{dt}");
        assert_eq!(dt.finfo(), fa.finfo, "{dt}");
        assert_eq!(dt.is_float(), fa.finfo.is_some(), "{dt}");
        assert_eq!(dt.kind(), dt.scalar().kind());
        assert_eq!(
            (dt.count(), dt.is_ptr(), dt.scalar(), dt.base()),
            (1, false, dt, dt)
        );
    }
    assert_eq!(DType::INDEX.priority(), 0);
    assert_eq!(DType::INDEX.itemsize(), 8);
    assert_eq!(DType::VOID.priority(), -1);
    assert_eq!(DType::VOID.itemsize(), 0);
    assert_eq!(DType::INDEX.finfo(), None);
}

#[test]
fn all_is_sorted_by_tinygrad_order() {
    // tinygrad orders dtypes by (priority, bitsize, name); DType::ALL lists them in that order.
    for w in DType::ALL.windows(2) {
        assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
    }
    assert!(DType::VOID < DType::BOOL);
    assert!(DType::BOOL < DType::INDEX && DType::INDEX < DType::INT8);
}

#[test]
fn predicates() {
    use DType as D;
    let ints = [D::INT8, D::INT16, D::INT32, D::INT64, D::INDEX];
    let uints = [D::UINT8, D::UINT16, D::UINT32, D::UINT64];
    for d in ints {
        assert!(
            d.is_int() && !d.is_unsigned() && !d.is_float() && !d.is_bool(),
            "{d}"
        );
    }
    for d in uints {
        assert!(d.is_int() && d.is_unsigned() && !d.is_float(), "{d}");
    }
    assert!(D::BOOL.is_bool() && !D::BOOL.is_int() && !D::BOOL.is_float());
    assert!(D::FP8E4M3.is_fp8() && D::FP8E5M2.is_fp8() && !D::FLOAT16.is_fp8());
    // Predicates look through vectors and pointers, like tinygrad's `scalar()`.
    assert!(D::FLOAT32.vec(4).is_float());
    assert!(D::UINT8.ptr(AddrSpace::Global).is_unsigned());
}

#[test]
fn min_and_max() {
    use ConstValue::*;
    let cases = [
        (DType::BOOL, Bool(false), Bool(true)),
        (DType::INT8, Int(-128), Int(127)),
        (DType::UINT8, UInt(0), UInt(255)),
        (DType::INT16, Int(-32768), Int(32767)),
        (DType::UINT16, UInt(0), UInt(65535)),
        (DType::INT32, Int(i32::MIN as i64), Int(i32::MAX as i64)),
        (DType::UINT32, UInt(0), UInt(u32::MAX as u64)),
        (DType::INT64, Int(i64::MIN), Int(i64::MAX)),
        (DType::UINT64, UInt(0), UInt(u64::MAX)),
        (DType::INDEX, Int(i64::MIN), Int(i64::MAX)),
    ];
    for (dt, min, max) in cases {
        assert_eq!((dt.min(), dt.max()), (min, max), "{dt}");
        // Bounds of vectors are the bounds of the element.
        assert_eq!(dt.vec(2).min(), min, "{dt}");
    }
    // tinygrad: floats are bounded by -inf/inf; fp8e4m3 has no infinities (they would become
    // NaN), so its bounds are its largest finite values.
    for dt in DType::ALL.into_iter().filter(|d| d.is_float()) {
        let lim = if dt == DType::FP8E4M3 {
            448.0
        } else {
            f64::INFINITY
        };
        assert_eq!(dt.min(), Float(-lim), "{dt}");
        assert_eq!(dt.max(), Float(lim), "{dt}");
    }
}

#[test]
fn vectors_and_pointers() {
    let f4 = DType::FLOAT32.vec(4);
    assert_eq!(f4.count(), 4);
    assert_eq!(f4.bitsize(), 128);
    assert_eq!(f4.itemsize(), 16);
    assert_eq!(f4.scalar(), DType::FLOAT32);
    assert_eq!(f4.priority(), DType::FLOAT32.priority());
    assert_eq!(DType::FLOAT32.vec(1), DType::FLOAT32);
    assert_eq!(DType::VOID.vec(4), DType::VOID);
    let p = f4.ptr(AddrSpace::Local);
    assert_eq!(p.addr_space(), Some(AddrSpace::Local));
    assert_eq!(p.base(), f4);
    assert_eq!(p.scalar(), DType::FLOAT32);
    assert_eq!(format!("{f4:?}"), "dtypes.float32.vec(4)");
    assert_eq!(format!("{p}"), "float32x4*");
    assert_eq!(format!("{:?}", DType::BFLOAT16), "dtypes.bfloat16");
    assert_ne!(p, f4);
}

#[test]
#[should_panic(expected = "can't vectorize")]
fn vec_of_vec_panics() {
    DType::FLOAT32.vec(4).vec(2);
}

#[test]
#[should_panic(expected = "already a pointer")]
fn ptr_of_ptr_panics() {
    DType::FLOAT32.ptr(AddrSpace::Global).ptr(AddrSpace::Global);
}

#[test]
fn every_canonical_name_parses() {
    for dt in DType::ALL {
        assert_eq!(dt.name().parse::<DType>(), Ok(dt));
        assert_eq!(dt.to_string().parse::<DType>(), Ok(dt));
        assert_eq!(dt.name().to_uppercase().parse::<DType>(), Ok(dt));
    }
}

#[test]
fn every_alias_parses() {
    // tinygrad's `dtypes` aliases.
    let aliases = [
        ("half", DType::FLOAT16),
        ("float", DType::FLOAT32),
        ("double", DType::FLOAT64),
        ("uchar", DType::UINT8),
        ("ushort", DType::UINT16),
        ("uint", DType::UINT32),
        ("ulong", DType::UINT64),
        ("char", DType::INT8),
        ("short", DType::INT16),
        ("int", DType::INT32),
        ("long", DType::INT64),
        ("Float", DType::FLOAT32),
        ("HALF", DType::FLOAT16),
    ];
    for (name, dt) in aliases {
        assert_eq!(name.parse::<DType>(), Ok(dt), "{name}");
    }
    // DTYPE_NAMES lists exactly the canonical names and these aliases.
    assert_eq!(DTYPE_NAMES.len(), DType::ALL.len() + 11);
    for &(name, dt) in DTYPE_NAMES {
        assert_eq!(name.parse::<DType>(), Ok(dt), "{name}");
    }
}

#[test]
fn unknown_name_errors_listing_valid_names() {
    for bad in [
        "float8",
        "int128",
        "",
        " float32",
        "index",
        "weakint",
        "void",
        "fp8e4m3fnuz",
    ] {
        let err: ParseDTypeError = bad.parse::<DType>().unwrap_err();
        assert_eq!(err.name, bad);
        let msg = err.to_string();
        assert!(msg.contains(&format!("{bad:?}")), "{msg}");
        for &(name, _) in DTYPE_NAMES {
            assert!(msg.contains(name), "{msg} should list {name}");
        }
    }
    let msg = "bf16".parse::<DType>().unwrap_err().to_string();
    assert!(
        msg.starts_with("unknown dtype \"bf16\"; valid names: bool, int8, "),
        "{msg}"
    );
    assert!(msg.contains("bfloat16") && msg.contains("half"), "{msg}");
    // It is a std error, so `?` into Box<dyn Error> works.
    let boxed: Box<dyn std::error::Error> = Box::new("nope".parse::<DType>().unwrap_err());
    assert!(boxed.to_string().contains("valid names"));
}
