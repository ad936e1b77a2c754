/* Helpers shared by the Check unit tests: temporary directories and files. */
#ifndef LDCT_TESTS_TESTUTIL_H
#define LDCT_TESTS_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creates a fresh temporary directory; the path is written into dir. */
static inline void tu_tmpdir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/ldct-test-XXXXXX");
    if (!mkdtemp(dir))
        abort();
}

/* Writes `text` to dir/name and puts the path into path. */
static inline void tu_write(const char *dir, const char *name, const char *text, char *path,
                            size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

/* The output of a shell command (a dcmdump of a test file) into out, cut to
 * fit; the command must succeed. */
static inline void tu_command_output(const char *cmd, char *out, size_t len)
{
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    ck_assert_int_eq(pclose(f), 0);
}

/* Runs a suite; returns the process exit code (0 when every test passed). */
static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
