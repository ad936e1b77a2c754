#!/usr/bin/python3
"""Side-by-side timing of scikit-image's denoise_nl_means(fast_mode=True)
and the ldct-node NLM CPU reference (gpu_nlm_ref via tests/tools/gpu_nlm_raw)
on the same volume and parameters, on this machine, in one run.

Usage: /usr/bin/python3 tests/bench/skimage_vs_ref.py [BUILD_DIR]
Needs Debian's python3-skimage. patch_size = 2P+1, patch_distance = S, the
same h for both, sigma = 0 for scikit-image (no 2 sigma^2 subtraction).
Prints one JSON line per configuration."""
import json, os, subprocess, sys, tempfile, time

import numpy as np
import skimage
from skimage.restoration import denoise_nl_means

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build/gpuw"
TOOL = os.path.join(BUILD, "tools", "gpu_nlm_raw")


def phantom(nz, ny, nx, sigma=20.0, seed=1):
    rng = np.random.default_rng(seed)
    z, y, x = np.mgrid[0:nz, 0:ny, 0:nx].astype(np.float32)
    v = 40 + 0.1 * x - 0.05 * y + 0.02 * z
    v += 300.0 * (((x - nx / 2) ** 2 + (y - ny / 2) ** 2 + (z - nz / 2) ** 2) < nx * nx / 9)
    v -= 500.0 * (x > nx * 2 // 3)
    return (v + rng.normal(0, sigma, v.shape)).astype(np.float32)


def run(algo, shape, S, P, h, repeat):
    vol = phantom(*shape)
    nz, ny, nx = shape
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.raw"), os.path.join(d, "out.raw")
        vol.tofile(src)
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            if algo == "nlm3d":
                sk = denoise_nl_means(vol, patch_size=2 * P + 1, patch_distance=S, h=h,
                                      fast_mode=True, channel_axis=None)
            else:
                sk = np.stack([denoise_nl_means(s, patch_size=2 * P + 1, patch_distance=S, h=h,
                                                fast_mode=True, channel_axis=None) for s in vol])
            ts.append(time.perf_counter() - t0)
        sk_t = sorted(ts)[len(ts) // 2]
        out = subprocess.run([TOOL, algo, src, dst, str(nx), str(ny), str(nz), str(S), str(P),
                              str(h), str(repeat), "cpu"], check=True, capture_output=True,
                             text=True).stdout
        ours = json.loads(out)
        res = np.fromfile(dst, dtype=np.float32).reshape(shape)
    # Not the same definition (scikit-image's border handling and weights
    # differ), so only a coarse sanity figure: both must denoise.
    diff = float(np.linalg.norm(res - sk) / np.linalg.norm(sk))
    print(json.dumps({"algo": algo, "size": f"{nx}x{ny}x{nz}", "search_radius": S,
                      "patch_radius": P, "h": h, "repeat": repeat, "cpus": os.cpu_count(),
                      "skimage_version": skimage.__version__,
                      "skimage_seconds_median": round(sk_t, 4),
                      "ref_seconds_median": ours["seconds_median"],
                      "speedup": round(sk_t / ours["seconds_median"], 2),
                      "rel_l2_ref_vs_skimage": round(diff, 4)}), flush=True)


if __name__ == "__main__":
    run("nlm3d", (48, 96, 96), 5, 2, 28.0, 3)
    run("nlm2d", (4, 512, 512), 10, 3, 28.0, 3)
