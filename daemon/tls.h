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
 * "tls_port: ..." or "[destination NAME] tls: ..." in err. */
int node_tls_check(const ldct_config *cfg, char *err, size_t len);

#endif
