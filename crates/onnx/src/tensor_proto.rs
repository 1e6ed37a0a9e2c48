//! ONNX `TensorProto`s (initializers, `Constant` values, test data files) as [`Tensor`]s:
//! the element type, the raw little-endian bytes or the typed repeated fields, and external
//! data files next to the model.

use std::path::Path;

use tinygrad_tensor::{DType, Tensor};

use crate::error::{OnnxError, Result};
use crate::narrow::Narrow;
use crate::proto::TensorProto;
use crate::proto::tensor_proto::DataType;

/// The dtype of an ONNX element type, or why there is none.
pub fn dtype_of(elem_type: i32) -> std::result::Result<DType, String> {
    let t =
        DataType::try_from(elem_type).map_err(|_| format!("unknown element type {elem_type}"))?;
    Ok(match t {
        DataType::Float => DType::FLOAT32,
        DataType::Uint8 => DType::UINT8,
        DataType::Int8 => DType::INT8,
        DataType::Uint16 => DType::UINT16,
        DataType::Int16 => DType::INT16,
        DataType::Int32 => DType::INT32,
        DataType::Int64 => DType::INT64,
        DataType::Bool => DType::BOOL,
        DataType::Float16 => DType::FLOAT16,
        DataType::Double => DType::FLOAT64,
        DataType::Uint32 => DType::UINT32,
        DataType::Uint64 => DType::UINT64,
        DataType::Bfloat16 => DType::BFLOAT16,
        DataType::Float8e4m3fn => DType::FP8E4M3,
        DataType::Float8e5m2 => DType::FP8E5M2,
        other => {
            return Err(format!(
                "element type {} is not supported",
                other.as_str_name()
            ));
        }
    })
}

/// The dtype that holds values of element type `elem`: its own, or a [`Narrow`] type's
/// container.
pub fn container_of(elem_type: i32) -> std::result::Result<DType, String> {
    match Narrow::of(elem_type) {
        Some(n) => Ok(n.container()),
        None => dtype_of(elem_type),
    }
}

/// `t` as a tensor on `device`; external data is read relative to `dir` (the model's folder).
/// A [`Narrow`] element type (`INT4`, `FLOAT8E4M3FNUZ`, ...) is unpacked into its container
/// dtype ([`Narrow::of`] of `t.data_type` tells which).
///
/// # Errors
/// An unsupported element type, data of another size than the dims imply, more than one data
/// field, a negative dimension, or an external file that can't be read or lies outside `dir`.
pub fn to_tensor(t: &TensorProto, dir: Option<&Path>, device: &str) -> Result<Tensor> {
    let name = t.name.clone().unwrap_or_default();
    let err = |message: String| OnnxError::Tensor {
        name: name.clone(),
        message,
    };
    let elem = t.data_type.unwrap_or(0);
    let narrow = Narrow::of(elem);
    let dtype = container_of(elem).map_err(&err)?;
    let shape = t
        .dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| err(format!("negative dimension in {:?}", t.dims)))
        })
        .collect::<Result<Vec<usize>>>()?;
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err(format!("dims {:?} overflow", t.dims)))?;
    let size = dtype.itemsize();
    // the tensor layer refuses a shape whose dims (zeros counted as ones) span more than
    // isize::MAX bytes, even with no elements: so does the loader, with an error
    shape
        .iter()
        .try_fold(size.max(1), |a, &d| a.checked_mul(d.max(1)))
        .filter(|&b| isize::try_from(b).is_ok())
        .ok_or_else(|| err(format!("dims {:?} overflow", t.dims)))?;
    let want = numel
        .checked_mul(size)
        .ok_or_else(|| err(format!("dims {:?} overflow", t.dims)))?;
    let mut bytes: Vec<u8> = if t.data_location == Some(1) {
        external_bytes(t, dir).map_err(&err)?
    } else if let Some(raw) = &t.raw_data {
        raw.clone()
    } else if narrow.is_some() {
        // packed like the raw bytes, one byte in each int32
        t.int32_data.iter().map(|&x| x as u8).collect()
    } else {
        typed_bytes(t, dtype).map_err(&err)?
    };
    if let Some(n) = narrow {
        bytes = n.unpack(&bytes, numel).ok_or_else(|| {
            err(format!(
                "{} bytes of data for dims {:?} of {} ({} bits each)",
                bytes.len(),
                t.dims,
                n.name(),
                n.bits()
            ))
        })?;
    }
    if bytes.len() != want {
        return Err(err(format!(
            "{} bytes of data for dims {:?} of {dtype} (needs {want})",
            bytes.len(),
            t.dims
        )));
    }
    Ok(Tensor::from_bytes(&bytes, dtype, &shape, device))
}

