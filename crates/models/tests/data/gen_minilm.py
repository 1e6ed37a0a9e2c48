"""Reference embeddings of sentence-transformers' all-MiniLM-L6-v2, for crates/models/tests/bert.rs.

Usage: python3 crates/models/tests/data/gen_minilm.py [MODEL_DIR]
(MODEL_DIR defaults to target/models/all-MiniLM-L6-v2, what scripts/fetch_minilm.sh unpacks).
Needs PyPI's sentence-transformers (and its torch); writes minilm_ref.json next to this script:
the sentences, the token ids the model's tokenizer gives, and the embeddings (mean pooling over
the attention mask, then L2 normalization) computed one sentence at a time and as one padded batch.
"""
import json, os, sys

import numpy as np
import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

here = os.path.dirname(os.path.abspath(__file__))
model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "../../../../target/models/all-MiniLM-L6-v2")
torch.manual_seed(0)
model = SentenceTransformer(model_dir, device="cpu")
model.eval()

sentences = [
    "Hello world, this is a test.",
    "The cat sits outside",
    "A man is playing guitar.",
    "I love pasta",
    "Do you like pizza?",
    "The new movie is awesome, it was the best film I've seen this year!",
    "Caf\u00e9 d\u00e9j\u00e0 vu: na\u00efve r\u00e9sum\u00e9s \u2014 2,048 tokens \u00e0 la carte.",
    "x",
]

tok = model.tokenizer
ids = [tok(s)["input_ids"] for s in sentences]
with torch.no_grad():
    single = [model.encode([s], batch_size=1, convert_to_numpy=True, normalize_embeddings=False)[0] for s in sentences]
    batch = model.encode(sentences, batch_size=len(sentences), convert_to_numpy=True, normalize_embeddings=False)

out = {
    "generator": "gen_minilm.py",
    "sentence_transformers": sentence_transformers.__version__,
    "torch": torch.__version__,
    "max_seq_length": model.max_seq_length,
    "sentences": sentences,
    "input_ids": ids,
    "single": [np.asarray(e, dtype=np.float32).tolist() for e in single],
    "batch": np.asarray(batch, dtype=np.float32).tolist(),
}
with open(os.path.join(here, "minilm_ref.json"), "w") as f:
    json.dump(out, f)
print("max |single - batch|:", float(np.abs(np.stack(single) - batch).max()))
