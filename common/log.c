/* Implementation of the stderr logger; see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int log_level = LOG_LVL_INFO;

int log_level_parse(const char *name)
{
    static const char *const names[] = {"error", "warning", "notice", "info", "debug"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, names[i]) == 0)
            return LOG_LVL_ERR + i;
    return -1;
}

void log_write(int prio, const char *fmt, ...)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "<%d>", prio);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log write */
}
