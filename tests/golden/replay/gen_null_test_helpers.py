"""The replay of tinygrad's `test/null/test_helpers.py` (the pure-Python helpers of
`tinygrad.helpers`) by `crates/tensor/tests/replay_null_test_helpers.rs`: the methods it does
not replay, with why. Most of the file tests Python helpers of tinygrad's internals that have
no counterpart in our public API; replayed are those that do: `prod` of sizes
(`tinygrad_uop::prod` over `SInt`, rendered as tinygrad renders a UOp), the C-style division
and remainder (`cdiv`/`cmod` are tinygrad's `python_alu` for its CDIV/CMOD ops; ours is
`tinygrad_uop::exec_alu(Ops::IDiv / Ops::Mod)`, which truncates as C does), `get_shape` of
nested lists (`Data::shape`), and `ceildiv` and `polyN` of UOps, which are not exposed: the test
writes them as tinygrad does (the UOp branch of `ceildiv`, Horner's rule) over our UOp arithmetic,
so it tests how our simplifier folds and renders the result (the polyN UOp is evaluated by
constant folding, `UOp::simplify`, where tinygrad runs it as a program on its PYTHON device). It needs no expected values: every expected value is written in
the tinygrad test itself.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_null_test_helpers.py /tmp/tinygrad
"""
import sys
from common import write

CTX = ("tinygrad's ContextVar/Context: a registry of named Python globals, set for a `with` block or a "
       "decorated function; our settings have no such registry (they are environment variables read "
       "where they act, `environment::VARIABLES`, and typed scoped setters such as `with_default_device`), "
       "so there is no named variable to {}")
PY = "a pure-Python helper of tinygrad's internals (`{}`) with no counterpart in our public API{}"
EXCLUDED = {
  "TestContextVars.test_initial_value_is_set": CTX.format("create with a default and read back"),
  "TestContextVars.test_cannot_recreate": CTX.format("create twice (the RuntimeError on re-creation)"),
  "TestContextVars.test_new_var_inside_context": CTX.format("create inside a Context and re-create"),
  "TestContextVars.test_value_across_modules": CTX.format("create in another module (`exec`) and re-create"),
  "TestContextVars.test_assignment_across_modules": CTX.format("assign `.value` to, here or in another module"),
  "TestContextVars.test_context_assignment": CTX.format("set with `Context(VARIABLE=1)`"),
  "TestContextVars.test_unknown_param_to_context": CTX.format("look up (the KeyError of an unknown name)"),
  "TestContextVars.test_nested_context": CTX.format("set in nested Contexts"),
  "TestContextVars.test_decorator": CTX.format("set with Context as a function decorator"),
  "TestContextVars.test_context_exit_reverts_updated_values": CTX.format("assign and restore on Context exit"),
  "TestAllSame.test_empty": PY.format("all_same", " (a Python list predicate)"),
  "TestAllSame.test_single": PY.format("all_same", " (a Python list predicate)"),
  "TestAllSame.test_same": PY.format("all_same", " (a Python list predicate)"),
  "TestAllSame.test_different": PY.format("all_same", " (a Python list predicate)"),
  "TestMergeDicts.test_merge_dicts": PY.format("merge_dicts", " (merging Python dicts)"),
  **{f"TestStripParens.{m}": PY.format("strip_parens", " (a string helper of tinygrad's C-style renderers)")
     for m in ("test_simple", "test_nested", "test_casted_no_strip", "test_unmatched_parens",
               "test_single_paren_left", "test_single_paren_right", "test_parens_at_different_depths")},
  "TestRoundUp.test_round_up": PY.format("round_up", " (on Python ints; the crates round up with Rust's `div_ceil`/`next_multiple_of`, so it would test std, not us)"),
  "TestCeilDiv.test_int": PY.format("ceildiv", " on Python ints (our ceil division of ints is a private helper of the pooling ops; the UOp branch is replayed in test_symbolic*)"),
  "TestCount.test_count_basic": PY.format("count", " (an itertools.count variant)"),
  "TestCount.test_count_step_pickle": PY.format("count", " (an itertools.count variant, pickled)"),
  "TestFullyFlatten.test_fully_flatten": PY.format("fully_flatten", " (flattens Python lists mixing ints, strings, None)"),
  "TestFullyFlatten.test_fully_flatten_numpy": "numpy interop: fully_flatten of np.ndarrays; no Rust counterpart",
  "TestMemoryview.test_from_mv_to_mv": PY.format("from_mv/to_mv", " (ctypes views of Python memoryviews)"),
  "TestMemoryview.test_speed_from_mv_vs_mv_address": PY.format("from_mv/mv_address", " (times ctypes views of Python memoryviews; asserts nothing)"),
  "TestPolyN.test_float": PY.format("polyN", ": on Python floats it would only test Rust's f64 arithmetic (the Tensor form is replayed in unit_test_helpers)"),
  **{f"TestTimeToStr.{m}": PY.format("time_to_str", " (the time column of DEBUG output)")
     for m in ("test_seconds", "test_boundary_sec_ms", "test_milliseconds", "test_boundary_ms_us",
               "test_microseconds", "test_zero", "test_width_formatting")},
  **{f"TestGetBits.{m}": PY.format("getbits", " (a bit-field helper of tinygrad's device drivers)")
     for m in ("test_low_bits", "test_high_bits", "test_middle_bits", "test_full_range", "test_single_bit")},
  "TestArgFix.test_none": ("argfix normalises Python *args (loose values or one tuple/list, of any type) into a tuple; "
                           "a Rust function takes one typed slice, there are no varargs to normalise (None here)"),
  "TestArgFix.test_positional_arguments": ("argfix normalises Python *args (loose values or one tuple/list) into a tuple; "
                                           "a Rust function takes one typed slice, there are no varargs to normalise"),
  "TestArgFix.test_tuple": ("argfix normalises Python *args (loose values or one tuple/list) into a tuple; "
                            "a Rust function takes one typed slice, there are no varargs to normalise (a tuple of floats here)"),
  "TestArgFix.test_list": ("argfix normalises Python *args (loose values or one tuple/list) into a tuple; "
                           "a Rust function takes one typed slice, there are no varargs to normalise (a list of bools here)"),
  **{f"TestWordWrap.{m}": PY.format("word_wrap/colored/ansistrip", " (wraps the ANSI-colored text of DEBUG output)")
     for m in ("test_wrap_simple", "test_wrap_colored", "test_wrap_colored_at_boundary", "test_wrap_explicit_newline")},
  "TestIsNumpyNdarray.test_ndarray": "numpy interop: is_numpy_ndarray of an np.ndarray; no Rust counterpart",
  "TestIsNumpyNdarray.test_ndarray_tolist": "numpy interop: is_numpy_ndarray of np.ndarray.tolist(); no Rust counterpart",
  "TestIsNumpyNdarray.test_list": "numpy interop: is_numpy_ndarray of a Python list; no Rust counterpart (a Rust type is never an ndarray)",
  "TestIsNumpyNdarray.test_tensor": "numpy interop: is_numpy_ndarray of a Tensor and Tensor(np.ndarray); no Rust counterpart",
}

if __name__ == "__main__":
  write("null_test_helpers", sys.argv[1], "test/null/test_helpers.py", EXCLUDED, {})
