/* Clock helpers shared by all modules (wall clock, monotonic). Thread-safe. */
#ifndef LDCT_COMMON_CLOCK_H
#define LDCT_COMMON_CLOCK_H

#include <stdint.h>

/* Unix time in milliseconds (CLOCK_REALTIME): what the database stores. */
int64_t ldct_now_ms(void);

/* Milliseconds of CLOCK_MONOTONIC: for intervals a clock change must not
 * stretch or shrink (rate limits). */
int64_t ldct_mono_ms(void);

/* Formats a Unix-ms time as local "YYYY-MM-DD HH:MM:SS" ("-" for 0). */
void ldct_time_format(int64_t ms, char *out, int len);

#endif
