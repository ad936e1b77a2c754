/* Unit tests for common/log (journal and terminal line formats,
 * truncation, rate-limited lines) and common/clock's step detection. */
#include "common/clock.h"
#include "common/log.h"
#include "tests/unit/testutil.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static size_t fmt(char *buf, size_t cap, int style, long long ms, int prio, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    size_t n = log_vformat(buf, cap, style, ms, prio, f, ap);
    va_end(ap);
    return n;
}

/* 2026-11-21 18:53:01.123 UTC */
static const long long k_ms = 1795287181123LL;

START_TEST(journal_lines_carry_the_syslog_priority)
{
    char buf[128];
    size_t n = fmt(buf, sizeof buf, LOG_STYLE_JOURNAL, k_ms, LOG_LVL_NOTICE, "scp: port %d", 11112);
    ck_assert_str_eq(buf, "<5>scp: port 11112\n");
    ck_assert_uint_eq(n, strlen(buf));
}
END_TEST

/* A value from a peer (here an Image Type) cannot start a line of its own
 * at another priority. */
START_TEST(control_bytes_in_a_message_cannot_forge_a_line)
{
    char buf[128];
    fmt(buf, sizeof buf, LOG_STYLE_JOURNAL, k_ms, LOG_LVL_NOTICE, "image type %s",
        "ORIGINAL\\PRIMARY\n<0>forged\r\x7f");
    ck_assert_str_eq(buf, "<5>image type ORIGINAL\\PRIMARY?<0>forged??\n");
}
END_TEST

START_TEST(terminal_lines_carry_time_and_level)
{
    setenv("TZ", "UTC", 1);
    tzset();
    char buf[128];
    fmt(buf, sizeof buf, LOG_STYLE_TERMINAL, k_ms, LOG_LVL_ERR, "job %d failed", 7);
    ck_assert_str_eq(buf, "18:53:01.123 error: job 7 failed\n");
    fmt(buf, sizeof buf, LOG_STYLE_TERMINAL, k_ms + 5, LOG_LVL_DEBUG, "x");
    ck_assert_str_eq(buf, "18:53:01.128 debug: x\n");
    fmt(buf, sizeof buf, LOG_STYLE_TERMINAL, k_ms, LOG_LVL_INFO, "started");
    ck_assert_str_eq(buf, "18:53:01.123 info: started\n");
}
END_TEST

START_TEST(file_lines_carry_date_time_zone_and_level)
{
    setenv("TZ", "UTC", 1);
    tzset();
    char buf[128];
    fmt(buf, sizeof buf, LOG_STYLE_FILE, k_ms, LOG_LVL_WARNING, "send %d failed", 3);
    ck_assert_str_eq(buf, "2026-11-21 18:53:01.123 +0000 warning: send 3 failed\n");
    setenv("TZ", "CET-1", 1);
    tzset();
    fmt(buf, sizeof buf, LOG_STYLE_FILE, k_ms, LOG_LVL_NOTICE, "x");
    ck_assert_str_eq(buf, "2026-11-21 19:53:01.123 +0100 notice: x\n");
    setenv("TZ", "UTC", 1);
    tzset();
}
END_TEST

START_TEST(long_lines_are_cut_and_still_end_with_a_newline)
{
    char buf[16];
    size_t n = fmt(buf, sizeof buf, LOG_STYLE_JOURNAL, k_ms, LOG_LVL_WARNING, "%s",
                   "a message far longer than the buffer");
    ck_assert_uint_eq(n, sizeof buf - 1);
    ck_assert_int_eq(buf[n - 1], '\n');
    ck_assert_int_eq(buf[n], '\0');
    ck_assert(strncmp(buf, "<4>a message", 12) == 0);
}
END_TEST

/* log_style_detect() with fd 2 replaced by `fd` for the call. */
static int style_with_stderr(int fd)
{
    int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    int style = log_style_detect();
    dup2(saved, 2);
    close(saved);
    return style;
}

/* JOURNAL_STREAM's "DEVICE:INODE" for the file fd is open on. */
static void set_journal_stream(int fd)
{
    struct stat st;
    char v[64];
    ck_assert_int_eq(fstat(fd, &st), 0);
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", v, 1);
}

