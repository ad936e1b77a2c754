#!/usr/bin/python3
"""What storing nlm3d's partial patch sums (XZ: x box and z box of the
squared differences, before the y box) in a narrower format would do to
the result: float32 against XZ rounded to float16, on the phantom of
tests/unit/check_gpu_nlm.c (ramp, ball, step, Gaussian noise), for the
default cutoff, the tests' strong cutoff and none. A numpy model of the
per-offset formulation (weights exp2 of the prescaled distance, centre
weight 1), not the CUDA kernel; docs/NOTES-gpu.md (thirteenth session).

Usage: /usr/bin/python3 tests/bench/nlm_xz_precision.py [NX NY NZ]
(default 41 37 19; about 5 s). Prints one line per cutoff."""
import sys

import numpy as np


def phantom(nx, ny, nz, sigma, rng):
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    cx, cy, cz = x - nx / 2, y - ny / 2, z - nz / 2
    s = 40 + 0.5 * x - 0.3 * y + 0.2 * z
    s = s + 100.0 * ((cx * cx + cy * cy + cz * cz) < nx * nx / 9)
    s = s - 60.0 * (x > nx * 2 // 3)
    return (s + sigma * rng.standard_normal(s.shape)).astype(np.float32)


def nlm3d(u, S, P, h, cut, xz_dtype):
    """Per-offset NLM 3D; xz_dtype: the format XZ is stored in."""
    R = S + P
    nz, ny, nx = u.shape
    up = np.pad(u, R, mode="reflect").astype(np.float32)
    kh = np.float32(np.log2(np.e) / (h * h * (2 * P + 1) ** 3))
    ups = up * np.sqrt(kh)  # prescaled: patch sums are exp2's argument
    ycut = cut * np.log2(np.e) if cut > 0 else np.inf
    aw = np.ones(u.shape)
    av = u.astype(np.float64).copy()
    c = ups[R - P:R + nz + P, R - P:R + ny + P, R - P:R + nx + P]
    for dz in range(-S, S + 1):
        for dy in range(-S, S + 1):
            for dx in range(-S, S + 1):
                if dz == 0 and dy == 0 and dx == 0:
                    continue
                sh = ups[R + dz - P:R + dz + nz + P, R + dy - P:R + dy + ny + P,
                         R + dx - P:R + dx + nx + P]
                sq = (c - sh) ** 2
                x = sum(sq[:, :, k:k + nx] for k in range(2 * P + 1))
                xz = sum(x[k:k + nz] for k in range(2 * P + 1))
                xz = xz.astype(xz_dtype).astype(np.float32)
                d = sum(xz[:, k:k + ny] for k in range(2 * P + 1))
                w = np.exp2(-d.astype(np.float64))
                w[d > ycut] = 0
                aw += w
                av += w * up[R + dz:R + dz + nz, R + dy:R + dy + ny, R + dx:R + dx + nx]
    return av / aw


def main():
    nx, ny, nz = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (41, 37, 19)
    u = phantom(nx, ny, nz, 12.0, np.random.default_rng(1))
    for cut in (4.0, 1.5, 0.0):
        a = nlm3d(u, 5, 2, 14.0, cut, np.float32)
        b = nlm3d(u, 5, 2, 14.0, cut, np.float16)
        e = np.linalg.norm(a - b) / np.linalg.norm(a)
        print(f"{nx}x{ny}x{nz} S=5 P=2 h=14 cutoff {cut:g}: XZ in float16 vs float32: "
              f"rel L2 {e:.3g}, max abs {np.abs(a - b).max():.3g}", flush=True)


if __name__ == "__main__":
    main()
