/* Filtering primitives of the adaptive4d CPU reference (C11 + OpenMP):
 * separable normalized convolution, and the nonseparable 4D filters with
 * the border correction of adaptive4d.h, by FFT (FFTW3 through
 * gpu/fftw_dl.h, zero padding to a 2,3,5,7-smooth size >= n + r per axis, so
 * no circular wrap reaches the volume) or by direct convolution. Both back
 * ends compute the same sums; they differ only by rounding. Any thread;
 * FFTW plans are made under the shared planner lock.
 */
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "gpu/adaptive4d.h"
#include "gpu/fftw_dl.h"

static int nthreads(int threads)
{
    return threads > 0 ? threads : omp_get_max_threads();
}

/* ---- separable normalized convolution ------------------------------------ */

static void smooth_line(float *line, float *tmp, int n, const float *w, int r)
{
    memcpy(tmp, line, sizeof(float) * (size_t)n);
    for (int x = 0; x < n; x++) {
        double acc = 0, norm = 0;
        int lo = x - r < 0 ? r - x : 0, hi = x + r >= n ? r + (n - 1 - x) : 2 * r;
        for (int k = lo; k <= hi; k++) {
            acc += (double)w[k] * tmp[x + k - r];
            norm += w[k];
        }
        line[x] = (float)(acc / norm);
    }
}

/* One axis: every line along `axis` is gathered, smoothed and scattered. */
static int smooth_axis(float *v, const int d[4], int axis, const float *w, int r, int threads)
{
    long stride = 1, total = (long)d[0] * d[1] * d[2] * d[3];
    for (int i = 0; i < axis; i++)
        stride *= d[i];
    const int n = d[axis];
    const long lines = total / n;
    int failed = 0;
#pragma omp parallel num_threads(nthreads(threads))
    {
        float *buf = malloc(sizeof(float) * 2 * (size_t)n);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long l = 0; l < lines; l++) {
            if (!buf)
                continue;
            long base = (l / stride) * stride * n + l % stride;
            for (int x = 0; x < n; x++)
                buf[x] = v[base + x * stride];
            smooth_line(buf, buf + n, n, w, r);
            for (int x = 0; x < n; x++)
                v[base + x * stride] = buf[x];
        }
        free(buf);
    }
    return failed ? -ENOMEM : 0;
}

int gpu__a4d_smooth(const float *in, float *out, const int dims[4], const float *taps, int radius,
                    int axes, int threads)
{
    const size_t n = (size_t)dims[0] * dims[1] * dims[2] * dims[3];
    if (in != out)
        memcpy(out, in, sizeof(float) * n);
    int rc = 0;
    for (int a = 0; a < 4 && !rc; a++)
        if ((axes >> a) & 1)
            rc = smooth_axis(out, dims, a, taps, radius, threads);
    return rc;
}

/* ---- direct convolution ------------------------------------------------- */

/* One output row (y,z,t): acc(x) = sum_j w(j) s(x-j), hc(x) = sum_j w(j) over
 * the taps whose source lies inside. */
static void direct_row(const float *w, int K, const float *in, const int d[4], int y, int z, int t,
                       double *acc, double *hc)
{
    const int r = K / 2, nx = d[0];
    memset(acc, 0, sizeof(double) * (size_t)nx);
    memset(hc, 0, sizeof(double) * (size_t)nx);
    for (int jt = -r; jt <= r; jt++) {
        int st = t - jt;
        if (st < 0 || st >= d[3])
            continue;
        for (int jz = -r; jz <= r; jz++) {
            int sz = z - jz;
            if (sz < 0 || sz >= d[2])
                continue;
            for (int jy = -r; jy <= r; jy++) {
                int sy = y - jy;
                if (sy < 0 || sy >= d[1])
                    continue;
                const float *src = in + (((size_t)st * d[2] + sz) * d[1] + sy) * nx;
                const float *wr = w + (((size_t)(jt + r) * K + jz + r) * K + jy + r) * K + r;
                for (int x = 0; x < nx; x++) {
                    int lo = x - (nx - 1) > -r ? x - (nx - 1) : -r, hi = x < r ? x : r;
                    for (int jx = lo; jx <= hi; jx++) {
                        acc[x] += (double)wr[jx] * src[x - jx];
                        hc[x] += wr[jx];
                    }
                }
            }
        }
    }
}

