/* sender: the threads that deliver sends (derived series, or originals for
 * action both/route) to their destinations with C-STORE, retrying with
 * exponential backoff until done or dead.
 *
 * A send is claimed only when no other send to the same destination is in
 * flight (db_send_claim), so a slow or unreachable PACS holds at most one
 * sender while the others serve the other destinations. A send is done
 * when every file got a success or warning status; otherwise the whole send
 * is retried (the PACS keeps one copy per SOP Instance UID, so files that
 * went through before are simply replaced).
 *
 * Threading: sender_pool_* from one thread (the daemon's loop); the
 * destination callback is called from sender threads.
 */
#ifndef LDCT_PIPELINE_SENDER_H
#define LDCT_PIPELINE_SENDER_H

#include "config/config.h"
#include "scp/scp.h"

#include <stdint.h>

/* Delay before attempt `attempts` + 1 after `attempts` failed ones:
 * initial * multiplier^(attempts - 1), at most retry_max_seconds, in ms;
 * -1 when attempts >= retry_max_attempts (the send is dead). */
int64_t sender_backoff_ms(const cfg_destination *d, int attempts);

typedef struct sender_pool_opts {
    const char *db_path;
    int threads;
    const char *calling_ae; /* our AE title */
    scp_tls_ctx *tls;       /* for destinations with tls = yes (NULL: none set up);
                             * the pool takes it over, also when the start fails */
    /* Copies the current configuration of a destination; 0, or LDCT_ENOTFOUND. */
    int (*destination)(void *ctx, const char *name, cfg_destination *out);
    void *ctx;
} sender_pool_opts;

typedef struct sender_pool sender_pool;

int sender_pool_start(const sender_pool_opts *o, sender_pool **out);

/* The TLS setup sends use from the next send on (a reload): the pool takes
 * tls over (NULL: none) and frees the one it had. */
void sender_pool_set_tls(sender_pool *p, scp_tls_ctx *tls);

/* Wakes idle senders: something may be due. */
void sender_pool_notify(sender_pool *p);

/* Seconds a send cancelled at the end of the grace has to end its file. */
#define SENDER_CANCEL_S 2

/* Stops: no send starts; the running ones may finish within grace_s
 * seconds (a derived series left half on a PACS until the next start is
 * what a viewer would show), then each ends after the file in flight
 * (its send goes back to pending, uncounted, for the next start) and the
 * senders are joined. Returns 0 (stopped and freed) or the number of
 * senders still running SENDER_CANCEL_S seconds after that (a peer not
 * answering within its timeout): the pool is then left as it is and the
 * caller should exit. NULL is a no-op. */
int sender_pool_stop(sender_pool *p, int grace_s);

#endif
