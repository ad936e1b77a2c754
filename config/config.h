/* config: the daemon's configuration, its defaults and validation.
 *
 * The INI file (parsed with inih) has a [node] section, [destination NAME]
 * sections and [rule NAME] sections. Every option lives in one table
 * (config.c) with its type, bounds, default and target field; defaults are
 * applied by parsing the default text through the same setter, so embedded
 * defaults and file values are checked the same way.
 *
 * A config is plain data: load it on one thread, then share it read-only
 * (the daemon swaps whole configs on SIGHUP). Errors are collected, each as
 * "FILE:LINE: message", so `ldct check-config` can explain all of them.
 */
#ifndef LDCT_CONFIG_H
#define LDCT_CONFIG_H

#include <stddef.h>

#define CFG_AE_MAX 16    /* DICOM AE titles are at most 16 characters */
#define CFG_LIST_MAX 64  /* entries in an allow list */
#define CFG_HOST_MAX 255 /* a host name or address */
#define CFG_PATH_MAX 1024
#define CFG_NAME_MAX 64 /* section names */
#define CFG_DEST_MAX 32
#define CFG_RULE_MAX 128
#define CFG_ERR_MAX 64 /* errors kept; the count goes on */

typedef struct cfg_ae_list {
    int n;
    char v[CFG_LIST_MAX][CFG_AE_MAX + 1];
} cfg_ae_list;

typedef struct cfg_host_list {
    int n;
    char v[CFG_LIST_MAX][CFG_HOST_MAX + 1];
} cfg_host_list;

typedef struct cfg_node {
    char ae_title[CFG_AE_MAX + 1];
    int port;
    char state_dir[CFG_PATH_MAX];
    int check_called_ae;             /* refuse associations to another AE title */
    cfg_ae_list allowed_calling_aes; /* empty = anyone */
    cfg_host_list allowed_hosts;     /* empty = anyone; numeric addresses */
    int max_associations;
    int acse_timeout;  /* seconds */
    int dimse_timeout; /* seconds */
    int max_pdu;       /* bytes */
    int min_free_mb;   /* refuse C-STOREs (0xA700) below this free space */
    int stable_seconds;
    int shutdown_grace_seconds;
    int log_level; /* LOG_LVL_* */
} cfg_node;

typedef struct cfg_destination {
    char name[CFG_NAME_MAX + 1];
    int line;
    char host[CFG_HOST_MAX + 1];
    int port;
    char ae_title[CFG_AE_MAX + 1];
} cfg_destination;

typedef struct cfg_rule_kv {
    char key[64];
    char value[256];
    int line;
} cfg_rule_kv;

/* Rules are kept as ordered key/value pairs here; the pipeline interprets
 * them (pipeline/rules). */
typedef struct cfg_rule {
    char name[CFG_NAME_MAX + 1];
    int line;
    int nkv;
    cfg_rule_kv kv[48];
} cfg_rule;

typedef struct ldct_config {
    char path[CFG_PATH_MAX]; /* "" when running on embedded defaults */
    cfg_node node;
    int ndest;
    cfg_destination dest[CFG_DEST_MAX];
    int nrule;
    cfg_rule rule[CFG_RULE_MAX];
    int nerr; /* number of errors found (may exceed CFG_ERR_MAX) */
    char err[CFG_ERR_MAX][256];
} ldct_config;

/* Allocates a config holding the embedded defaults. Free with config_free. */
int config_new_defaults(ldct_config **out);

/* Loads `path` over the defaults. Returns 0, or LDCT_EINVAL_CONFIG with
 * (*out)->nerr > 0 and the messages in (*out)->err (the config is still
 * returned so the caller can print them), or -errno if the file cannot be
 * read (then *out is NULL). Free with config_free. */
int config_load(const char *path, ldct_config **out);

/* Frees a config; NULL is a no-op. */
void config_free(ldct_config *cfg);

/* 1 if `ae` is allowed by `list` (an empty list allows everyone). */
int config_ae_allowed(const cfg_ae_list *list, const char *ae);

/* 1 if numeric address `host` is allowed by `list` (empty allows all). */
int config_host_allowed(const cfg_host_list *list, const char *host);

/* Finds a destination by name; NULL if absent. */
const cfg_destination *config_destination_find(const ldct_config *cfg, const char *name);

/* Writes every option of the [node] section with its current value, one
 * "name = value" per line, into f (a FILE *). For `ldct check-config`. */
void config_node_print(const ldct_config *cfg, void *f);

#endif