static int filter_direct(const float *w, int K, const float *in, const float *mean, const int d[4],
                         float *out, int threads)
{
    const long rows = (long)d[1] * d[2] * d[3];
    int failed = 0;
#pragma omp parallel num_threads(nthreads(threads))
    {
        double *acc = malloc(sizeof(double) * 2 * (size_t)d[0]);
        if (!acc) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (long row = 0; row < rows; row++) {
            if (!acc)
                continue;
            int y = (int)(row % d[1]), z = (int)(row / d[1] % d[2]), t = (int)(row / d[1] / d[2]);
            direct_row(w, K, in, d, y, z, t, acc, acc + d[0]);
            float *o = out + (size_t)row * d[0];
            const float *m = mean ? mean + (size_t)row * d[0] : NULL;
            for (int x = 0; x < d[0]; x++)
                o[x] = (float)(m ? acc[x] - acc[d[0] + x] * m[x] : acc[x]);
        }
        free(acc);
    }
    return failed ? -ENOMEM : 0;
}

/* ---- FFT convolution ------------------------------------------------------ */

static int smooth_size(int n)
{
    for (;; n++) {
        int m = n;
        for (int p = 2; p <= 7; p++)
            while (m % p == 0)
                m /= p;
        if (m == 1)
            return n;
    }
}

typedef struct fft_ctx {
    const gpu_fftw_api *f;
    int d[4], P[4];
    long nreal, ncplx;
    fftwf_plan r2c, c2r;
    fftwf_complex *S, *Cs; /* spectra of the padded volume and certainty */
} fft_ctx;

static void fft_close(fft_ctx *c)
{
    gpu__fftw_plan_lock();
    if (c->r2c)
        c->f->destroy(c->r2c);
    if (c->c2r)
        c->f->destroy(c->c2r);
    gpu__fftw_plan_unlock();
    c->f->release(c->S);
    c->f->release(c->Cs);
}

/* Copies a d-shaped array into the zero padded P-shaped buffer (1 where
 * src is NULL: the certainty). */
static void pad(const fft_ctx *c, const float *src, float *dst)
{
    memset(dst, 0, sizeof(float) * (size_t)c->nreal);
    for (long row = 0; row < (long)c->d[1] * c->d[2] * c->d[3]; row++) {
        int y = (int)(row % c->d[1]), z = (int)(row / c->d[1] % c->d[2]),
            t = (int)(row / c->d[1] / c->d[2]);
        float *o = dst + (((size_t)t * c->P[2] + z) * c->P[1] + y) * c->P[0];
        for (int x = 0; x < c->d[0]; x++)
            o[x] = src ? src[(size_t)row * c->d[0] + x] : 1.0f;
    }
}

static int fft_open(fft_ctx *c, const float *in, const int d[4], int r, int need_c)
{
    memset(c, 0, sizeof *c);
    if (!(c->f = gpu__fftw()))
        return LDCT_EUNSUPPORTED;
    c->nreal = 1;
    for (int a = 0; a < 4; a++) {
        c->d[a] = d[a];
        c->P[a] = smooth_size(d[a] + r);
        c->nreal *= c->P[a];
    }
    c->ncplx = c->nreal / c->P[0] * (c->P[0] / 2 + 1);
    float *buf = c->f->alloc(sizeof(float) * (size_t)c->nreal);
    c->S = c->f->alloc(sizeof(fftwf_complex) * (size_t)c->ncplx);
    c->Cs = need_c ? c->f->alloc(sizeof(fftwf_complex) * (size_t)c->ncplx) : NULL;
    int rc = buf && c->S && (c->Cs || !need_c) ? 0 : -ENOMEM;
    if (!rc) {
        const int n[4] = {c->P[3], c->P[2], c->P[1], c->P[0]};
        gpu__fftw_plan_lock();
        c->r2c = c->f->plan_r2c(4, n, buf, c->S, FFTW_ESTIMATE);
        c->c2r = c->f->plan_c2r(4, n, c->S, buf, FFTW_ESTIMATE);
        gpu__fftw_plan_unlock();
        rc = c->r2c && c->c2r ? 0 : LDCT_EUNSUPPORTED;
    }
    if (!rc) {
        pad(c, in, buf);
        c->f->exec_r2c(c->r2c, buf, c->S);
        if (need_c) {
            pad(c, NULL, buf);
            c->f->exec_r2c(c->r2c, buf, c->Cs);
        }
    }
    c->f->release(buf);
    if (rc)
        fft_close(c);
    return rc;
}

