/* Implementation of the stderr logger; see log.h. */
#include "common/log.h"

#include "common/clock.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int log_level = LOG_LVL_INFO;

static const char *const k_level_names[] = {"error", "warning", "notice", "info", "debug"};

int log_level_parse(const char *name)
{
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, k_level_names[i]) == 0)
            return LOG_LVL_ERR + i;
    return -1;
}

/* 1 if JOURNAL_STREAM ("DEVICE:INODE") names the file st describes. */
static int is_journal_stream(const struct stat *st)
{
    const char *e = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    return e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && dev == (unsigned long long)st->st_dev &&
           ino == (unsigned long long)st->st_ino;
}

int log_style_detect(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0 || is_journal_stream(&st))
        return LOG_STYLE_JOURNAL;
    if (isatty(STDERR_FILENO))
        return LOG_STYLE_TERMINAL;
    return S_ISREG(st.st_mode) ? LOG_STYLE_FILE : LOG_STYLE_JOURNAL;
}

/* The line's head: "<3>" for the journal, "18:53:01.123 error: " on a
 * terminal, "2026-11-23 18:53:01.123 +0100 error: " in a file (local
 * time). */
static int format_head(char *buf, size_t cap, int style, long long now_ms, int prio)
{
    if (style != LOG_STYLE_TERMINAL && style != LOG_STYLE_FILE)
        return snprintf(buf, cap, "<%d>", prio);
    const time_t sec = (time_t)(now_ms / 1000);
    struct tm tm;
    localtime_r(&sec, &tm);
    char date[16] = "", zone[16] = "";
    if (style == LOG_STYLE_FILE) {
        strftime(date, sizeof date, "%Y-%m-%d ", &tm);
        strftime(zone, sizeof zone, " %z", &tm);
    }
    const int lvl = prio >= LOG_LVL_ERR && prio <= LOG_LVL_DEBUG ? prio - LOG_LVL_ERR : 0;
    return snprintf(buf, cap, "%s%02d:%02d:%02d.%03d%s %s: ", date, tm.tm_hour, tm.tm_min,
                    tm.tm_sec, (int)(now_ms % 1000), zone, k_level_names[lvl]);
}

size_t log_vformat(char *buf, size_t cap, int style, long long now_ms, int prio, const char *fmt,
                   va_list ap)
{
    if (cap < 2)
        return 0;
    int n = format_head(buf, cap, style, now_ms, prio);
    size_t len = n < 0 ? 0 : (size_t)n < cap - 1 ? (size_t)n : cap - 2;
    const size_t head = len;
    int m = vsnprintf(buf + len, cap - len - 1, fmt, ap);
    len += m < 0 ? 0 : (size_t)m;
    if (len > cap - 2)
        len = cap - 2;
    /* One line per message: a newline or other control byte (from a value a
     * peer sent) becomes '?', so nobody forges a line or its priority. */
    for (size_t i = head; i < len; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = '?';
    buf[len++] = '\n';
    buf[len] = '\0';
    return len;
}

/* The style of this process's stderr, found on the first line logged. */
static int current_style(void)
{
    static atomic_int style = -1;
    int s = atomic_load(&style);
    if (s < 0) {
        s = log_style_detect();
        atomic_store(&style, s);
    }
    return s;
}

#define LIMITED_QUIET_MS 60000 /* one line per distinct message this often */
#define LIMITED_KINDS 16       /* distinct messages remembered */

/* How many repeats `line` stood for if it is due now, -1 if it is not. */
static int limited_due(const char *line)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct {
        char key[192];
        long long logged_ms;
        int quiet; /* repeats not logged since */
    } seen[LIMITED_KINDS];
    static int next;
    const long long now = ldct_mono_ms();
    int due = -1;
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < LIMITED_KINDS && strncmp(seen[i].key, line, sizeof seen[i].key - 1) != 0)
        i++;
    if (i == LIMITED_KINDS) { /* new: take the next slot */
        i = next;
        next = (next + 1) % LIMITED_KINDS;
        snprintf(seen[i].key, sizeof seen[i].key, "%s", line);
        seen[i].logged_ms = now - LIMITED_QUIET_MS;
        seen[i].quiet = 0;
    }
    if (now - seen[i].logged_ms >= LIMITED_QUIET_MS) {
        due = seen[i].quiet;
        seen[i].logged_ms = now;
        seen[i].quiet = 0;
    } else {
        seen[i].quiet++;
    }
    pthread_mutex_unlock(&mu);
    return due;
}

void log_limited(int prio, const char *line)
{
    if (prio > log_level_get())
        return;
    const int quiet = limited_due(line);
    if (quiet > 0)
        log_write(prio, "%s (%d more since the last such line)", line, quiet);
    else if (quiet == 0)
        log_write(prio, "%s", line);
}

void log_write(int prio, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    va_list ap;
    va_start(ap, fmt);
    size_t len = log_vformat(line, sizeof line, current_style(),
                             (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, prio, fmt, ap);
    va_end(ap);
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log write */
}
