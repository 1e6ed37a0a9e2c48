//! The data side of the ported op tests: numpy's legacy random stream (the test's inputs),
//! typed arrays stored as base64 bytes, and host-side conversions between dtypes.

use serde_json::Value;
use tinygrad_tensor::{DType, Tensor, bf16, f16};

/// numpy's `RandomState` (MT19937) as `np.random.seed(s)` leaves it: `uniform` draws
/// `low + (high - low) * random_sample()`, with 53-bit doubles made of two 32-bit words.
pub struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    /// `init_genrand(seed)`, which `RandomState.seed(int)` uses.
    pub fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: 624 }
    }

    fn twist(&mut self) {
        for i in 0..624 {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
            let mut next = self.state[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                next ^= 0x9908_b0df;
            }
            self.state[i] = next;
        }
        self.index = 0;
    }

    /// The next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random_sample()`: a double in [0, 1) from 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// `np.random.uniform(low, high, size=n).astype(np.float32)`.
    pub fn uniform_f32(&mut self, low: f64, high: f64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (low + (high - low) * self.next_f64()) as f32)
            .collect()
    }
}

/// Decodes standard base64 (with `=` padding).
pub fn base64(s: &str) -> Vec<u8> {
    fn sextet(c: u8) -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not base64: {:?}", other as char),
        }
    }
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= sextet(c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// A dtype name as the generator writes it (numpy's / torch's names).
pub fn dtype_named(name: &str) -> DType {
    // tinygrad's C-style names, and its "weak" dtypes of Python constants (which become the
    // default int/float next to a tensor)
    let name = match name {
        "unsigned char" => "uint8",
        "signed char" => "int8",
        "unsigned short" => "uint16",
        "unsigned int" => "uint32",
        "unsigned long" => "uint64",
        "weakint" => "int32",
        "weakfloat" => "float32",
        "weakbool" => "bool",
        other => other,
    };
    name.parse()
        .unwrap_or_else(|e| panic!("dtype {name:?} in the case file: {e}"))
}

/// A typed array `{dtype, shape, b64}`: (dtype, shape, bytes).
pub fn typed_parts(v: &Value) -> (DType, Vec<usize>, Vec<u8>) {
    let dtype = dtype_named(v["dtype"].as_str().expect("typed array dtype"));
    let shape = v["shape"]
        .as_array()
        .expect("typed array shape")
        .iter()
        .map(|x| x.as_u64().expect("a size") as usize)
        .collect();
    (
        dtype,
        shape,
        base64(v["b64"].as_str().expect("typed array b64")),
    )
}

/// The stored bytes of a typed array as `f64`s.
pub fn bytes_to_f64(bytes: &[u8], dtype: DType) -> Vec<f64> {
    let n = dtype.itemsize();
    bytes
        .chunks_exact(n)
        .map(|b| match dtype {
            DType::BOOL => f64::from(b[0] != 0),
            DType::UINT8 => f64::from(b[0]),
            DType::INT8 => f64::from(b[0] as i8),
            DType::INT16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
            DType::UINT16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
            DType::INT32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::UINT32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::INT64 => i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64,
            DType::UINT64 => u64::from_le_bytes(b.try_into().expect("8 bytes")) as f64,
            DType::FLOAT16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::BFLOAT16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::FLOAT32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            DType::FLOAT64 => f64::from_le_bytes(b.try_into().expect("8 bytes")),
            other => panic!("typed array of dtype {other}"),
        })
        .collect()
}

/// `values` (Python numbers) as little-endian bytes of `dtype`, converted as numpy does.
pub fn f64_to_bytes(values: &[f64], dtype: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.itemsize());
    for &x in values {
        match dtype {
            DType::BOOL => out.push(u8::from(x != 0.0)),
            DType::UINT8 => out.push(x as i64 as u8),
            DType::INT8 => out.push(x as i64 as i8 as u8),
            DType::INT16 => out.extend((x as i64 as i16).to_le_bytes()),
            DType::UINT16 => out.extend((x as i64 as u16).to_le_bytes()),
            DType::INT32 => out.extend((x as i64 as i32).to_le_bytes()),
            DType::UINT32 => out.extend((x as i64 as u32).to_le_bytes()),
            DType::INT64 => out.extend((x as i64).to_le_bytes()),
            DType::UINT64 => out.extend((x as u64).to_le_bytes()),
            DType::FLOAT16 => out.extend(f16::from_f64(x).to_le_bytes()),
            DType::BFLOAT16 => out.extend(bf16::from_f64(x).to_le_bytes()),
            DType::FLOAT32 => out.extend((x as f32).to_le_bytes()),
            DType::FLOAT64 => out.extend(x.to_le_bytes()),
            other => panic!("cannot build a {other} tensor from Python numbers"),
        }
    }
    out
}

/// A tensor on `device` from a typed array.
pub fn typed_tensor(v: &Value, device: &str) -> Tensor {
    let (dtype, shape, bytes) = typed_parts(v);
    Tensor::from_bytes(&bytes, dtype, &shape, device)
}

/// The numbers of a nested Python list (row-major) and its shape; bools count as 0/1.
pub fn nested(v: &Value) -> (Vec<f64>, Vec<usize>) {
    fn walk(v: &Value, depth: usize, shape: &mut Vec<usize>, out: &mut Vec<f64>) {
        let items = match v {
            Value::Array(a) => Some(a.as_slice()),
            Value::Object(o) if o.contains_key("tuple") => o["tuple"].as_array().map(Vec::as_slice),
            _ => None,
        };
        match items {
            Some(items) => {
                if shape.len() == depth {
                    shape.push(items.len());
                }
                for x in items {
                    walk(x, depth + 1, shape, out);
                }
            }
            None => out.push(super::number(v)),
        }
    }
    let (mut shape, mut out) = (Vec::new(), Vec::new());
    walk(v, 0, &mut shape, &mut out);
    (out, shape)
}
