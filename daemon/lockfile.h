/* lockfile: ldctd.lock, the lock that allows one ldctd per state
 * directory, and what it tells other programs. An ldctd holds it with
 * flock(2) for its whole life and writes "PID receiving" into it while it
 * may be receiving; a clean stop empties it. `ldct status` reads from it
 * whether an ldctd runs now and, if none does, whether the last one was
 * killed or crashed. The holder is looked up in /proc/locks: the reader
 * never takes the lock, so it can never make a starting ldctd refuse.
 */
#ifndef LDCT_DAEMON_LOCKFILE_H
#define LDCT_DAEMON_LOCKFILE_H

#include <stddef.h>

/* What follows the pid while an ldctd may be receiving. */
#define LOCKFILE_RECEIVING " receiving"

typedef enum ldctd_state {
    LDCTD_UNKNOWN, /* /proc/locks or the lock file could not be read */
    LDCTD_RUNNING, /* an ldctd holds the lock */
    LDCTD_STOPPED, /* none does; the last one stopped cleanly (or none ever ran) */
    LDCTD_KILLED   /* none does; the last one ended without stopping */
} ldctd_state;

/* "running", "stopped", "killed" or "unknown". */
const char *ldctd_state_name(ldctd_state s);

/* <state_dir>/ldctd.lock */
void lockfile_path(const char *state_dir, char *out, size_t len);

/* What the lock's text says of the run that wrote it: 1 "PID receiving"
 * (a run that did not stop cleanly, unless it still runs), 0 empty, -1 a
 * bare pid (what ldctd before the "receiving" mark left, even after a
 * clean stop). */
int lockfile_text_receiving(const char *text);

/* The state of the ldctd that uses state_dir; *pid is set to its pid when
 * it runs (else 0). */
ldctd_state lockfile_daemon_state(const char *state_dir, long *pid);

#endif
