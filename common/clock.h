/* Clock helpers shared by all modules (wall clock, monotonic). Thread-safe. */
#ifndef LDCT_COMMON_CLOCK_H
#define LDCT_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Unix time in milliseconds (CLOCK_REALTIME): what the database stores. */
int64_t ldct_now_ms(void);

/* Milliseconds of CLOCK_MONOTONIC: for intervals a clock change must not
 * stretch or shrink (rate limits). */
int64_t ldct_mono_ms(void);

/* Watches the wall clock against the monotonic one: *offset holds their
 * difference (INT64_MIN before the first call). Returns how far the wall
 * clock stepped since the last call (call it every second or so) when that
 * is more than tolerance_ms either way (NTP, an administrator, a restored VM), else 0. */
int64_t ldct_clock_step(int64_t *offset, int64_t wall_ms, int64_t mono_ms, int64_t tolerance_ms);

/* Formats a Unix-ms time as local "YYYY-MM-DD HH:MM:SS" ("-" for 0). */
void ldct_time_format(int64_t ms, char *out, int len);

/* Formats a duration for people: "40 s", "2 min 30 s", "2 min", "1 h 5 min",
 * "1 h" (rounded to the second; below 0 counts as 0). */
void ldct_duration_format(int64_t ms, char *out, size_t len);

#endif
