/* The node's TLS keys for the DICOM bridge and the check of their files;
 * see tls.h. */
#include "daemon/tls.h"

#include <stdio.h>

scp_tls node_tls(const cfg_node *n)
{
    return (scp_tls){.certificate = n->tls_certificate,
                     .private_key = n->tls_private_key,
                     .ca_file = n->tls_ca_certificates,
                     .crl_file = n->tls_crl,
                     .require_peer = n->tls_require_client_certificate,
                     .legacy = n->tls_profile == CFG_TLS_BCP195};
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
                snprintf(err, len, "[destination %s] tls: %s", cfg->dest[i].name, why);
            break; /* the same files for every destination */
        }
    return rc;
}
