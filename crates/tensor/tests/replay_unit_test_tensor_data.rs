//! tinygrad's `test/unit/test_tensor_data.py` (commit a9069c17), replayed on our API: one case
//! per test method, named `Class.test_name`; the excluded method and its reason are in
//! `tests/golden/replay/unit_test_tensor_data.json` (`tests/golden/replay/gen_unit_test_tensor_data.py`,
//! which also stores the bytes `struct.pack("ff", ..)` makes).
//!
//! Departures:
//! - `Tensor(b"..")` / `Tensor(b"..", dtype=dtypes.float32)` is `Tensor::from_bytes(bytes, dtype,
//!   shape, device)`, which takes the shape: the byte count over the dtype's size, as tinygrad
//!   infers it.
//! - tinygrad's `t.data()` is a `memoryview` typed by the dtype's struct format and cast to the
//!   shape; here it is `try_to_bytes()`, the untyped little-endian bytes (docs/API.md). The
//!   view's items are those bytes read `itemsize` at a time as the dtype (`ConstValue::
//!   from_le_bytes`); `dat.format` is the dtype the bytes are read as (the tensor's `dtype()`),
//!   `dat.itemsize` its size, `dat[i, j]` the row-major item, `dat.shape` the tensor's shape
//!   (the bytes carry none), for an empty tensor tinygrad's flat `(0,)`: no bytes at all.
//! - `test_data_float16` is skipped by tinygrad for Python < 3.12 (a memoryview of format `e`);
//!   nothing of it depends on Python here, so it is replayed.

mod replay;

use replay::{Case, Ctx};
use tinygrad_tensor::{ConstValue, DType, Data, Tensor, tensor};

const CASES: &[Case] = &[
    ("TestTensorBytes.test_bytes", bytes),
    ("TestTensorBytes.test_float_bytes", float_bytes),
    ("TestTensorData.test_data", data),
    ("TestTensorData.test_data_empty", data_empty),
    (
        "TestTensorData.test_data_empty_multi_dim",
        data_empty_multi_dim,
    ),
    ("TestTensorData.test_data_uint8", data_uint8),
    ("TestTensorData.test_data_nested", data_nested),
    ("TestTensorData.test_data_const", data_const),
    ("TestTensorData.test_data_float32", data_float32),
    ("TestTensorData.test_data_float16", data_float16),
    (
        "TestTensorData.test_tolist_empty_shapes",
        tolist_empty_shapes,
    ),
];

