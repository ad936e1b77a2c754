/* Status and metrics over HTTP with libmicrohttpd; see http.h. */
#include "daemon/http.h"

#include "common/err.h"
#include "common/log.h"
#include "daemon/http_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct http_server {
    struct MHD_Daemon *mhd;
    http_guard *guard;
    db *db; /* used by the MHD thread only */
    http_live_fn live;
    void *ctx;
    pthread_mutex_t stop_lock; /* guards stopping and every call of live */
    int stopping;              /* http_set_stopping was called */
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    char *body = strdup(text);
    return body ? reply(c, status, "text/plain; charset=utf-8", body, strlen(body)) : MHD_NO;
}

static int is_stopping(http_server *h)
{
    pthread_mutex_lock(&h->stop_lock);
    const int stopping = h->stopping;
    pthread_mutex_unlock(&h->stop_lock);
    return stopping;
}

/* Adds the daemon's live figures to s; -1 once the node is stopping (what
 * the live callback reads is being taken down). */
static int add_live(http_server *h, status_snapshot *s)
{
    pthread_mutex_lock(&h->stop_lock);
    const int stopping = h->stopping;
    if (!stopping && h->live)
        h->live(h->ctx, s);
    pthread_mutex_unlock(&h->stop_lock);
    return stopping ? -1 : 0;
}

static const char k_stopping[] = "stopping\n";

/* The snapshot written by `write` into a fresh buffer. */
static enum MHD_Result reply_status(http_server *h, struct MHD_Connection *c, const char *type,
                                    int running, void (*write)(FILE *, const status_snapshot *))
{
    status_snapshot s;
    if (status_read(h->db, running, &s) != 0)
        return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "database unavailable\n");
    if (add_live(h, &s) != 0)
        return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, k_stopping);
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f)
        return MHD_NO;
    write(f, &s);
    if (fclose(f) != 0) {
        free(body);
        return MHD_NO;
    }
    return reply(c, MHD_HTTP_OK, type, body, len);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req)
{
    (void)version, (void)upload, (void)req;
    http_server *h = cls;
    http_guard_request_started(c);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    if (*upload_size) { /* a GET with a body: ignore the body */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/status") == 0)
        return reply_status(h, c, "application/json", 1, status_write_json);
    if (strcmp(url, "/metrics") == 0)
        return reply_status(h, c, "text/plain; version=0.0.4; charset=utf-8", 1,
                            status_write_prometheus);
    if (strcmp(url, "/healthz") == 0) {
        status_snapshot s;
        if (is_stopping(h))
            return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, k_stopping);
        return status_read(h->db, 0, &s) == 0
                   ? reply_text(c, MHD_HTTP_OK, "ok\n")
                   : reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "database unavailable\n");
    }
    if (strcmp(url, "/") == 0)
        return reply_text(c, MHD_HTTP_OK,
                          "ldctd: GET /status (JSON), /metrics (Prometheus), "
                          "/healthz\n");
    return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* The listening address; 0 or LDCT_EINPUT. */
static int make_addr(const http_opts *o, struct sockaddr_storage *ss, unsigned *flags)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, o->bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
        return 0;
    }
    if (inet_pton(AF_INET6, o->bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        /* "::" is every interface, IPv4 ones too (as 0.0.0.0 is for
         * IPv4); another IPv6 address is that address alone. */
        *flags |= IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        return 0;
    }
    log_err("http_bind = %s: not a numeric IPv4 or IPv6 address", o->bind);
    return LDCT_EINPUT;
}

/* Monitoring polls often and briefly: idle connections are dropped after
 * k_idle_timeout_s so a few stuck clients cannot hold every slot for long.
 * That timeout counts from a connection's last byte, so a client that sends
 * its request a byte every few seconds (slowloris) would keep its slots:
 * 100 such connections from one host locked /healthz out for as long as
 * they went on. The guard (http_guard.h) closes them at the request
 * deadline. One address holds at most k_per_address slots, half, so that
 * monitoring from another address still gets in meanwhile; half and not
 * fewer, as a monitor may keep a pool of idle connections of its own. */
static const unsigned k_max_connections = 64;
static const unsigned k_per_address = 32;
static const unsigned k_idle_timeout_s = 5;
/* A request must arrive whole within this of its connection's start (or
 * of the end of the request before on it): http_guard.h. */
static const int k_request_deadline_ms = 10000;

/* libmicrohttpd's own messages (a refused request line, a dropped
 * connection) into our log, at warning priority. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    char line[600];
    snprintf(line, sizeof line, "http: %s", msg);
    log_limited(LOG_LVL_WARNING, line); /* a connection flood repeats one message */
}

static void free_server(http_server *h)
{
    pthread_mutex_destroy(&h->stop_lock);
    free(h);
}

int http_start(const http_opts *o, http_server **out)
{
    *out = NULL;
    struct sockaddr_storage ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    int rc = make_addr(o, &ss, &flags);
    if (rc)
        return rc;
    http_server *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->live = o->live;
    h->ctx = o->ctx;
    pthread_mutex_init(&h->stop_lock, NULL);
    if ((rc = db_open(o->db_path, 1, &h->db)) != 0) {
        free_server(h);
        return rc;
    }
    if ((rc = http_guard_start(k_request_deadline_ms, &h->guard)) != 0) {
        db_close(h->db);
        free_server(h);
        return rc;
    }
    /* The logger first: libmicrohttpd warns about options before it. */
    h->mhd = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
        k_max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, k_per_address,
        MHD_OPTION_CONNECTION_TIMEOUT, k_idle_timeout_s, MHD_OPTION_NOTIFY_CONNECTION,
        http_guard_notify_connection, h->guard, MHD_OPTION_NOTIFY_COMPLETED,
        http_guard_request_done, h->guard, MHD_OPTION_END);
    if (!h->mhd) {
        log_err("cannot listen for HTTP on %s port %d", o->bind, o->port);
        http_guard_free(h->guard);
        db_close(h->db);
        free_server(h);
        return LDCT_ENET;
    }
    *out = h;
    return 0;
}

void http_stop(http_server *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->mhd);
    http_guard_free(h->guard); /* after: the daemon reports its connections closed */
    db_close(h->db);
    free_server(h);
}

void http_set_stopping(http_server *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->stop_lock); /* waits for a live callback running now */
    h->stopping = 1;
    pthread_mutex_unlock(&h->stop_lock);
}
