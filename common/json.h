/* Minimal JSON output helpers for the command-line tools. */
#ifndef LDCT_COMMON_JSON_H
#define LDCT_COMMON_JSON_H

#include <stdio.h>

/* Writes `s` as a quoted JSON string (escaping quotes, backslashes and
 * control characters) to f. */
void json_write_string(FILE *f, const char *s);

#endif
