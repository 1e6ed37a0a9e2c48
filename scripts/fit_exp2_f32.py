"""Fits the float32 exp2 polynomial in crates/codegen/src/decomp.rs (`EXP2_Q_F32`).

q(s) ~ (2^s - 1) / s on [-1/2, 1/2], degree 6, near-minimax for the error of s*q(s) (the error
of 2^s): least squares on Chebyshev nodes, then Lawson reweighting. Prints the coefficients
rounded to float32 (lowest degree first) and the approximation error in ulps of 2^s.
Needs numpy only: float64 is ample for a float32 target.
"""
import numpy as np

DEG = 6
n = 4000
s = 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
s = s[np.abs(s) > 1e-6]
y = (np.exp2(s) - 1) / s
V = np.vander(s, DEG + 1, increasing=True)
w = np.abs(s)
c = np.linalg.lstsq(V * w[:, None], y * w, rcond=None)[0]
for _ in range(50):
    e = np.abs(V @ c - y) * np.abs(s)
    w = w * (e / e.max()) ** 0.3
    c = np.linalg.lstsq(V * w[:, None], y * w, rcond=None)[0]
c32 = c.astype(np.float32).astype(np.float64)
t = np.linspace(-0.5, 0.5, 400001)
approx = 1 + t * np.polyval(c32[::-1], t)
ulp = 2.0 ** (np.floor(np.log2(np.exp2(t))) - 23)
print("max error", np.max(np.abs(approx - np.exp2(t)) / ulp), "ulp")
for v in c32:
    print(f"    {float(v)!r},")
