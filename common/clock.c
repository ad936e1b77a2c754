/* Wall-clock helpers; see clock.h. */
#include "common/clock.h"

#include <stdio.h>
#include <time.h>

int64_t ldct_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ldct_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ldct_clock_step(int64_t *offset, int64_t wall_ms, int64_t mono_ms, int64_t tolerance_ms)
{
    const int64_t now = wall_ms - mono_ms;
    if (*offset == INT64_MIN) {
        *offset = now;
        return 0;
    }
    const int64_t step = now - *offset;
    *offset = now; /* slewing moves it by well under a millisecond a second */
    return step > tolerance_ms || step < -tolerance_ms ? step : 0;
}

void ldct_time_format(int64_t ms, char *out, int len)
{
    if (ms <= 0) {
        snprintf(out, (size_t)len, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, (size_t)len, "%Y-%m-%d %H:%M:%S", &tm);
}

void ldct_duration_format(int64_t ms, char *out, size_t len)
{
    long long s = ms > 0 ? (ms + 500) / 1000 : 0;
    if (s < 60)
        snprintf(out, len, "%lld s", s);
    else if (s < 3600 && s % 60)
        snprintf(out, len, "%lld min %lld s", s / 60, s % 60);
    else if (s < 3600)
        snprintf(out, len, "%lld min", s / 60);
    else if (s / 60 % 60)
        snprintf(out, len, "%lld h %lld min", s / 3600, s / 60 % 60);
    else
        snprintf(out, len, "%lld h", s / 3600);
}
