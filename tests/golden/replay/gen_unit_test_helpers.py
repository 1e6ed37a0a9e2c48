"""The replay of tinygrad's `test/unit/test_helpers.py` (helpers applied to tensors) by
`crates/tensor/tests/replay_unit_test_helpers.rs`: the methods it does not replay, with why.
`polyN` (Horner's rule, `functools.reduce(lambda acc,c: acc*x+c, p, 0.0)`) is a helper of
tinygrad's, not a Tensor method; the replay folds the same way over our Tensor arithmetic in the
test file. It needs no expected values: they are written in the tinygrad test itself.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_helpers.py /tmp/tinygrad
"""
import sys
from common import write

EXCLUDED = {
  "TestIsNumpyNdarray.test_tensor_numpy": ("numpy interop: is_numpy_ndarray(Tensor.numpy()); `to_vec` returns a Rust "
                                           "Vec, there is no ndarray type to recognise"),
  "TestDisableGC.test_recursive_decorator": ("Python's garbage collector (`gc.isenabled`, the `disable_gc` decorator): "
                                             "Rust has no collector to disable"),
}

if __name__ == "__main__":
  write("unit_test_helpers", sys.argv[1], "test/unit/test_helpers.py", EXCLUDED, {})
