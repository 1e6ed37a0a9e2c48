"""Writes ONNX's backend node test cases (the onnx package's own case generators) as
folders: `model.onnx` and `test_data_set_*/{input,output}_*.pb`, as onnx's
`backend-test-tools generate-data` does for its shipped data.

    python3 crates/onnx/tests/gen_node_tests.py target/onnx-node

CI pins onnx and numpy (the expected passes in node_expected_pass.txt were computed on that
data) and seeds numpy: several generators draw random inputs.
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import onnx.backend.test.case.node as node_test

out = sys.argv[1]
np.random.seed(0)
cases = node_test.collect_testcases(None)
print(f"onnx {onnx.__version__}, numpy {np.__version__}: {len(cases)} cases")
n = 0
for case in cases:
    d = os.path.join(out, case.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds, exist_ok=True)
        for kind, vals, infos in (("input", inputs, case.model.graph.input), ("output", outputs, case.model.graph.output)):
            for j, v in enumerate(vals):
                name = infos[j].name if j < len(infos) else ""
                t = infos[j].type if j < len(infos) else None
                try:
                    if isinstance(v, onnx.TensorProto):
                        data = v.SerializeToString()
                    elif t is not None and t.HasField("sequence_type"):
                        data = numpy_helper.from_list(v, name).SerializeToString()
                    elif t is not None and t.HasField("optional_type"):
                        data = numpy_helper.from_optional(v, name).SerializeToString()
                    elif t is not None and t.HasField("map_type"):
                        data = numpy_helper.from_dict(v, name).SerializeToString()
                    else:
                        data = numpy_helper.from_array(np.asarray(v), name).SerializeToString()
                except Exception as e:
                    print("skip", case.name, e); continue
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(data)
    n+=1
print(f"written {n} to {out}")
