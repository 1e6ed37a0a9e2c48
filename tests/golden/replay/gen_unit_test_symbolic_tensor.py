"""The replay of tinygrad's `test/unit/test_symbolic_tensor.py` by
`crates/tensor/tests/replay_unit_test_symbolic_tensor.rs`. It needs no expected values (the one
method's expected list is written in the test itself) and excludes nothing.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_symbolic_tensor.py /tmp/tinygrad
"""
import sys
from common import write

if __name__ == "__main__":
  write("unit_test_symbolic_tensor", sys.argv[1], "test/unit/test_symbolic_tensor.py", {}, {})
