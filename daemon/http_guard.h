/* http_guard: closes HTTP connections that take too long to send a request.
 *
 * libmicrohttpd's timeout counts from a connection's last byte, so a client
 * that sends its request a byte every few seconds (slowloris) keeps its
 * connection for as long as it likes; enough of them from the monitoring
 * host (the default bind is 127.0.0.1, so every client is one address)
 * lock monitoring out. The guard gives every request `deadline_ms` from
 * the connection's start, or from the end of the previous request on the
 * same connection, to arrive whole; a connection past it is shut down.
 *
 * Wiring: pass http_guard_notify_connection as MHD_OPTION_NOTIFY_CONNECTION
 * and http_guard_request_done as MHD_OPTION_NOTIFY_COMPLETED (both with the
 * guard as their closure), and call http_guard_request_started from the
 * access handler. libmicrohttpd reports a connection closed before it
 * closes its socket, and the guard shuts a socket down only while it holds
 * the connection's record, so it never touches a reused descriptor (it
 * also checks that the descriptor still names the same socket).
 *
 * Thread-safety: the callbacks may run on any thread; one thread of the
 * guard's own checks the deadlines every 250 ms.
 */
#ifndef LDCT_DAEMON_HTTP_GUARD_H
#define LDCT_DAEMON_HTTP_GUARD_H

#include <microhttpd.h>

typedef struct http_guard http_guard;

/* Starts the checking thread. 0 or a negative errno. */
int http_guard_start(int deadline_ms, http_guard **out);

/* Stops the thread and frees the guard: after MHD_stop_daemon, which
 * reports every connection closed. NULL is a no-op. */
void http_guard_free(http_guard *g);

void http_guard_notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                                  enum MHD_ConnectionNotificationCode code);
void http_guard_request_started(struct MHD_Connection *c);
void http_guard_request_done(void *cls, struct MHD_Connection *c, void **req,
                             enum MHD_RequestTerminationCode code);

#endif
