/* Shared pieces of the ldct subcommands: where the daemon's state is and
 * opening its database. Single-threaded (the ldct process). */
#include "daemon/cli.h"

#include "common/err.h"
#include "config/config.h"
#include "pipeline/ingest.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cli_config(const cli_opts *o, ldct_config **cfg)
{
    *cfg = NULL;
    int rc = o->config ? config_load(o->config, cfg) : config_new_defaults(cfg);
    if (rc) {
        fprintf(stderr, "ldct: cannot use %s: %s (try ldct check-config %s)\n", o->config,
                ldct_strerror(rc), o->config);
        config_free(*cfg);
        *cfg = NULL;
    }
    return rc;
}

int cli_state_dir(const cli_opts *o, char *out, size_t len)
{
    if (o->state_dir) {
        snprintf(out, len, "%s", o->state_dir);
        return 0;
    }
    ldct_config *cfg;
    int rc = cli_config(o, &cfg);
    if (!rc)
        snprintf(out, len, "%s", cfg->node.state_dir);
    config_free(cfg);
    return rc;
}

ldctd_state cli_daemon_state(const cli_opts *o, long *pid)
{
    char dir[1024];
    *pid = 0;
    return cli_state_dir(o, dir, sizeof dir) == 0 ? lockfile_daemon_state(dir, pid) : LDCTD_UNKNOWN;
}

int cli_interrupted_seconds(const cli_opts *o)
{
    ldct_config *cfg;
    int s = cli_config(o, &cfg) ? 0 : cfg->node.interrupted_seconds;
    config_free(cfg);
    return s;
}

/* Whether this user may open the database at path (in the state folder
 * dir) for reading, or for writing as well: the state is the daemon
 * user's (0750, 0640), so the usual mistake is a missing sudo, and it is
 * said so rather than as a missing file or a database error. */
static int cli_may_open(const char *path, const char *dir, int readonly)
{
    const char *what = NULL;
    if (access(path, R_OK) != 0 && errno == EACCES)
        what = "read";
    else if (!readonly && (access(path, W_OK) != 0 || access(dir, W_OK) != 0) && errno == EACCES)
        what = "change";
    if (!what)
        return 1;
    fprintf(stderr,
            "ldct: cannot %s %s: permission denied (the state belongs to the user ldctd runs"
            " as: run ldct as that user, e.g. sudo -u ldct ldct ...%s)\n",
            what, path, readonly ? ", or as a member of its group" : "");
    return 0;
}

int cli_open_db(const cli_opts *o, int readonly, db **d)
{
    char dir[1024], path[1100];
    int rc = cli_state_dir(o, dir, sizeof dir);
    if (rc)
        return rc;
    ingest_db_path(dir, path, sizeof path);
    /* Say why once, not as a database error; a read-write open (ldct retry)
     * must not create an empty database where ldctd never ran either. */
    if (access(path, F_OK) != 0 && errno != EACCES) {
        fprintf(stderr,
                "ldct: cannot open %s: no such file (has ldctd run with state directory %s? "
                "choose it with --config FILE or --state-dir DIR)\n",
                path, dir);
        return LDCT_ENOTFOUND;
    }
    if (!cli_may_open(path, dir, readonly))
        return -EACCES;
    rc = db_open(path, readonly, d);
    if (rc)
        fprintf(stderr, "ldct: cannot open %s: %s\n", path, ldct_strerror(rc));
    return rc;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}