START_TEST(the_style_follows_stderr_and_the_journal)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    unsetenv("JOURNAL_STREAM");
    ck_assert_int_eq(style_with_stderr(p[1]), LOG_STYLE_JOURNAL);
    close(p[0]);
    close(p[1]);

    char dir[64], path[96];
    tu_tmpdir(dir, sizeof dir);
    tu_write(dir, "log", "", path, sizeof path);
    int file = open(path, O_WRONLY | O_APPEND);
    ck_assert_int_ge(file, 0);
    ck_assert_int_eq(style_with_stderr(file), LOG_STYLE_FILE);
    set_journal_stream(file); /* the journal is this file: no times added */
    ck_assert_int_eq(style_with_stderr(file), LOG_STYLE_JOURNAL);
    unsetenv("JOURNAL_STREAM");
    close(file);

    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0) { /* a container without /dev/pts */
        printf("SKIP the_style_follows_stderr_and_the_journal: no pseudo-terminal\n");
        return;
    }
    ck_assert_int_eq(grantpt(master), 0);
    ck_assert_int_eq(unlockpt(master), 0);
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    ck_assert_int_ge(tty, 0);
    ck_assert_int_eq(style_with_stderr(tty), LOG_STYLE_TERMINAL);
    setenv("JOURNAL_STREAM", "8:12345", 1); /* a unit's journal, stderr taken elsewhere */
    ck_assert_int_eq(style_with_stderr(tty), LOG_STYLE_TERMINAL);
    set_journal_stream(tty);
    ck_assert_int_eq(style_with_stderr(tty), LOG_STYLE_JOURNAL);
    unsetenv("JOURNAL_STREAM");
    close(tty);
    close(master);
}
END_TEST

/* Output of fn() on stderr, into out. */
static void stderr_of(void (*fn)(void), char *out, size_t cap)
{
    char path[] = "/tmp/check_log_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    unlink(path);
    dup2(fd, 2);
    fn();
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
}

static void flood(void)
{
    for (int i = 0; i < 50; i++)
        log_limited(LOG_LVL_WARNING, "http: connection limit");
    log_limited(LOG_LVL_WARNING, "http: another message");
    log_limited(LOG_LVL_DEBUG, "below the level");
}

START_TEST(a_flood_of_one_line_is_logged_once)
{
    char out[4096];
    log_level = LOG_LVL_INFO;
    stderr_of(flood, out, sizeof out);
    ck_assert_msg(strstr(out, "http: connection limit\n") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "another message") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "below the level") == NULL, "%s", out);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    ck_assert_int_eq(lines, 2);
}
END_TEST

START_TEST(a_clock_step_is_told_apart_from_drift)
{
    int64_t off = INT64_MIN;
    ck_assert_int_eq(ldct_clock_step(&off, 1000000, 500, 2000), 0);  /* the reference */
    ck_assert_int_eq(ldct_clock_step(&off, 1001600, 2000, 2000), 0); /* slewed 100 ms */
    ck_assert_int_eq(ldct_clock_step(&off, 1002600 - 3600000, 3000, 2000), -3600000);
    ck_assert_int_eq(ldct_clock_step(&off, 1003600 - 3600000, 4000, 2000), 0);
    ck_assert_int_eq(ldct_clock_step(&off, 1004600 - 3600000 + 60000, 5000, 2000), 60000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, journal_lines_carry_the_syslog_priority);
    tcase_add_test(tc, terminal_lines_carry_time_and_level);
    tcase_add_test(tc, file_lines_carry_date_time_zone_and_level);
    tcase_add_test(tc, control_bytes_in_a_message_cannot_forge_a_line);
    tcase_add_test(tc, long_lines_are_cut_and_still_end_with_a_newline);
    tcase_add_test(tc, the_style_follows_stderr_and_the_journal);
    tcase_add_test(tc, a_flood_of_one_line_is_logged_once);
    tcase_add_test(tc, a_clock_step_is_told_apart_from_drift);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
