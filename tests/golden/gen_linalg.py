#!/usr/bin/env python3
"""Golden cases for crates/tensor/src/linalg.rs (qr, svd), checked by
crates/tensor/tests/linalg.rs.

References are numpy float64 (np.linalg.qr with mode="complete", np.linalg.svd) on float32
inputs. Decompositions are unique only up to signs (and, for Q of a tall matrix, its columns past
min(m, n)), so the test normalizes both sides the same way before comparing: each of the first
min(m, n) columns of Q (rows of R) so that R's diagonal is >= 0, each singular vector pair so
that the largest-magnitude entry of U's column is positive; the remaining columns are checked by
orthogonality and reconstruction instead.

Inputs are well conditioned (singular values apart), so float32 Jacobi rotations converge to
the float64 reference within the test's tolerance.

Run: python3 tests/golden/gen_linalg.py  (writes tests/golden/linalg_cases.json)
"""
import json
import os

import numpy as np

rng = np.random.default_rng(20261201)


def arr(a):
    a = np.asarray(a, dtype=np.float64)
    return {"data": [float(v) for v in a.reshape(-1)], "shape": list(a.shape)}


def well_conditioned(shape):
    """A random matrix (per batch) with singular values spread over [1, 4]."""
    *batch, m, n = shape
    k = min(m, n)
    out = np.empty(shape)
    for b in np.ndindex(*batch):
        u, _ = np.linalg.qr(rng.standard_normal((m, m)))
        v, _ = np.linalg.qr(rng.standard_normal((n, n)))
        s = np.sort(rng.uniform(1.0, 4.0, k))[::-1]
        s = s + np.arange(k)[::-1] * 0.1  # apart by at least 0.1
        d = np.zeros((m, n))
        d[range(k), range(k)] = s
        out[b] = u @ d @ v.T
    return np.round(out, 4).astype(np.float32)


cases = []


def qr_case(name, x):
    q, r = np.linalg.qr(x.astype(np.float64), mode="complete")
    cases.append({"name": name, "op": "qr", "input": arr(x), "outputs": [arr(q), arr(r)]})


def svd_case(name, x, full):
    u, s, vh = np.linalg.svd(x.astype(np.float64), full_matrices=full)
    cases.append({"name": name, "op": "svd", "full_matrices": full, "input": arr(x),
                  "outputs": [arr(u), arr(s), arr(vh)]})


qr_case("qr_wikipedia_3x3", np.array([[12, -51, 4], [6, 167, -68], [-4, 24, -41]], np.float32))
qr_case("qr_square_4x4", well_conditioned((4, 4)))
qr_case("qr_tall_5x3", well_conditioned((5, 3)))
qr_case("qr_wide_3x5", well_conditioned((3, 5)))
qr_case("qr_batched_2x3x3", well_conditioned((2, 3, 3)))
qr_case("qr_1x1_negative", np.array([[-2.5]], np.float32))
qr_case("qr_zero_column_3x2", np.array([[0, 1], [0, 2], [0, -1]], np.float32))

svd_case("svd_2x3_reduced", np.array([[3, 2, 2], [2, 3, -2]], np.float32), False)
svd_case("svd_square_4x4", well_conditioned((4, 4)), True)
svd_case("svd_tall_5x3_full", well_conditioned((5, 3)), True)
svd_case("svd_tall_5x3_reduced", well_conditioned((5, 3)), False)
svd_case("svd_wide_3x6_full", well_conditioned((3, 6)), True)
svd_case("svd_odd_5x5", well_conditioned((5, 5)), True)
svd_case("svd_batched_2x4x3", well_conditioned((2, 4, 3)), False)
svd_case("svd_1x1", np.array([[-3.0]], np.float32), True)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linalg_cases.json")
with open(out, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {out}")
