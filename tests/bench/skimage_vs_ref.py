#!/usr/bin/python3
"""Side-by-side timing of scikit-image's denoise_nl_means(fast_mode=True)
and the ldct-node NLM CPU reference (gpu_nlm2d_ref / gpu_nlm3d_ref through
tests/tools/gpu_nlm_raw) on the same volume and parameters, on this machine,
in one run.

Usage: /usr/bin/python3 tests/bench/skimage_vs_ref.py [BUILD_DIR] [RUNS]
Needs Debian's python3-skimage (0.19). Prints one JSON line per
configuration and thread count.

Parameter mapping (same definition of the weight, same data):
  scikit-image patch_size = 2P+1, patch_distance = S (its search window is
  [-S, S] per axis, like ours), h = our h, sigma = 0. Its fast mode computes
  w = exp(-max(sum_p (a-b)^2 - 2 sigma^2 |p|, 0) / (h^2 |p|)) with |p| =
  (2P+1)^dim, i.e. with sigma = 0 exp(-mean_p (a-b)^2 / h^2): our box
  (gaussian = 0) definition with the same h. Both use symmetric pairs and
  reflect-101 padding (numpy 'reflect').
Differences that remain (none in our favour): scikit-image skips weights
  below e^-5 (DISTANCE_CUTOFF, saves it work), computes in float64, and
  treats its padded border slightly differently, so results agree closely
  but not exactly (rel_l2 fields).
Threads: scikit-image's fast-mode loop is single-threaded Cython (nogil,
  no prange). Ours runs with OMP_NUM_THREADS=1 and =2 (this machine's
  cores); the JSON says which. The 2D case runs scikit-image per slice
  (it has no slice-by-slice mode), as ours does internally.
Timing: each sample is one call in a fresh process (gpu_nlm_raw with
  REPEAT=1 times only the NLM call; scikit-image times only
  denoise_nl_means). Samples of the three runners are interleaved so they
  see the same machine load; medians, min and max are reported, and the
  speed-up is the ratio of medians."""
import json, os, statistics, subprocess, sys, tempfile, time

import numpy as np
import skimage
from skimage.restoration import denoise_nl_means

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build/ref"
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
TOOL = os.path.join(BUILD, "tools", "gpu_nlm_raw")


def phantom(nz, ny, nx, sigma=20.0, seed=1):
    rng = np.random.default_rng(seed)
    z, y, x = np.mgrid[0:nz, 0:ny, 0:nx].astype(np.float32)
    v = 40 + 0.1 * x - 0.05 * y + 0.02 * z
    v += 300.0 * (((x - nx / 2) ** 2 + (y - ny / 2) ** 2 + (z - nz / 2) ** 2) < nx * nx / 9)
    v -= 500.0 * (x > nx * 2 // 3)
    return (v + rng.normal(0, sigma, v.shape)).astype(np.float32)


def skimage_once(algo, vol, S, P, h):
    kw = dict(patch_size=2 * P + 1, patch_distance=S, h=h, sigma=0.0, fast_mode=True,
              channel_axis=None)
    t0 = time.perf_counter()
    if algo == "nlm3d":
        out = denoise_nl_means(vol, **kw)
    else:
        out = np.stack([denoise_nl_means(s, **kw) for s in vol])
    return time.perf_counter() - t0, out


def ours_once(algo, src, dst, shape, S, P, h, threads):
    nz, ny, nx = shape
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([TOOL, algo, src, dst, str(nx), str(ny), str(nz), str(S), str(P),
                          str(h), "1", "cpu"], check=True, capture_output=True, text=True,
                         env=env).stdout
    return json.loads(out)["seconds_median"]


def stats(ts):
    return {"median": round(statistics.median(ts), 4), "min": round(min(ts), 4),
            "max": round(max(ts), 4)}


def run(algo, shape, S, P, h, runs):
    vol = phantom(*shape)
    nz, ny, nx = shape
    sk_t, ours_t = [], {1: [], 2: []}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.raw"), os.path.join(d, "out.raw")
        vol.tofile(src)
        for _ in range(runs):
            t, sk = skimage_once(algo, vol, S, P, h)
            sk_t.append(t)
            for th in (1, 2):
                ours_t[th].append(ours_once(algo, src, dst, shape, S, P, h, th))
        res = np.fromfile(dst, dtype=np.float32).reshape(shape)
    # Interior (away from the borders by S+P, where padding differs).
    m = S + P
    inner = (slice(m, -m) if algo == "nlm3d" else slice(None), slice(m, -m), slice(m, -m))
    diff = float(np.linalg.norm(res - sk) / np.linalg.norm(sk))
    diff_in = float(np.linalg.norm(res[inner] - sk[inner]) / np.linalg.norm(sk[inner]))
    sk_med = statistics.median(sk_t)
    for th in (1, 2):
        print(json.dumps({
            "algo": algo, "size": f"{nx}x{ny}x{nz}", "search_radius": S, "patch_radius": P,
            "h": h, "skimage_args": f"patch_size={2 * P + 1}, patch_distance={S}, h={h}, "
                                    "sigma=0, fast_mode=True",
            "runs": runs, "cpus": os.cpu_count(), "loadavg_1min_start": round(load0, 2),
            "loadavg_1min_end": round(os.getloadavg()[0], 2),
            "skimage_version": skimage.__version__, "skimage_threads": 1,
            "skimage_seconds": stats(sk_t), "ref_threads": th,
            "ref_seconds": stats(ours_t[th]),
            "speedup_median": round(sk_med / statistics.median(ours_t[th]), 2),
            "rel_l2_ref_vs_skimage": round(diff, 4),
            "rel_l2_ref_vs_skimage_interior": round(diff_in, 4)}), flush=True)


if __name__ == "__main__":
    run("nlm3d", (48, 96, 96), 5, 2, 28.0, RUNS)
    run("nlm2d", (4, 512, 512), 10, 3, 28.0, RUNS)