/* Places the K^4 kernel at wrapped positions of the padded buffer. */
static void place_kernel(const fft_ctx *c, const float *w, int K, float *dst)
{
    const int r = K / 2;
    memset(dst, 0, sizeof(float) * (size_t)c->nreal);
    for (int jt = -r; jt <= r; jt++)
        for (int jz = -r; jz <= r; jz++)
            for (int jy = -r; jy <= r; jy++)
                for (int jx = -r; jx <= r; jx++) {
                    int p[4] = {jx, jy, jz, jt};
                    for (int a = 0; a < 4; a++)
                        p[a] = (p[a] % c->P[a] + c->P[a]) % c->P[a];
                    dst[(((size_t)p[3] * c->P[2] + p[2]) * c->P[1] + p[1]) * c->P[0] + p[0]] +=
                        w[(((size_t)(jt + r) * K + jz + r) * K + jy + r) * K + jx + r];
                }
}

/* out(x) = (scale * c2r(K .* S))(x) inside the volume, op 0 store, 1 subtract
 * times mean. */
static void multiply_back(const fft_ctx *c, const fftwf_complex *K, const fftwf_complex *S,
                          fftwf_complex *work, float *rbuf, float *out, const float *mean)
{
    for (long i = 0; i < c->ncplx; i++) {
        float a = K[i][0], b = K[i][1], x = S[i][0], y = S[i][1];
        work[i][0] = a * x - b * y;
        work[i][1] = a * y + b * x;
    }
    c->f->exec_c2r(c->c2r, work, rbuf);
    const float scale = 1.0f / (float)c->nreal;
    for (long row = 0; row < (long)c->d[1] * c->d[2] * c->d[3]; row++) {
        int y = (int)(row % c->d[1]), z = (int)(row / c->d[1] % c->d[2]),
            t = (int)(row / c->d[1] / c->d[2]);
        const float *src = rbuf + (((size_t)t * c->P[2] + z) * c->P[1] + y) * c->P[0];
        float *o = out + (size_t)row * c->d[0];
        const float *m = mean ? mean + (size_t)row * c->d[0] : NULL;
        for (int x = 0; x < c->d[0]; x++)
            o[x] = m ? o[x] - src[x] * scale * m[x] : src[x] * scale;
    }
}

static int filter_fft(const float *kernels, int nk, int K, const float *in, const float *mean,
                      const int d[4], float **outs, int threads, gpu_progress_count *done)
{
    fft_ctx c;
    int rc = fft_open(&c, in, d, K / 2, mean != NULL);
    if (rc)
        return rc;
    int failed = 0;
    const size_t ksz = (size_t)K * K * K * K;
#pragma omp parallel num_threads(nthreads(threads) < nk ? nthreads(threads) : nk)
    {
        float *rbuf = c.f->alloc(sizeof(float) * (size_t)c.nreal);
        fftwf_complex *kb = c.f->alloc(sizeof(fftwf_complex) * (size_t)c.ncplx);
        fftwf_complex *wb = c.f->alloc(sizeof(fftwf_complex) * (size_t)c.ncplx);
        if (!rbuf || !kb || !wb) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int k = 0; k < nk; k++) {
            if (!rbuf || !kb || !wb)
                continue;
            place_kernel(&c, kernels + k * ksz, K, rbuf);
            c.f->exec_r2c(c.r2c, rbuf, kb);
            multiply_back(&c, kb, c.S, wb, rbuf, outs[k], NULL);
            if (mean)
                multiply_back(&c, kb, c.Cs, wb, rbuf, outs[k], mean);
            gpu_progress_add(done, 1);
        }
        c.f->release(rbuf);
        c.f->release(kb);
        c.f->release(wb);
    }
    fft_close(&c);
    return failed ? -ENOMEM : 0;
}

int gpu__a4d_filter_ref_counted(const float *kernels, int nk, int size, const float *in,
                                const float *mean, const int dims[4], float **outs, int backend,
                                int threads, gpu_progress_count *done)
{
    if (backend == GPU_A4D_FFT)
        return filter_fft(kernels, nk, size, in, mean, dims, outs, threads, done);
    const size_t ksz = (size_t)size * size * size * size;
    int rc = 0;
    for (int k = 0; k < nk && !rc; k++) {
        rc = filter_direct(kernels + k * ksz, size, in, mean, dims, outs[k], threads);
        gpu_progress_add(done, 1);
    }
    return rc;
}

int gpu__a4d_filter_ref(const float *kernels, int nk, int size, const float *in, const float *mean,
                        const int dims[4], float **outs, int backend, int threads)
{
    return gpu__a4d_filter_ref_counted(kernels, nk, size, in, mean, dims, outs, backend, threads,
                                       NULL);
}
