#!/usr/bin/python3
"""Which NLM follows the documented definition (gpu/nlm.h) where weights
are small (h below the noise)? Runs our CPU reference (tools/gpu_nlm_raw)
and scikit-image's denoise_nl_means (fast mode, sigma 0) on a small noisy
volume with the same S, P and h, and compares both with a brute-force numpy
evaluation of the definition (box patch mean of squared differences,
exp(-D / h^2), reflect-101 borders). Also runs scikit-image with h scaled
by sqrt((2P / (2P+1))^3) (its fast mode sums (2P)^3 differences over
(2P+1)^3 h^2; see tests/bench/quality_report.py).
Usage: /usr/bin/python3 tests/bench/nlm_definition_check.py [BUILD]"""
import os, subprocess, sys, tempfile

import numpy as np
from skimage.restoration import denoise_nl_means

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
rng = np.random.default_rng(3)
nz, ny, nx = 10, 24, 22
vol = (40 + rng.normal(0, 30, (nz, ny, nx))).astype(np.float32)
vol[:, 8:16, 8:14] += 20
S, P, h = 2, 1, 17.8
with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "in.raw"), os.path.join(d, "out.raw")
    vol.tofile(src)
    subprocess.run([os.path.join(BUILD, "tools", "gpu_nlm_raw"), "nlm3d", src, dst, str(nx),
                    str(ny), str(nz), str(S), str(P), str(h), "1", "cpu"], check=True,
                   capture_output=True)
    ours = np.fromfile(dst, dtype=np.float32).reshape(nz, ny, nx)
kw = dict(patch_size=2 * P + 1, patch_distance=S, sigma=0, fast_mode=True, channel_axis=None)
sk = denoise_nl_means(vol.astype(np.float64), h=h, **kw)
skm = denoise_nl_means(vol.astype(np.float64), h=h * (2 * P / (2 * P + 1)) ** 1.5, **kw)
m = S + P
U = np.pad(vol.astype(np.float64), m, mode="reflect")
brute = np.zeros(vol.shape)
offs = [(a, b, c) for a in range(-S, S + 1) for b in range(-S, S + 1) for c in range(-S, S + 1)]
for z in range(nz):
    for y in range(ny):
        for x in range(nx):
            c = (z + m, y + m, x + m)
            pc = U[c[0] - P:c[0] + P + 1, c[1] - P:c[1] + P + 1, c[2] - P:c[2] + P + 1]
            ws = acc = 0.0
            for dz, dy, dx in offs:
                q = (c[0] + dz, c[1] + dy, c[2] + dx)
                pq = U[q[0] - P:q[0] + P + 1, q[1] - P:q[1] + P + 1, q[2] - P:q[2] + P + 1]
                w = np.exp(-np.mean((pc - pq) ** 2) / h ** 2)
                ws += w
                acc += w * U[q]
            brute[z, y, x] = acc / ws
inner = (slice(m, -m),) * 3
for name, a in (("ours", ours), ("skimage same h", sk), ("skimage matched h", skm)):
    print("%-18s rel_l2 vs definition %.4f (interior %.4f), noise sd %.2f" % (
        name, np.linalg.norm(a - brute) / np.linalg.norm(brute),
        np.linalg.norm((a - brute)[inner]) / np.linalg.norm(brute[inner]), (a - 40)[inner].std()))
print("definition noise sd %.2f, input %.2f" % ((brute - 40)[inner].std(), (vol - 40)[inner].std()))
