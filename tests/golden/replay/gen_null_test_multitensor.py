"""The replay of tinygrad's `test/null/test_multitensor.py` (multi-device rules tinygrad checks on
its NULL device: shard axes kept or refused, replicated scalars, errors) by
`crates/tensor/tests/replay_null_test_multitensor.rs`: the methods it does not replay, with why.
It needs no expected values (the replayed assertions are about shapes, devices, sharded axes
and what raises).

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_null_test_multitensor.py /tmp/tinygrad
"""
import sys
from common import write

MEM_USED = ("tests tinygrad's GlobalCounters.mem_used{per_device} (bytes of device buffers alive, counted at "
            "allocation and at free), which our runtime does not count: it has no allocation counter (host "
            "buffers are allocated on first use and their memory is recycled through the runtime's buffer_pool)")
MEM = MEM_USED.format(per_device="")
MEM_DEV = MEM_USED.format(per_device="_per_device")
CONST = (" The test also needs `Tensor.ones(256, buffer=False)`, a constant that is never given a buffer: "
         "`Tensor::ones` takes no `buffer` argument")
GLOBAL_MEM = ("tests tinygrad's GlobalCounters.global_mem (bytes the kernels of a run read and write), which our "
              "runtime does not count (thread_run_counts counts kernels and copies, transfer_stats host/device "
              "traffic, neither the bytes kernels touch)")
JIT_MULTI = ("our Jit does not capture multi-device tensors: it refuses multi-device inputs and outputs "
             "with JitError::Unreplayable (docs/API.md, 'Multi-device tensors': not yet)")

EXCLUDED = {
  "TestMultiRamUsage.test_zeros": MEM,
  "TestMultiRamUsage.test_zeros_del": MEM,
  "TestMultiRamUsage.test_zeros_copy": MEM,
  "TestMultiRamUsage.test_zeros_shard": MEM,
  "TestMultiRamUsage.test_zeros_shard_self": MEM,
  "TestMultiRamUsage.test_zeros_contiguous_shard": MEM,
  "TestMultiRamUsage.test_sharded_memory_replicated": MEM,
  "TestMultiRamUsage.test_sharded_memory_replicated_const": MEM + "." + CONST,
  "TestMultiRamUsage.test_sharded_memory_axis_const": MEM + "." + CONST,
  "TestMultiRamUsage.test_zeros_per_device": MEM_DEV,
  "TestMultiRamUsage.test_zeros_del_per_device": MEM_DEV,
  "TestMultiRamUsage.test_zeros_copy_per_device": MEM_DEV,
  "TestMultiRamUsage.test_zeros_shard_per_device": MEM_DEV,
  "TestMultiRamUsage.test_sharded_memory_replicated_per_device": MEM_DEV,
  "TestMultiRamUsage.test_matmul_half": GLOBAL_MEM,
  "TestMultiRamUsage.test_matmul_half_alt": GLOBAL_MEM,
  "TestMultiRamUsage.test_multi_layer_allreduce": JIT_MULTI + "; and its assertion is on " + MEM,
  "TestMultiRamUsage.test_allreduce_cast_dtype_memory": ("tests tinygrad's ALLREDUCE_CAST context variable (all-reduce "
    "copies of bfloat16 partials made in bfloat16 rather than float32), which our all-reduce does not have (its "
    "copies are always of the partials' own dtype), measured with " + GLOBAL_MEM),
  "TestMultiScalarALU.test_multi_times_call_scalar": ("builds a per-device scalar from tinygrad's function-call UOps "
    "(Tensor.as_param, UOp.call, gettuple, Ops.UNSHARD inside a functools.cache'd function body), internal IR "
    "this crate does not expose: there is no public way to make a multi-device value that differs per device "
    "without a sharded axis"),
}

if __name__ == "__main__":
  write("null_test_multitensor", sys.argv[1], "test/null/test_multitensor.py", EXCLUDED, {})
