"""Regenerates the full-size models (ResNet-50 from gen_resnet50.py, a MiniLM-sized BERT from
gen_bert.py) and their inputs into OUTDIR, deterministically (fixed seeds), for the full-model
tests against onnxruntime's outputs kept in crates/onnx/tests/data/full/.

    python3 crates/onnx/scripts/gen_full_models.py OUTDIR               # CI: numpy + onnx only
    python3 crates/onnx/scripts/gen_full_models.py OUTDIR --reference   # needs onnxruntime too

OUTDIR gets resnet50.onnx, resnet50_input_0.pb, bert.onnx, bert_input_{0,1,2}.pb (inputs as
TensorProto). Without --reference every file's sha256 is checked against full/manifest.txt, and
any difference is an error: the generator's output changed (another numpy or onnx?), so the
stored outputs no longer belong to these models. With --reference onnxruntime runs both models
and writes full/NAME_output_K.pb (in the graph's output order) and full/manifest.txt.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(SCRIPTS, "..", "tests", "data", "full")
MANIFEST = os.path.join(DATA, "manifest.txt")
MODELS = {"resnet50": "gen_resnet50.py", "bert": "gen_bert.py"}


def inputs():
    """NAME -> the model's inputs, in the graph's input order."""
    x = np.random.default_rng(7).standard_normal((2, 3, 224, 224)).astype(np.float32)
    rng = np.random.default_rng(16)
    ids = rng.integers(0, 30522, (2, 16)).astype(np.int64)
    ids[:, 0] = 101  # [CLS]
    mask = np.ones((2, 16), dtype=np.int64)
    mask[1, 12:] = 0  # row 1: 12 tokens, then padding
    ids[0, 15] = ids[1, 11] = 102  # [SEP]
    ids[1, 12:] = 0  # [PAD]
    types = np.zeros((2, 16), dtype=np.int64)
    types[0, 8:] = 1  # row 0: a second segment
    return {"resnet50": [x], "bert": [ids, mask, types]}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_pb(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())


def generate(outdir):
    """Writes the models and inputs into outdir; the file names written, sorted."""
    os.makedirs(outdir, exist_ok=True)
    # both generators at once, each in its own interpreter: the same bytes as run by hand
    procs = [(script, subprocess.Popen([sys.executable, os.path.join(SCRIPTS, script), os.path.join(outdir, f"{name}.onnx")],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
             for name, script in MODELS.items()]
    files = [f"{name}.onnx" for name in MODELS]
    for name, arrays in inputs().items():
        for k, a in enumerate(arrays):
            write_pb(os.path.join(outdir, f"{name}_input_{k}.pb"), a)
            files.append(f"{name}_input_{k}.pb")
    for script, p in procs:
        log, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"{script} failed:\n{log}")
        print(log.strip(), flush=True)
    return sorted(files)


def reference(outdir, files):
    import onnxruntime as ort

    os.makedirs(DATA, exist_ok=True)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    for name, arrays in inputs().items():
        sess = ort.InferenceSession(os.path.join(outdir, f"{name}.onnx"), opts, providers=["CPUExecutionProvider"])
        feeds = {i.name: a for i, a in zip(sess.get_inputs(), arrays)}
        for k, (info, out) in enumerate(zip(sess.get_outputs(), sess.run(None, feeds))):
            write_pb(os.path.join(DATA, f"{name}_output_{k}.pb"), out)
            a = np.abs(out)
            print(f"{name}_output_{k}.pb ({info.name}): shape {out.shape}, max |v| {a.max():.6g}, mean |v| {a.mean():.6g}")
    with open(MANIFEST, "w") as f:
        f.write(f"# sha256 of gen_full_models.py's files; made with onnx {onnx.__version__}, numpy {np.__version__}, "
                f"onnxruntime {ort.__version__} (python {sys.version.split()[0]})\n")
        for fn in files:
            f.write(f"{sha256(os.path.join(outdir, fn))}  {fn}\n")
    print(f"wrote {os.path.relpath(MANIFEST)}")


def verify(outdir, files):
    if not os.path.exists(MANIFEST):
        sys.exit(f"{MANIFEST} is missing: run gen_full_models.py OUTDIR --reference (needs onnxruntime)")
    want = {}
    with open(MANIFEST) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                digest, fn = line.split()
                want[fn] = digest
    bad = []
    for fn in sorted(set(files) | set(want)):
        got = sha256(os.path.join(outdir, fn)) if fn in files else None
        if got != want.get(fn):
            why = "not in the manifest" if fn not in want else "not generated" if got is None else "hash differs"
            bad.append(f"  {fn}: {why}")
    if bad:
        sys.exit("generated files differ from crates/onnx/tests/data/full/manifest.txt:\n" + "\n".join(bad) + "\n"
                 f"The generator's output changed (onnx {onnx.__version__}, numpy {np.__version__} here; the manifest's "
                 "header names the versions that made it), so the stored onnxruntime outputs no longer match these "
                 "models: regenerate them with `gen_full_models.py OUTDIR --reference`.")
    print(f"{len(files)} files in {outdir} match manifest.txt (onnx {onnx.__version__}, numpy {np.__version__})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--reference", action="store_true", help="run onnxruntime; rewrite the outputs and manifest.txt")
    args = ap.parse_args()
    start = time.time()
    files = generate(args.outdir)
    print(f"generated in {time.time() - start:.1f}s", flush=True)
    (reference if args.reference else verify)(args.outdir, files)


if __name__ == "__main__":
    main()
