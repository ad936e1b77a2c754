#!/usr/bin/python3
"""NLM (2D slice by slice or 3D) in numpy, per offset, float64, with the
switches that separate our definition (gpu/nlm.h) from scikit-image's slow
mode (fast_mode=False), to measure where a PSNR difference between the two
comes from (docs/NOTES-nlmq.md):
  gaussian  0: uniform patch weights, 1: Gaussian (a = max(P,1)/2), as ours;
            2: uniform over 2P taps (-P+1..P), scikit-image's fast mode
  border    mirror: the search window sees the volume mirrored (ours);
            truncate: offsets that leave the volume are skipped (scikit-image)
  cutoff    0: none (ours); C > 0: pairs with D / h^2 > C get weight 0
            (scikit-image's DISTANCE_CUTOFF = 5)
With gaussian 1, mirror, cutoff 0 it computes our definition (it reproduces
the CPU reference's PSNR to 0.001 dB on the quality phantom); with
truncate and cutoff 5 it is within 0.01 dB of scikit-image's slow mode.
About a minute for 256x256x16 at S=5 P=2 on one core. Single-threaded.
Usage: nlm_variants.py IN.raw NX NY NZ DIM S P H GAUSSIAN BORDER CUTOFF OUT.raw
(float32 raw volumes, x fastest)."""
import sys, numpy as np
inp, nx, ny, nz, dim, S, P, h, gaussian, border, cutoff, outp = sys.argv[1:13]
nx, ny, nz, dim, S, P = map(int, (nx, ny, nz, dim, S, P)); h = float(h); gaussian = int(gaussian)
cutoff = float(cutoff)
vol = np.fromfile(inp, dtype=np.float32).reshape(nz, ny, nx).astype(np.float64)

def weights1d(P, gaussian):
    k = np.arange(-P, P + 1, dtype=np.float64)
    a = max(P, 1) / 2.0
    w = np.exp(-k * k / (2 * a * a)) if gaussian == 1 else np.ones_like(k)
    if gaussian == 2:
        w[0] = 0  # scikit-image's fast mode: 2P taps, -P+1..P
    return w / w.sum()

def filt(vol2):
    """vol2: (nz', ny, nx) with dim axes filtered; returns denoised."""
    g = weights1d(P, gaussian)
    R = S + P
    pads = [(R, R) if ax >= 3 - dim else (0, 0) for ax in range(3)]
    U = np.pad(vol2, pads, mode="reflect")
    nzv = vol2.shape[0]
    sz = (nzv, ny, nx)
    accw = np.zeros(sz); accv = np.zeros(sz)
    rng = range(-S, S + 1)
    offs = [(dz, dy, dx) for dz in (rng if dim == 3 else [0]) for dy in rng for dx in rng]
    pz = P if dim == 3 else 0
    oz = R if dim == 3 else 0
    # region of centre voxels expanded by P: U[oz-pz : oz+nzv+pz, R-P : R+ny+P, R-P : R+nx+P]
    C = U[oz - pz:oz + nzv + pz, R - P:R + ny + P, R - P:R + nx + P]
    zi = np.arange(nzv)[:, None, None]; yi = np.arange(ny)[None, :, None]; xi = np.arange(nx)[None, None, :]
    for dz, dy, dx in offs:
        Sh = U[oz - pz + dz:oz + nzv + pz + dz, R - P + dy:R + ny + P + dy, R - P + dx:R + nx + P + dx]
        d2 = (C - Sh) ** 2
        # valid separable correlation with g along each filtered axis
        for ax in range(3):
            if ax < 3 - dim:
                continue
            n = d2.shape[ax] - 2 * P
            acc = 0
            for t in range(2 * P + 1):
                sl = [slice(None)] * 3; sl[ax] = slice(t, t + n)
                acc = acc + g[t] * d2[tuple(sl)]
            d2 = acc
        e = d2 / (h * h)
        w = np.exp(-e)
        if cutoff > 0:
            w[e > cutoff] = 0
        if border == "truncate":
            ok = ((zi + dz >= 0) & (zi + dz < nzv)) & ((yi + dy >= 0) & (yi + dy < ny)) & ((xi + dx >= 0) & (xi + dx < nx))
            w = w * ok
        accw += w
        accv += w * Sh[pz:pz + nzv, P:P + ny, P:P + nx]
    return accv / accw

if dim == 3:
    out = filt(vol)
else:
    out = np.concatenate([filt(vol[z:z + 1]) for z in range(nz)])
out.astype(np.float32).tofile(outp)
