"""The replay of tinygrad's `test/null/test_symbolic_tensor.py` (symbolic shapes, checked on
tinygrad's NULL device with no data read back) by
`crates/tensor/tests/replay_null_test_symbolic_tensor.rs`: the methods it does not replay, with
why. It needs no expected values (the file's assertions are about shapes, the variables' values
and what raises; the random inputs are never read).

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_null_test_symbolic_tensor.py /tmp/tinygrad
"""
import sys
from common import write

VIEW = ("tests tinygrad's internal UOp graph (`t.uop.contiguous_view_offset()`: the offset of a "
        "realized buffer's contiguous view), which this IR does not expose")
EXCLUDED = {
  "TestSymbolicContiguousViewOffset.test_shrink_from_start": VIEW,
  "TestSymbolicContiguousViewOffset.test_shrink_with_offset": VIEW,
}

if __name__ == "__main__":
  write("null_test_symbolic_tensor", sys.argv[1], "test/null/test_symbolic_tensor.py", EXCLUDED, {})
