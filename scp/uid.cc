/* scp/uid.cc: generator of unique DICOM UIDs.
 *
 * A UID is "<root>.<microseconds since 1970>.<process tag>.<counter>": the
 * time and an atomic counter make it unique within a process, the process
 * tag (pid mixed with 32 random bits drawn once per process) across
 * processes and hosts that share a root. Components never have leading
 * zeros and the result is at most 64 characters (PS3.5 9.1). Any thread may
 * call scp_uid_new.
 */
#include "scp/scp.h"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
}

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <sys/random.h>
#include <unistd.h>

namespace
{

const size_t k_max_uid = 64;

/* Digits and dots, no empty component, no leading zero in a component. */
bool valid_root(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > k_max_uid || r[0] == '.' || r[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        bool start = i == 0 || r[i - 1] == '.';
        if (r[i] == '.' && r[i - 1] == '.')
            return false;
        if (r[i] != '.' && (r[i] < '0' || r[i] > '9'))
            return false;
        if (start && r[i] == '0' && i + 1 < n && r[i + 1] != '.')
            return false;
    }
    return true;
}

unsigned long process_tag(void)
{
    static std::atomic<unsigned long> tag{0};
    unsigned long t = tag.load();
    if (t)
        return t;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)time(nullptr);
    /* Keep it to 10 digits: pid in the low bits, randomness above. */
    t = ((unsigned long)(rnd % 200000u) * 10000000ul + (unsigned long)getpid() % 10000000ul) + 1;
    unsigned long expected = 0;
    tag.compare_exchange_strong(expected, t);
    return tag.load();
}

} // namespace

extern "C" int scp_uid_valid(const char *uid)
{
    const size_t n = strlen(uid);
    if (n == 0 || n > 64 || uid[0] == '.' || uid[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((uid[i] == '.' && uid[i + 1] == '.') ||
            (uid[i] != '.' && (uid[i] < '0' || uid[i] > '9')))
            return 0;
    return 1;
}

extern "C" int scp_uid_new(const char *root, char *out, size_t len)
{
    try {
        static std::atomic<unsigned long> counter{0};
        if (!root || !out || len == 0 || !valid_root(root))
            return -EINVAL;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long us = (unsigned long long)ts.tv_sec * 1000000ull + ts.tv_nsec / 1000;
        char buf[160];
        int n = snprintf(buf, sizeof buf, "%s.%llu.%lu.%lu", root, us, process_tag(),
                         counter.fetch_add(1) + 1);
        if (n < 0 || (size_t)n > k_max_uid)
            return -ENAMETOOLONG;
        if ((size_t)n >= len)
            return -ENOSPC;
        memcpy(out, buf, (size_t)n + 1);
        return 0;
    } catch (...) {
        return LDCT_EINPUT;
    }
}
