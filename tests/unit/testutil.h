/* Helpers shared by the Check unit tests: temporary directories and files. */
#ifndef LDCT_TESTS_TESTUTIL_H
#define LDCT_TESTS_TESTUTIL_H

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

#endif
