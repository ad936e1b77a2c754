/* scp/internal.hh: helpers shared by the C++ files of scp/ only.
 *
 * This header is private to scp/ (never included from C and never installed):
 * it is the one place where a DCMTK type (OFCondition) may appear in a
 * declaration, so that the translation of DCMTK conditions into project
 * error codes lives in exactly one function (scp__cond_err, global.cc).
 * Any thread may call these functions.
 */
#ifndef LDCT_SCP_INTERNAL_HH
#define LDCT_SCP_INTERNAL_HH

class OFCondition;

/* Maps a DCMTK condition to 0 (good) or a negative project error code, and
 * logs the condition text with `what` (no dataset content) when it is bad. */
int scp__cond_err(const OFCondition &cond, const char *what);

/* Idempotent process setup (what scp_global_init does), without the C
 * exception barrier; throws nothing but may return an error code. */
int scp__global_init_once(void);

/* Copies `src` into `dst` (size `len`, always terminated when len > 0). */
void scp__strlcpy(char *dst, const char *src, size_t len);

#endif
