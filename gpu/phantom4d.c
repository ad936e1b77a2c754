/* 4D body phantom: the beating heart added to the body phantom (see
 * gpu/phantom4d.h). Pure C11; any thread.
 *
 * Invariant: at every time point the heart lies inside the soft tissue and
 * clear of the liver, bone (with its edge annulus), gas and every ROI; the
 * limits checked in gpu_phantom_at_time keep it so for the motions allowed.
 */
#include "gpu/phantom4d.h"

#include <math.h>
#include <string.h>

#include "common/err.h"

enum { ROD = 1000 }; /* z semi-axis, as the body's structures */
static const double HU_SOFT = 40;
static const double TWO_PI = 6.283185307179586;
/* The heart's centre may move and its radius grow up to this distance
 * from (56, 24) mm: beyond it, it would reach the bone's edge annulus or
 * the fat layer. */
static const double HEART_REACH = 20.0;

void gpu_phantom_heart_default(gpu_phantom_heart *h, double motion)
{
    *h = (gpu_phantom_heart){.x = 56,
                             .y = 24,
                             .radius = 13,
                             .beat = 3 * motion,
                             .shift = 1 * motion,
                             .hu = GPU_PHANTOM4D_HEART_HU,
                             .period_ms = 1000};
}

/* The limits of gpu_phantom_at_time, solved for the scale of beat and
 * shift: the rim within HEART_REACH and a radius of at least 2 mm. */
double gpu_phantom_heart_max_motion(void)
{
    gpu_phantom_heart h;
    gpu_phantom_heart_default(&h, 1);
    double reach = (HEART_REACH - hypot(h.x - 56, h.y - 24) - h.radius) / (h.beat + h.shift);
    double shrink = (h.radius - 2) / h.beat;
    return reach < shrink ? reach : shrink;
}

gpu_phantom_heart_state gpu_phantom_heart_at(const gpu_phantom_heart *h, int t, int T)
{
    double ph = T > 0 ? TWO_PI * t / T : 0;
    return (gpu_phantom_heart_state){
        .x = h->x + h->shift * sin(ph), .y = h->y, .radius = h->radius + h->beat * cos(ph)};
}

double gpu_phantom_heart_max_step(const gpu_phantom_heart *h, int T)
{
    double worst = 0;
    for (int t = 0; t < T; t++) {
        gpu_phantom_heart_state a = gpu_phantom_heart_at(h, t, T),
                                b = gpu_phantom_heart_at(h, (t + 1) % T, T);
        double step = fabs(b.radius - a.radius) + fabs(b.x - a.x);
        worst = step > worst ? step : worst;
    }
    return worst;
}

double gpu_phantom_heart_uniform_to(const gpu_phantom_heart *h, gpu_phantom_heart_state s)
{
    /* The nearest other structure lies HEART_REACH + 4 mm or more from the
     * mean centre (checked against the layout in check_phantom). */
    return HEART_REACH + 4.0 - hypot(s.x - h->x, s.y - h->y);
}

static void move_soft1(gpu_phantom_layout *l)
{
    for (int i = 0; i < l->nroi; i++)
        if (!strcmp(l->roi[i].name, "soft1")) {
            l->roi[i].x = 30;
            l->roi[i].y = 0;
            l->roi[i].radius = 6;
        }
}

int gpu_phantom_at_time(const gpu_phantom *base, const gpu_phantom_heart *h, int t, int T,
                        gpu_phantom *out)
{
    if (base->kind != GPU_PHANTOM_BODY || base->n >= GPU_PHANTOM_MAX_ELLIPSOIDS || T < 1 || t < 0 ||
        t >= T || !(h->radius > 0) || h->beat < 0 || h->shift < 0)
        return LDCT_EINPUT;
    if (hypot(h->x - 56, h->y - 24) + h->radius + h->beat + h->shift > HEART_REACH ||
        h->radius - h->beat < 2)
        return LDCT_EINPUT;
    gpu_phantom_heart_state s = gpu_phantom_heart_at(h, t, T);
    *out = *base;
    gpu_fdk_ellipsoid *e = &out->e[out->n++];
    *e = (gpu_fdk_ellipsoid){.centre = {s.x, s.y, 0},
                             .axes = {s.radius, s.radius, ROD},
                             .phi = 0,
                             .density = gpu_phantom_mu(h->hu) - gpu_phantom_mu(HU_SOFT)};
    move_soft1(&out->layout);
    return 0;
}