#[test]
fn cpu() {
    replay::replay("unit_test_tensor_data", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("unit_test_tensor_data", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("unit_test_tensor_data on WEBGPU", |dev| {
        replay::replay("unit_test_tensor_data", dev, CASES)
    });
}

// ---- helpers ----

/// tinygrad's `Tensor(b"..", dtype=dtype)`: the bytes as a 1-D tensor of `dtype`.
fn from_py_bytes(bytes: &[u8], dtype: DType, ctx: &Ctx) -> Tensor {
    Tensor::from_bytes(bytes, dtype, &[bytes.len() / dtype.itemsize()], ctx.device)
}

/// What tinygrad's `t.data()` holds: `try_to_bytes()` read `itemsize` bytes at a time as the
/// tensor's dtype.
struct View {
    dtype: DType,
    itemsize: usize,
    shape: Vec<usize>,
    items: Vec<ConstValue>,
}

impl View {
    fn of(t: &Tensor) -> View {
        let dtype = t.dtype();
        let itemsize = dtype.itemsize();
        let bytes = t.try_to_bytes().expect("data()");
        assert_eq!(
            bytes.len() % itemsize,
            0,
            "data(): {} bytes are not whole items of {itemsize}",
            bytes.len()
        );
        let items: Vec<ConstValue> = bytes
            .chunks_exact(itemsize)
            .map(|b| ConstValue::from_le_bytes(dtype, b))
            .collect();
        // a memoryview of an empty tensor is flat, `(0,)`; otherwise cast to the shape
        let shape = if items.is_empty() { vec![0] } else { t.shape() };
        let n: usize = shape.iter().product();
        assert_eq!(
            items.len(),
            n,
            "data(): {} items for shape {shape:?}",
            items.len()
        );
        View {
            dtype,
            itemsize,
            shape,
            items,
        }
    }

    /// `dat[i, j, ..]` (row-major).
    fn at(&self, index: &[usize]) -> Data {
        assert_eq!(index.len(), self.shape.len(), "dat[{index:?}]: wrong rank");
        let mut flat = 0;
        for (&i, &d) in index.iter().zip(&self.shape) {
            assert!(i < d, "dat[{index:?}]: out of shape {:?}", self.shape);
            flat = flat * d + i;
        }
        Data::Scalar(self.items[flat])
    }

    /// `list(dat)` of a 1-D view.
    fn list(&self) -> Data {
        assert_eq!(self.shape.len(), 1, "list(dat) of a 1-D view");
        Data::List(self.items.iter().map(|&v| Data::Scalar(v)).collect())
    }

    /// `dat.tolist()`: the items nested as the shape (a scalar for `()`).
    fn tolist(&self) -> Data {
        fn nest(shape: &[usize], items: &mut impl Iterator<Item = ConstValue>) -> Data {
            match shape.split_first() {
                None => Data::Scalar(items.next().expect("an item")),
                Some((&n, rest)) => Data::List((0..n).map(|_| nest(rest, items)).collect()),
            }
        }
        nest(&self.shape, &mut self.items.iter().copied())
    }
}

fn empty_list() -> Data {
    Data::List(vec![])
}

// ---- TestTensorBytes ----

fn bytes(ctx: &Ctx) {
    let lst = from_py_bytes(b"\xaa\xbb\xcc\xdd", DType::UINT8, ctx);
    assert_eq!(lst.tolist(), Data::from([170, 187, 204, 221]));
}

fn float_bytes(ctx: &Ctx) {
    // struct.pack("ff", 0.234, 0.8585), as the generator packed it
    let packed: Vec<u8> = ctx
        .value("bytes")
        .as_array()
        .expect("bytes")
        .iter()
        .map(|b| b.as_u64().expect("a byte") as u8)
        .collect();
    let lst = from_py_bytes(&packed, DType::FLOAT32, ctx);
    assert_eq!(lst.shape(), vec![2]);
    let Data::List(v) = lst.tolist() else {
        panic!("tolist of a 1-D tensor is a list")
    };
    let f = |d: &Data| match d {
        Data::Scalar(c) => c.as_f64(),
        Data::List(_) => panic!("a scalar"),
    };
    assert!((f(&v[0]) - 0.234).abs() < 1e-6, "{}", f(&v[0]));
    assert!((f(&v[1]) - 0.8585).abs() < 1e-6, "{}", f(&v[1]));
}

// ---- TestTensorData ----

fn data(_: &Ctx) {
    let a = Tensor::new_dtype([1, 2, 3, 4], DType::INT32);
    let dat = View::of(&a);
    assert_eq!(dat.itemsize, 4);
    assert_eq!(dat.list(), Data::from([1, 2, 3, 4]));
    assert_eq!(dat.shape, vec![4]);
    assert_eq!(dat.at(&[0]), Data::from(1));
    assert_eq!(dat.at(&[1]), Data::from(2));
}

fn data_empty(_: &Ctx) {
    let a = Tensor::new_dtype(Vec::<i32>::new(), DType::INT32);
    let dat = View::of(&a);
    assert_eq!(dat.itemsize, 4);
    assert_eq!(dat.list(), empty_list());
    assert_eq!(dat.shape, vec![0]);
}

fn data_empty_multi_dim(_: &Ctx) {
    let a = Tensor::new_dtype(Vec::<i32>::new(), DType::INT32).reshape(&[0, 2]);
    let dat = View::of(&a);
    assert_eq!(dat.itemsize, 4);
    assert_eq!(dat.list(), empty_list());
    assert_eq!(dat.shape, vec![0]);
}

fn data_uint8(_: &Ctx) {
    let a = Tensor::new_dtype([1, 2, 3, 4], DType::UINT8);
    let dat = View::of(&a);
    assert_eq!(dat.dtype, DType::UINT8, "format B");
    assert_eq!(dat.itemsize, 1);
    assert_eq!(dat.at(&[0]), Data::from(1));
    assert_eq!(dat.at(&[1]), Data::from(2));
}

fn data_nested(_: &Ctx) {
    let a = Tensor::new_dtype([[1, 2], [3, 4]], DType::INT32);
    let dat = View::of(&a);
    assert_eq!(dat.dtype, DType::INT32, "format i");
    assert_eq!(dat.itemsize, 4);
    assert_eq!(dat.tolist(), Data::from([[1, 2], [3, 4]]));
    assert_eq!(dat.shape, vec![2, 2]);
    assert_eq!(dat.at(&[0, 0]), Data::from(1));
    assert_eq!(dat.at(&[1, 1]), Data::from(4));
}

fn data_const(_: &Ctx) {
    let a = Tensor::new_dtype(3, DType::INT32);
    let dat = View::of(&a);
    assert_eq!(dat.dtype, DType::INT32, "format i");
    assert_eq!(dat.itemsize, 4);
    assert_eq!(dat.tolist(), Data::from(3));
    assert_eq!(dat.shape, Vec::<usize>::new());
}

fn data_float32(_: &Ctx) {
    let a = tensor!([[1, 2.5], [3, 4]]; DType::FLOAT32);
    let dat = View::of(&a);
    assert_eq!(dat.dtype, DType::FLOAT32, "format f");
    assert_eq!(dat.at(&[0, 1]), Data::from(2.5));
}

fn data_float16(_: &Ctx) {
    let a = tensor!([[1, 2.5], [3, 4]]; DType::FLOAT16);
    let dat = View::of(&a);
    assert_eq!(dat.dtype, DType::FLOAT16, "format e");
    assert_eq!(dat.shape, vec![2, 2]);
    // NOTE: python can't deref float16
}

fn tolist_empty_shapes(_: &Ctx) {
    let l = Data::List;
    let cases: [(&[usize], Data); 5] = [
        (&[0], empty_list()),
        (&[2, 0], l(vec![empty_list(), empty_list()])),
        (&[0, 2], empty_list()),
        (&[2, 0, 3], l(vec![empty_list(), empty_list()])),
        (
            &[2, 3, 0],
            l(vec![
                l(vec![empty_list(), empty_list(), empty_list()]),
                l(vec![empty_list(), empty_list(), empty_list()]),
            ]),
        ),
    ];
    for (shape, expected) in cases {
        assert_eq!(
            Tensor::ones(shape, DType::FLOAT32).tolist(),
            expected,
            "ones{shape:?}.tolist()"
        );
    }
}
