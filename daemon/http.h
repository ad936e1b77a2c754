/* http: the daemon's status and metrics listener (libmicrohttpd), for
 * monitoring by PACS administrators:
 *   GET /status   the JSON of `ldct status --json` plus version, uptime,
 *                 associations running and workers
 *   GET /metrics  the same in Prometheus text format
 *   GET /healthz  200 "ok" when the database answers, else 503
 * From http_set_stopping on, all three answer 503 "stopping".
 * Counts and times only, no patient data. Other paths 404, other methods
 * 405.
 *
 * Thread-safety: http_start / http_stop from the loop thread. Requests run
 * on libmicrohttpd's one internal thread, which owns its own read-only
 * database connection; the live callback runs there too and must only read
 * thread-safe state.
 */
#ifndef LDCT_DAEMON_HTTP_H
#define LDCT_DAEMON_HTTP_H

#include "daemon/status.h"

typedef struct http_server http_server;

/* Fills the daemon part of a snapshot (uptime, associations, workers). */
typedef void (*http_live_fn)(void *ctx, status_snapshot *s);

typedef struct http_opts {
    const char *bind; /* numeric IPv4 or IPv6 address */
    int port;
    const char *db_path;
    http_live_fn live; /* may be NULL */
    void *ctx;
} http_opts;

/* Starts listening. Returns 0, LDCT_EINPUT (bad address; message logged),
 * LDCT_ENET (cannot listen) or an error opening the database. */
int http_start(const http_opts *o, http_server **out);

/* Stops the listener (waits for the request running now) and frees it.
 * NULL is a no-op. */
void http_stop(http_server *h);

/* The node is stopping: from now on /healthz, /status and /metrics answer
 * 503 "stopping", and the live callback is not called again (a call running
 * now is waited for), so what it reads may be freed. A health checker sees
 * the stop rather than a refused connection. NULL is a no-op. */
void http_set_stopping(http_server *h);

#endif
