/* Logging to stderr with syslog priority prefixes ("<3>" ... "<7>") so
 * journald classifies each line; no timestamps (journald adds them). The
 * same goes into a pipe (a log collector). On a terminal outside the
 * journal (`make run`, `ldct` by hand) each line starts with the local
 * time and the level instead ("18:53:01.123 notice: ..."), and into a
 * file (`ldctd 2>> ldctd.log`) with the date and the UTC offset too
 * ("2026-11-23 18:53:01.123 +0100 notice: ...").
 *
 * The level macros do not evaluate their arguments when the level is off.
 * Never log patient data: UIDs and AE titles only. Any thread may log; each
 * line is written with one write() so lines from threads do not interleave.
 */
#ifndef LDCT_COMMON_LOG_H
#define LDCT_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum {
    LOG_LVL_ERR = 3,
    LOG_LVL_WARNING = 4,
    LOG_LVL_NOTICE = 5,
    LOG_LVL_INFO = 6,
    LOG_LVL_DEBUG = 7
};

extern int log_level; /* messages with a priority above this are dropped */

/* The level for any thread: a reload (SIGHUP) changes it while others
 * log, so threads read and write it atomically. Assigning log_level
 * directly is fine before any thread starts (tests, main). */
static inline int log_level_get(void)
{
    return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

static inline void log_level_set(int level)
{
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

/* Parses "error", "warning", "notice", "info" or "debug"; -1 if unknown. */
int log_level_parse(const char *name);

enum { LOG_STYLE_JOURNAL, LOG_STYLE_TERMINAL, LOG_STYLE_FILE };

/* LOG_STYLE_JOURNAL when stderr is the journal (JOURNAL_STREAM, which
 * systemd sets, names its device and inode) or a pipe or socket;
 * LOG_STYLE_TERMINAL on a terminal, LOG_STYLE_FILE into a regular file. */
int log_style_detect(void);

/* Formats one line in `style` (now_ms: the time, ms since the epoch) into
 * buf, newline included, truncated to fit; returns its length. */
size_t log_vformat(char *buf, size_t cap, int style, long long now_ms, int prio, const char *fmt,
                   va_list ap);

void log_write(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_AT(prio, ...)                                                                          \
    do {                                                                                           \
        if ((prio) <= log_level_get())                                                             \
            log_write((prio), __VA_ARGS__);                                                        \
    } while (0)
/* Logs `line` at prio, each distinct line at most once a minute, then with
 * the count of repeats it stood for ("... (N more since the last such
 * line)"): for failures that can repeat many times a second (a full disk,
 * a flood of connections), where the journal needs the first line and a
 * heartbeat. Remembers the last 16 distinct lines. Any thread. */
void log_limited(int prio, const char *line);

/* A failure that repeats on a timer (a full disk fails every tick): log
 * only the first of a run (fail_run_first) and, once it works again, how
 * many tries failed (fail_run_end). One per timer; not thread-safe. */
typedef struct fail_run {
    int fails;
} fail_run;

/* Counts a failure; 1 when it is the first of a run (log it). */
static inline int fail_run_first(fail_run *r)
{
    return r->fails++ == 0;
}

/* After a success: the failures of the run it ends (0: none), reset. */
static inline int fail_run_end(fail_run *r)
{
    int n = r->fails;
    r->fails = 0;
    return n;
}

#define log_err(...) LOG_AT(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) LOG_AT(LOG_LVL_WARNING, __VA_ARGS__)
#define log_notice(...) LOG_AT(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...) LOG_AT(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) LOG_AT(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
