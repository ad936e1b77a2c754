/* tls: the node's TLS keys as the DICOM bridge takes them, and the check
 * that their files load, shared by ldctd (at start) and ldct check-config.
 * Pure functions of the configuration; any thread may call them.
 */
#ifndef LDCT_DAEMON_TLS_H
#define LDCT_DAEMON_TLS_H

#include <stddef.h>

#include "config/config.h"
#include "scp/scp.h"

/* The node's tls_ keys (the strings point into n). */
scp_tls node_tls(const cfg_node *n);

/* Loads the files the configuration uses: the listener's when tls_port is
 * set, a sender's when a destination has tls = yes. 0, or an error with
 * "tls_port: ..." or "the node's TLS files (for [destination NAME], tls =
 * yes): ..." in err (a destination uses the node's files). */
int node_tls_check(const ldct_config *cfg, char *err, size_t len);

/* The senders' TLS setup for cfg (its files read now): *out NULL when no
 * destination has tls = yes. 0, or an error with "[destination NAME] tls:
 * ..." in err. */
int node_tls_sender(const ldct_config *cfg, scp_tls_ctx **out, char *err, size_t len);

/* Warnings start this long before the node's certificate runs out and
 * before the next update of a revocation list in tls_crl. */
#define TLS_CERT_WARN_DAYS 30
#define TLS_CRL_WARN_DAYS 3

/* When the node's certificate and revocation lists run out (zeros for a
 * key not set); 0, or an error with the file in err. */
int node_tls_dates(const cfg_node *n, scp_tls_dates *d, char *err, size_t len);

/* Logs a warning for each date of d within its warning window and an error
 * for each one past (naming the key, the file and the date, and what to
 * do), as of now_s (Unix seconds). Returns how many lines it logged. */
int node_tls_warn(const cfg_node *n, const scp_tls_dates *d, int64_t now_s);

/* 1 when a file of d is past its date at now_s (a certificate expired, a
 * revocation list overdue: peers are then refused), with the first such
 * as text in out; else 0. */
int node_tls_past(const cfg_node *n, const scp_tls_dates *d, int64_t now_s, char *out, size_t len);

/* Logs a warning for each CA of tls_ca_certificates without a list in
 * tls_crl, and for each list there whose CA is not (scp_tls_crl_gaps).
 * Returns how many lines it logged. */
int node_tls_warn_crl_gaps(const cfg_node *n);

/* Logs a warning when tls_private_key is set and other users may read or
 * write it, or its group may write it (a group that may read it is the
 * usual ssl-cert arrangement and is left alone). Returns 1 when logged. */
int node_tls_warn_key_mode(const cfg_node *n);

#endif
