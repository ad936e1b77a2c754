/* Time-resolved (4D) body phantom for the low-dose CT simulator (issue 8):
 * the body phantom of gpu/phantom.h plus a beating, moving "heart", a
 * contrast-filled rod (blood pool with iodine, GPU_PHANTOM4D_HEART_HU)
 * in the soft tissue right of the bone, whose radius and centre follow one
 * cardiac cycle over the time points:
 *     r(t) = radius + beat cos(2 pi t / T)       (t = 0: end-diastole)
 *     x(t) = x + shift sin(2 pi t / T),  y(t) = y
 * Every other structure is static, so a 4D denoiser may average them along
 * t while the heart's rim moves by up to 2 pi (beat + shift) / T mm per time
 * point. Like every structure of the body phantom the heart is a rod along
 * z, so each slice shows the same cross-section and the edge statistics
 * pool over slices.
 *
 * The ROI "soft1" of the 3D layout lies where the heart beats; the 4D
 * layout moves it to (30, 0) mm, radius 6 (soft tissue, clear of liver,
 * gas, bone and the heart at its largest). Every other layout entry is the
 * 3D one, so `ldct quality` measures the static structures as in 3D.
 *
 * Plain data and pure functions; any thread. Functions return 0 or
 * LDCT_EINPUT.
 */
#ifndef LDCT_GPU_PHANTOM4D_H
#define LDCT_GPU_PHANTOM4D_H

#include "gpu/phantom.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPU_PHANTOM4D_HEART_HU 300.0 /* contrast-enhanced blood */

typedef struct gpu_phantom_heart {
    double x, y, radius; /* mean centre and radius, mm */
    double beat, shift;  /* amplitudes of the radius and of the x motion, mm */
    double hu;           /* inside; outside is soft tissue */
    double period_ms;    /* one cycle over the time points (TriggerTime) */
} gpu_phantom_heart;

/* Where the heart is at one time point. */
typedef struct gpu_phantom_heart_state {
    double x, y, radius;
} gpu_phantom_heart_state;

/* Defaults: centre (56, 24) mm, radius 13, beat 3 (radius 10..16, an
 * ejection fraction of about 60%), shift 1, 300 HU, period 1000 ms.
 * `motion` scales beat and shift (1 = the defaults, 0 = a static heart). */
void gpu_phantom_heart_default(gpu_phantom_heart *h, double motion);

/* The largest `motion` of gpu_phantom_heart_default that
 * gpu_phantom_at_time accepts (the heart then still fits the soft tissue:
 * 1.75). */
double gpu_phantom_heart_max_motion(void);

/* State at time point t of T (0 <= t < T). */
gpu_phantom_heart_state gpu_phantom_heart_at(const gpu_phantom_heart *h, int t, int T);

/* The largest distance (mm) the rim moves between consecutive time points
 * (the speed a 4D filter has to follow). */
double gpu_phantom_heart_max_step(const gpu_phantom_heart *h, int T);

/* Outside the rim the soft tissue stays uniform to at least this distance
 * from the heart's centre at state s (layout `uniform_to` of its edge). */
double gpu_phantom_heart_uniform_to(const gpu_phantom_heart *h, gpu_phantom_heart_state s);

/* The body phantom `base` (GPU_PHANTOM_BODY) with the heart at time point t
 * of T in `out` (out may not alias base), its layout the 4D layout above.
 * LDCT_EINPUT for another phantom, no room for the rod or a heart that does
 * not fit the soft tissue. */
int gpu_phantom_at_time(const gpu_phantom *base, const gpu_phantom_heart *h, int t, int T,
                        gpu_phantom *out);

#ifdef __cplusplus
}
#endif

#endif
