/* The ldct command-line tool's subcommands that live outside main_ldct.c,
 * and what they share. Single-threaded. */
#ifndef LDCT_DAEMON_CLI_H
#define LDCT_DAEMON_CLI_H

#include "config/config.h"
#include "daemon/lockfile.h"
#include "db/db.h"

typedef struct cli_opts {
    const char *config;    /* --config FILE */
    const char *state_dir; /* --state-dir DIR (overrides the config's) */
    int json;              /* --json */
    int limit;             /* --limit N (0 = all) */
    const char *to;        /* --to DEST (retry) */
    const char *from;      /* --from DEST (retry --to: only the dead sends to DEST) */
    int all;               /* --all (release) */
    int argc;              /* positional arguments after the subcommand */
    char **argv;
} cli_opts;

/* The daemon's configuration: --config, else the embedded defaults. Says
 * why on failure (*cfg is then NULL). Free with config_free. */
int cli_config(const cli_opts *o, ldct_config **cfg);

/* The daemon's state directory, from --state-dir or the config (embedded
 * defaults without --config); prints why on failure. */
int cli_state_dir(const cli_opts *o, char *out, size_t len);

/* Whether an ldctd runs on the state directory of o (lockfile.h), and its
 * pid when it does; LDCTD_UNKNOWN when the directory cannot be told. */
ldctd_state cli_daemon_state(const cli_opts *o, long *pid);

/* Opens the daemon's database (read-only or not); never creates one: a
 * missing file is LDCT_ENOTFOUND, said once with the state directory it
 * looked in. Prints why on failure. */
int cli_open_db(const cli_opts *o, int readonly, db **d);

/* interrupted_seconds of the daemon's configuration (--config, else the
 * embedded default): what `ldct series` uses when the database holds no
 * value recorded by the running ldctd (db_node_setting_get). */
int cli_interrupted_seconds(const cli_opts *o);

/* 1 if --help or -h is among argv[1..argc-1]: the subcommand then prints
 * its usage on stdout and exits 0. */
int cli_wants_help(int argc, char **argv);

/* ldct jobs [--json] [--limit N] */
int cli_jobs(cli_opts *o);

/* ldct retry JOB */
int cli_retry(cli_opts *o);

/* ldct release SERIES_UID... | --all: ends the hold on series kept
 * receiving for a resend (after a kill, or instances refused for lack of
 * space), so they go on as soon as they are quiet. */
int cli_release(cli_opts *o);

/* ldct filter ... (argv[0] is "filter"); own option parsing. */
int cli_filter(int argc, char **argv);

/* ldct [--config FILE | --state-dir DIR] tune fdk ...: the FDK tuner
 * (gpu/fdk_tune.h) caching into <state_dir>/fdk-tune.cache; own options. */
int cli_tune(int argc, char **argv);
/* ldct phantom ... / ldct quality ... (argv[0] is the subcommand). */
int cli_phantom(int argc, char **argv);
int cli_quality(int argc, char **argv);

#endif
