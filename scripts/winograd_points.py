#!/usr/bin/env python3
"""Rounding of Winograd's F(4x4, 3x3) for several choices of interpolation
points, in float32 against the float64 direct convolution (numpy only:
Debian's python3-numpy).

    python3 scripts/winograd_points.py [CHANNELS]

For each set of points it builds A^T and G by Toom-Cook (the point at
infinity last; G's rows divided by the product of the point's differences
with the others), solves for the B^T that makes the identity exact, checks
it in float64, and prints the largest and the rms error of a float32 2-D
F(4x4) over CHANNELS input channels, relative to the largest output.
model/winograd.c uses the set this picked: 0, +-1, 2, -1/2.
"""
import sys
from fractions import Fraction as Fr

import numpy as np

M, R = 4, 3
N = M + R - 1


def matrices(points):
    pts = [Fr(p) for p in points]
    at = [[p**i for p in pts] + [Fr(1 if i == M - 1 else 0)] for i in range(M)]
    g = []
    for j, p in enumerate(pts):
        f = Fr(1)
        for l, q in enumerate(pts):
            if l != j:
                f *= p - q
        g.append([p**k / f for k in range(R)])
    g.append([Fr(0)] * (R - 1) + [Fr(1)])
    at, g = np.array(at, float), np.array(g, float)
    # B^T is linear in the identity sum_j A^T[i,j] G[j,k] B^T[j,e] = [e == i + k].
    rows, rhs = [], []
    for e in range(N):
        for k in range(R):
            for i in range(M):
                row = np.zeros((N, N))
                row[:, e] = at[i, :] * g[:, k]
                rows.append(row.ravel())
                rhs.append(1.0 if e == i + k else 0.0)
    rows, rhs = np.array(rows), np.array(rhs)
    bt = np.linalg.lstsq(rows, rhs, rcond=None)[0]
    if not np.allclose(rows @ bt, rhs):
        raise SystemExit(f"{points}: no exact B^T")
    return at, g, bt.reshape(N, N)


def winograd(x, w, at, g, bt, dt):
    """x (C, 4T+2, 4T+2) already padded, w (O, C, 3, 3): y (O, 4T, 4T)."""
    at, g, bt = at.astype(dt), g.astype(dt), bt.astype(dt)
    t = (x.shape[1] - 2) // M
    u = np.einsum("ij,ocjk,lk->ocil", g, w.astype(dt), g)
    y = np.zeros((w.shape[0], M * t, M * t), dt)
    for ty in range(t):
        for tx in range(t):
            d = x[:, M * ty : M * ty + N, M * tx : M * tx + N].astype(dt)
            v = np.einsum("ij,cjk,lk->cil", bt, d, bt)
            m = np.einsum("ocij,cij->oij", u, v).astype(dt)
            y[:, M * ty : M * ty + M, M * tx : M * tx + M] = np.einsum("ij,ojk,lk->oil", at, m, at)
    return y


def direct(x, w):
    h = x.shape[1] - 2
    y = np.zeros((w.shape[0], h, h))
    for i in range(3):
        for j in range(3):
            y += np.einsum("oc,chw->ohw", w[:, :, i, j], x[:, i : i + h, j : j + h])
    return y


def main():
    c = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rng = np.random.default_rng(0)
    x = rng.standard_normal((c, 4 * M + 2, 4 * M + 2))
    w = rng.standard_normal((16, c, 3, 3)) / np.sqrt(9 * c)
    ref = direct(x, w)
    scale = np.abs(ref).max()
    half = Fr(1, 2)
    for points in [(0, 1, -1, 2, -2), (0, 1, -1, 2, -half), (0, 1, -1, half, -half), (0, 1, -1, half, -2), (0, 1, -1, 2, half)]:
        at, g, bt = matrices(points)
        if not np.allclose(winograd(x, w, at, g, bt, np.float64), ref):
            raise SystemExit(f"{points}: wrong in float64")
        e = np.abs(winograd(x, w, at, g, bt, np.float32) - ref)
        name = ", ".join(str(Fr(p)) for p in points)
        print(f"points {name}: max error {e.max() / scale:.2e}, rms {np.sqrt((e**2).mean()) / scale:.2e} of the largest output")


if __name__ == "__main__":
    main()