/// The bytes of the typed repeated field that holds `dtype`'s values.
fn typed_bytes(t: &TensorProto, dtype: DType) -> std::result::Result<Vec<u8>, String> {
    let fields = [
        !t.float_data.is_empty(),
        !t.int32_data.is_empty(),
        !t.int64_data.is_empty(),
        !t.double_data.is_empty(),
        !t.uint64_data.is_empty(),
        !t.string_data.is_empty(),
    ];
    if fields.iter().filter(|f| **f).count() > 1 {
        return Err("more than one data field is set".into());
    }
    if !t.string_data.is_empty() {
        return Err("string tensors are not supported".into());
    }
    // (sized by the data, not the dims: hostile dims must not allocate)
    let mut out = Vec::new();
    let bits32 = |out: &mut Vec<u8>, v: &[i32], width: usize| {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes()[..width]);
        }
    };
    match dtype {
        d if d == DType::FLOAT32 => t
            .float_data
            .iter()
            .for_each(|x| out.extend(x.to_le_bytes())),
        d if d == DType::FLOAT64 => t
            .double_data
            .iter()
            .for_each(|x| out.extend(x.to_le_bytes())),
        d if d == DType::INT64 => t
            .int64_data
            .iter()
            .for_each(|x| out.extend(x.to_le_bytes())),
        d if d == DType::UINT64 => t
            .uint64_data
            .iter()
            .for_each(|x| out.extend(x.to_le_bytes())),
        d if d == DType::UINT32 => t
            .uint64_data
            .iter()
            .for_each(|&x| out.extend((x as u32).to_le_bytes())),
        d if d == DType::INT32 => bits32(&mut out, &t.int32_data, 4),
        d if d == DType::BOOL => t
            .int32_data
            .iter()
            .for_each(|&x| out.push(u8::from(x != 0))),
        // int8/uint8/fp8: one byte of each int32; int16/uint16/float16/bfloat16: two
        d => bits32(&mut out, &t.int32_data, d.itemsize()),
    }
    Ok(out)
}

/// The bytes an external-data tensor points at: `location` (relative to the model's folder,
/// never outside it), `offset` and `length`.
fn external_bytes(t: &TensorProto, dir: Option<&Path>) -> std::result::Result<Vec<u8>, String> {
    let dir = dir.ok_or("external data needs the model's path (load it from a file)")?;
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for kv in &t.external_data {
        let value = kv.value.clone().unwrap_or_default();
        match kv.key.as_deref() {
            Some("location") => location = Some(value),
            Some("offset") => offset = value.parse().map_err(|_| format!("offset {value:?}"))?,
            Some("length") => {
                length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("length {value:?}"))?,
                )
            }
            _ => {}
        }
    }
    let location = location.ok_or("external data without a location")?;
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "external data location {location:?} is outside the model's folder"
        ));
    }
    let path = dir.join(rel);
    let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let start = usize::try_from(offset).map_err(|_| "offset too large")?;
    let end = match length {
        Some(l) => start.checked_add(usize::try_from(l).map_err(|_| "length too large")?),
        None => Some(data.len()),
    }
    .filter(|&e| e <= data.len() && start <= e)
    .ok_or_else(|| {
        format!(
            "offset {offset} and length {length:?} outside {} ({} bytes)",
            path.display(),
            data.len()
        )
    })?;
    Ok(data[start..end].to_vec())
}
