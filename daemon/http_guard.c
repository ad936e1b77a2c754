/* Deadline for a whole HTTP request on each connection; see http_guard.h. */
#include "daemon/http_guard.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#define CHECK_EVERY_MS 250

/* One open connection. */
typedef struct conn_rec {
    struct conn_rec *prev, *next;
    struct http_guard *g;
    int fd;
    ino_t ino;        /* the socket's: fd is checked to name it still */
    int in_request;   /* its request arrived whole and runs now */
    int64_t since_ms; /* monotonic: start, or end of its last request */
    int shut;         /* shut down for its deadline */
} conn_rec;

struct http_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int stop, deadline_ms;
    conn_rec *head;
};

static void shut_late(http_guard *g, int64_t now)
{
    int n = 0;
    for (conn_rec *r = g->head; r; r = r->next) {
        if (r->in_request || r->shut || now - r->since_ms < g->deadline_ms)
            continue;
        struct stat st;
        if (fstat(r->fd, &st) == 0 && st.st_ino == r->ino)
            shutdown(r->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
        r->shut = 1;
        n++;
    }
    if (n)
        log_limited(LOG_LVL_WARNING, "http: closed connections that sent no whole request "
                                     "within the deadline");
}

static void *guard_main(void *arg)
{
    http_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += CHECK_EVERY_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g->wake, &g->lock, &ts);
        if (!g->stop)
            shut_late(g, ldct_mono_ms());
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

int http_guard_start(int deadline_ms, http_guard **out)
{
    *out = NULL;
    http_guard *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->deadline_ms = deadline_ms;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&g->thread, NULL, guard_main, g);
    if (rc) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return -rc;
    }
    *out = g;
    return 0;
}

void http_guard_free(http_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) { /* none after MHD_stop_daemon; freed in any case */
        conn_rec *r = g->head;
        g->head = r->next;
        free(r);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void conn_opened(http_guard *g, struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn_rec *r = ci ? calloc(1, sizeof *r) : NULL;
    *socket_context = r;
    if (!r)
        return; /* not guarded: the idle timeout still applies */
    struct stat st;
    r->g = g;
    r->fd = ci->connect_fd;
    r->ino = fstat(r->fd, &st) == 0 ? st.st_ino : 0;
    r->since_ms = ldct_mono_ms();
    pthread_mutex_lock(&g->lock);
    r->next = g->head;
    if (g->head)
        g->head->prev = r;
    g->head = r;
    pthread_mutex_unlock(&g->lock);
}

static void conn_closed(http_guard *g, conn_rec *r)
{
    pthread_mutex_lock(&g->lock);
    if (r->prev)
        r->prev->next = r->next;
    else
        g->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    pthread_mutex_unlock(&g->lock);
    free(r);
}

void http_guard_notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                                  enum MHD_ConnectionNotificationCode code)
{
    http_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_opened(g, c, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context)
        conn_closed(g, *socket_context);
}

/* The connection's record and its guard, or NULL. */
static conn_rec *record_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void http_guard_request_started(struct MHD_Connection *c)
{
    conn_rec *r = record_of(c);
    if (!r)
        return;
    pthread_mutex_lock(&r->g->lock);
    r->in_request = 1;
    pthread_mutex_unlock(&r->g->lock);
}

void http_guard_request_done(void *cls, struct MHD_Connection *c, void **req,
                             enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)req, (void)code;
    conn_rec *r = record_of(c);
    if (!r)
        return;
    pthread_mutex_lock(&r->g->lock);
    r->in_request = 0;
    r->since_ms = ldct_mono_ms(); /* the next request's time starts now */
    pthread_mutex_unlock(&r->g->lock);
}
