/* The node's TLS keys for the DICOM bridge and the check of their files;
 * see tls.h. */
#include "daemon/tls.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

scp_tls node_tls(const cfg_node *n)
{
    return (scp_tls){.certificate = n->tls_certificate,
                     .private_key = n->tls_private_key,
                     .ca_file = n->tls_ca_certificates,
                     .crl_file = n->tls_crl,
                     .require_peer = n->tls_require_client_certificate,
                     .legacy = n->tls_profile == CFG_TLS_BCP195};
}

int node_tls_sender(const ldct_config *cfg, scp_tls_ctx **out, char *err, size_t len)
{
    *out = NULL;
    for (int i = 0; i < cfg->ndest; i++)
        if (cfg->dest[i].tls) {
            const scp_tls tls = node_tls(&cfg->node);
            char why[512] = "";
            int rc = scp_tls_ctx_new(&tls, out, why, sizeof why);
            if (rc)
                snprintf(err, len, "the node's TLS files (for [destination %s], tls = yes): %s",
                         cfg->dest[i].name, why);
            return rc; /* the same files for every destination */
        }
    return 0;
}

int node_tls_dates(const cfg_node *n, scp_tls_dates *d, char *err, size_t len)
{
    const scp_tls tls = node_tls(n);
    return scp_tls_dates_read(&tls, d, err, len);
}

/* "2026-11-24 20:39 UTC" */
static void utc_text(int64_t t, char *buf, size_t len)
{
    struct tm tm;
    const time_t tt = (time_t)t;
    if (!gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M UTC", &tm))
        snprintf(buf, len, "%lld (Unix time)", (long long)t);
}

/* "12 days", or below two days "47 h 59 min". */
static void left_text(int64_t s, char *buf, size_t len)
{
    if (s >= 2 * 86400)
        snprintf(buf, len, "%lld days", (long long)(s / 86400));
    else
        ldct_duration_format(s * 1000, buf, len);
}

/* What a file running out means, and the words for it. */
typedef struct tls_deadline {
    const char *key, *path;
    int64_t t;
    int warn_days;
    const char *soon, *past, *then; /* "expires on", "expired on", what happens then */
} tls_deadline;

/* One line about d, when it is within its warning window of now_s or past;
 * 1 when logged. */
static int warn_one(const tls_deadline *d, int64_t now_s)
{
    if (d->t <= 0 || d->t - now_s > (int64_t)d->warn_days * 86400)
        return 0;
    char when[48], left[64];
    utc_text(d->t, when, sizeof when);
    if (d->t <= now_s) {
        log_err("TLS: %s %s %s %s: %s; install a new one and reload", d->key, d->path, d->past,
                when, d->then);
        return 1;
    }
    left_text(d->t - now_s, left, sizeof left);
    log_warn("TLS: %s %s %s %s (in %s): install a new one and reload", d->key, d->path, d->soon,
             when, left);
    return 1;
}

/* The node's certificate, revocation lists and CA, with what their dates
 * mean, into out[3]. */
static void deadlines(const cfg_node *n, const scp_tls_dates *d, tls_deadline out[3])
{
    out[0] = (tls_deadline){"tls_certificate",  n->tls_certificate, d->certificate_not_after,
                            TLS_CERT_WARN_DAYS, "expires on",       "expired on",
                            "peers refuse it"};
    out[1] = (tls_deadline){"tls_crl",
                            n->tls_crl,
                            d->crl_next_update,
                            TLS_CRL_WARN_DAYS,
                            "is due for its next update on",
                            "was due for its next update on",
                            "every peer is refused (CRL has expired)"};
    out[2] = (tls_deadline){"CA certificate",
                            d->ca_name,
                            d->ca_not_after,
                            TLS_CERT_WARN_DAYS,
                            "expires on",
                            "expired on",
                            "peers whose certificates chain to it are refused, and so is the"
                            " node's own if it does"};
}

int node_tls_warn(const cfg_node *n, const scp_tls_dates *d, int64_t now_s)
{
    tls_deadline t[3];
    deadlines(n, d, t);
    return warn_one(&t[0], now_s) + warn_one(&t[1], now_s) + warn_one(&t[2], now_s);
}

int node_tls_past(const cfg_node *n, const scp_tls_dates *d, int64_t now_s, char *out, size_t len)
{
    tls_deadline t[3];
    deadlines(n, d, t);
    for (int i = 0; i < 3; i++) {
        if (t[i].t <= 0 || t[i].t > now_s)
            continue;
        char when[48];
        utc_text(t[i].t, when, sizeof when);
        snprintf(out, len, "TLS: %s %s %s %s: %s; install a new one", t[i].key, t[i].path,
                 t[i].past, when, t[i].then);
        return 1;
    }
    return 0;
}

static void warn_gap(void *ctx, const char *text)
{
    log_warn("TLS: tls_crl %s: %s", (const char *)ctx, text);
}

int node_tls_warn_crl_gaps(const cfg_node *n)
{
    const scp_tls tls = node_tls(n);
    return scp_tls_crl_gaps(&tls, warn_gap, (void *)n->tls_crl);
}

int node_tls_warn_key_mode(const cfg_node *n)
{
    struct stat st;
    if (!*n->tls_private_key || stat(n->tls_private_key, &st) != 0)
        return 0; /* no key, or one that does not load: its own error */
    if (!(st.st_mode & (S_IRWXO | S_IWGRP)))
        return 0;
    log_warn("TLS: tls_private_key %s can be %s by %s (mode %04o): anyone who reads it can"
             " pose as this node; chmod 600 it (or 640, group of the daemon only)",
             n->tls_private_key, st.st_mode & S_IROTH ? "read" : "changed",
             st.st_mode & S_IRWXO ? "other users" : "its group", (unsigned)(st.st_mode & 07777));
    return 1;
}

int node_tls_check(const ldct_config *cfg, char *err, size_t len)
{
    const scp_tls tls = node_tls(&cfg->node);
    char why[512] = "";
    int rc = 0;
    if (cfg->node.tls_port > 0 && (rc = scp_tls_check(&tls, 1, why, sizeof why)))
        snprintf(err, len, "tls_port: %s", why);
    for (int i = 0; !rc && i < cfg->ndest; i++)
        if (cfg->dest[i].tls) {
            if ((rc = scp_tls_check(&tls, 0, why, sizeof why)))
                snprintf(err, len, "the node's TLS files (for [destination %s], tls = yes): %s",
                         cfg->dest[i].name, why);
            break; /* the same files for every destination */
        }
    return rc;
}
