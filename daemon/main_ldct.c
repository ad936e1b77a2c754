/* ldct: the command-line tool for administrators. Reads the daemon's
 * database read-only (status, series), checks configuration files, and
 * runs the compute engine's benchmarks (`ldct bench`, gpu/bench.c). Subcommands are dispatched from
 * two tables (those that use the global options, those that parse their
 * own); each lives in a short function below or in its own module. */
#include "common/clock.h"
#include "common/err.h"
#include "common/json.h"
#include "common/log.h"
#include "config/config.h"
#include "daemon/cli.h"
#include "daemon/status.h"
#include "daemon/tls.h"
#include "daemon/version.h"
#include "db/db.h"
#include "db/queue.h"
#include "gpu/bench.h"
#include "pipeline/ingest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f, "usage: ldct [--config FILE | --state-dir DIR] COMMAND [ARGS]\n"
           "  --config FILE, --state-dir DIR: where ldctd keeps its database (default\n"
           "  ./var/ldct, as ldctd without --config; under systemd use\n"
           "  --config /etc/ldct/ldctd.conf). --limit N: the newest N (default all).\n"
           "  Exit status: 0 done, 1 failed, 2 usage error.\n"
           "commands:\n"
           "  status [--json]        whether ldctd runs, and the totals of its queue\n"
           "  series [--json] [--limit N]  received series, newest first: counts, state, delivery\n"
           "  jobs [--json] [--limit N]  jobs with their sends, attempts, errors and times,\n"
           "                         and how far running ones are\n"
           "  retry JOB [--to DEST [--from OLD]] [--json]  requeue a failed job and its\n"
           "                         dead sends (one to DEST instead, e.g. after renaming a\n"
           "                         destination; --from: the one to OLD)\n"
           "  release SERIES_UID... | --all [--json]  end the hold on series kept for a\n"
           "                         resend (receiving*): they go on once quiet\n"
           "  filter --algo A --in DIR --out DIR [OPTIONS]  process a folder offline\n"
           "                         (ldct filter --help)\n"
           "  phantom --out DIR [OPTIONS]  low-dose CT simulator (ldct phantom --help)\n"
           "  quality --test DIR --ref DIR [--json] [--png FILE]  image quality vs truth\n"
           "  check-config FILE [--json]  validate a configuration file, every error\n"
           "                         with file:line\n"
           "  bench ALGO [OPTIONS]   benchmark a compute algorithm (ldct bench --help)\n"
           "  tune fdk [OPTIONS]     tune the FDK backprojector on this GPU; the daemon\n"
           "                         uses the result (ldct tune fdk --help)\n"
           "  version [--json]       print the version (also ldct --version)\n"
           "Commands with their own options (filter, phantom, quality, bench, tune)\n"
           "take them after their name.\n");
}

/* One line per running job, "running:     job 12 nlm3d on worker-0/gpu:0 for
 * 3 min 5 s, filtering 45%, ...", and how many more run than are listed.
 * After a kill no job runs: the lines say "cut off" instead. */
static void print_running(const status_snapshot *st)
{
    const char *label = st->daemon == LDCTD_KILLED ? "cut off:    " : "running:    ";
    int64_t now = ldct_now_ms();
    for (int i = 0; i < st->nrunning; i++) {
        const status_job *j = &st->running[i];
        char run[48], progress[160];
        ldct_duration_format(now > j->started_ms ? now - j->started_ms : 0, run, sizeof run);
        status_progress_text(j->stage, j->fraction, j->remaining_ms, j->updated_ms, now, progress,
                             sizeof progress);
        if (st->daemon == LDCTD_KILLED) /* no "for": it does not run on */
            printf("%s job %lld %s on %s%s%s\n", label, (long long)j->id, j->algorithm, j->worker,
                   progress[0] ? ", " : "", progress);
        else
            printf("%s job %lld %s on %s for %s%s%s\n", label, (long long)j->id, j->algorithm,
                   j->worker, run, progress[0] ? ", " : "", progress);
    }
    if (st->nrunning == STATUS_MAX_RUNNING && st->q.jobs_running > st->nrunning)
        printf("%s %lld more (ldct jobs lists them)\n", label,
               (long long)(st->q.jobs_running - st->nrunning));
}

static void print_daemon_state(const status_snapshot *st)
{
    switch (st->daemon) {
    case LDCTD_RUNNING:
        printf("ldctd:       running (pid %ld)\n", st->daemon_pid);
        break;
    case LDCTD_STOPPED:
        printf("ldctd:       not running (it stopped cleanly)\n");
        break;
    case LDCTD_KILLED:
        printf("ldctd:       not running: its last run was killed or crashed; what it had in hand"
               " goes on at the next start\n");
        break;
    default:
        printf("ldctd:       unknown (ldctd.lock or /proc/locks cannot be read)\n");
    }
}

static int cmd_status(cli_opts *o)
{
    db *d;
    if (cli_open_db(o, 1, &d))
        return 1;
    status_snapshot st;
    int rc = status_read(d, 1, &st);
    db_close(d);
    if (rc)
        return 1;
    st.daemon = cli_daemon_state(o, &st.daemon_pid);
    if (o->json) {
        status_write_json(stdout, &st);
        return 0;
    }
    const db_totals t = st.t;
    const db_queue_totals q = st.q;
    char last[32];
    ldct_time_format(t.last_received_ms, last, sizeof last);
    print_daemon_state(&st);
    printf("series:      %lld (", (long long)t.series);
    for (int i = 0; i < DB_SERIES_NSTATES; i++)
        printf("%s%lld %s", i ? ", " : "", (long long)t.by_state[i], db_series_states[i]);
    printf(")\n");
    printf("instances:   %lld (%.1f MiB)\n", (long long)t.instances,
           (double)t.bytes / (1024.0 * 1024.0));
    printf("last received: %s\n", last);
    printf("jobs:        %lld pending, %lld running, %lld done, %lld failed\n",
           (long long)q.jobs_pending, (long long)q.jobs_running, (long long)q.jobs_done,
           (long long)q.jobs_failed);
    /* After a kill nothing sends: what it was sending waits for the next start. */
    const char *sending = st.daemon == LDCTD_KILLED ? "cut off" : "sending";
    printf("sends:       %lld pending, %lld %s, %lld done, %lld dead\n", (long long)q.sends_pending,
           (long long)q.sends_sending, sending, (long long)q.sends_done, (long long)q.sends_dead);
    for (int i = 0; i < st.ndest; i++)
        printf("  to %s: %lld queued, %lld retrying, %lld %s, %lld dead\n", st.dest[i].destination,
               (long long)st.dest[i].queued, (long long)st.dest[i].retrying,
               (long long)st.dest[i].sending, sending, (long long)st.dest[i].dead);
    print_running(&st);
    return 0;
}

/* print_series_text's context: what its footnotes need. */
typedef struct series_list_ctx {
    int first;  /* JSON: nothing listed yet */
    int held;   /* a held series was listed */
    int killed; /* no ldctd runs and the last one was killed */
} series_list_ctx;

/* db_series_delivery's text; "cut off D/N" for "sending D/N" after a kill. */
static void series_delivery_text(const db_series_row *r, int killed, char *out, size_t len)
{
    if (killed && r->sends_sending > 0 && r->sends_dead == 0)
        snprintf(out, len, "cut off %d/%d", r->sends_done, r->sends);
    else
        db_series_delivery(r, out, len);
}

static void print_series_json(void *ctx, const db_series_row *r)
{
    series_list_ctx *c = ctx;
    printf("%s{\"id\":%lld,\"study_uid\":", c->first ? "" : ",\n", (long long)r->id);
    json_write_string(stdout, r->study_uid);
    printf(",\"series_uid\":");
    json_write_string(stdout, r->series_uid);
    printf(",\"modality\":");
    json_write_string(stdout, r->modality);
    printf(",\"calling_ae\":");
    json_write_string(stdout, r->calling_ae);
    char delivery[32];
    series_delivery_text(r, c->killed, delivery, sizeof delivery);
    printf(",\"state\":\"%s\",\"held_for_resend\":%s,\"instances\":%d,"
           "\"first_received_ms\":%lld,\"last_received_ms\":%lld,\"stable_ms\":%lld,"
           "\"delivery\":\"%s\",\"sends\":{\"total\":%d,\"done\":%d,\"dead\":%d,\"sending\":%d}}",
           r->state, r->held ? "true" : "false", r->instances, (long long)r->first_received_ms,
           (long long)r->last_received_ms, (long long)r->stable_ms, delivery, r->sends,
           r->sends_done, r->sends_dead, r->sends_sending);
    c->first = 0;
}

/* ctx: int, set when a held series was listed (the footnote). */
static void print_series_text(void *ctx, const db_series_row *r)
{
    series_list_ctx *c = ctx;
    char first[32], last[32], delivery[32], state[24];
    ldct_time_format(r->first_received_ms, first, sizeof first);
    ldct_time_format(r->last_received_ms, last, sizeof last);
    series_delivery_text(r, c->killed, delivery, sizeof delivery);
    snprintf(state, sizeof state, "%s%s", r->state, r->held ? "*" : "");
    if (r->held)
        c->held = 1;
    printf("%-64s %-4s %-16s %-10s %-12s %6d  %s  %s\n", r->series_uid, r->modality, r->calling_ae,
           state, delivery, r->instances, first, last);
}

/* The daemon's interrupted_seconds as it recorded it in its database;
 * from the configuration (--config, else the embedded default) only for a
 * database of an older ldctd, which records none. */
static int held_after(const cli_opts *o, db *d)
{
    int64_t s;
    return db_node_setting_get(d, DB_SETTING_INTERRUPTED_SECONDS, &s) ? cli_interrupted_seconds(o)
                                                                      : (int)s;
}

static int cmd_series(cli_opts *o)
{
    db *d;
    if (cli_open_db(o, 1, &d))
        return 1;
    int rc;
    long pid;
    series_list_ctx c = {1, 0, cli_daemon_state(o, &pid) == LDCTD_KILLED};
    db_series_interrupted_wait(d, held_after(o, d)); /* what "held" means */
    if (o->json) {
        printf("[");
        rc = db_series_list(d, o->limit, print_series_json, &c);
        printf("]\n");
    } else {
        printf("%-64s %-4s %-16s %-10s %-12s %6s  %-19s  %s\n", "SERIES UID", "MOD", "FROM AE",
               "STATE", "DELIVERY", "COUNT", "FIRST RECEIVED", "LAST RECEIVED");
        rc = db_series_list(d, o->limit, print_series_text, &c);
        if (c.held)
            printf("* held for the sender's resend: its association was cut off or had instances"
                   " refused for lack of resources; it counts as complete after"
                   " interrupted_seconds of quiet\n");
    }
    db_close(d);
    return rc ? 1 : 0;
}

/* check-config's warning for a destination no rule sends to (a spare one
 * for `ldct retry --to`, or a rule's list that misses it): 0 when none. */
static int unused_destination_text(const char *file, const ldct_config *cfg, int i, char *out,
                                   size_t len)
{
    const cfg_destination *d = &cfg->dest[i];
    if (config_destination_used(cfg, d->name))
        return 0;
    snprintf(out, len,
             "%s:%d: warning: no rule sends to destination '%s' (only ldct retry --to"
             " %s uses it)",
             file, d->line, d->name, d->name);
    return 1;
}

/* check-config --json: {"file", "ok", "errors": [...], "more_errors",
 * "warnings": [...], "destinations", "rules"}; the errors and warnings are
 * the lines the text form prints (file:line: what is wrong). */
static void check_config_json(const char *file, const ldct_config *cfg, const char *read_error,
                              const char *tls_error)
{
    const int nerr = cfg ? cfg->nerr : 0, ok = cfg && nerr == 0 && !tls_error[0];
    printf("{\"file\":");
    json_write_string(stdout, file);
    printf(",\"ok\":%s,\"errors\":[", ok ? "true" : "false");
    int n = 0;
    char line[700];
    if (read_error) {
        snprintf(line, sizeof line, "%s: cannot read: %s", file, read_error);
        json_write_string(stdout, line), n++;
    }
    if (tls_error[0]) {
        snprintf(line, sizeof line, "%s: %s", file, tls_error);
        json_write_string(stdout, line), n++;
    }
    for (int i = 0; cfg && i < nerr && i < CFG_ERR_MAX; i++, n++) {
        printf("%s", n ? "," : "");
        json_write_string(stdout, cfg->err[i]);
    }
    printf("],\"more_errors\":%d,\"warnings\":[", nerr > CFG_ERR_MAX ? nerr - CFG_ERR_MAX : 0);
    for (int i = 0, w = 0; cfg && i < cfg->ndest; i++)
        if (unused_destination_text(file, cfg, i, line, sizeof line)) {
            printf("%s", w++ ? "," : "");
            json_write_string(stdout, line);
        }
    printf("],\"destinations\":%d,\"rules\":%d}\n", cfg ? cfg->ndest : 0, cfg ? cfg->nrule : 0);
}

static int cmd_check_config(cli_opts *o)
{
    if (o->argc != 1) {
        fprintf(stderr, "usage: ldct check-config FILE [--json]\n");
        return 2;
    }
    ldct_config *cfg = NULL;
    int rc = config_load(o->argv[0], &cfg);
    if (!cfg && o->json)
        check_config_json(o->argv[0], NULL, ldct_strerror(rc), "");
    if (!cfg) {
        if (!o->json)
            fprintf(stderr, "%s: cannot read: %s\n", o->argv[0], ldct_strerror(rc));
        return 1;
    }
    char tls[600] = "";
    int tls_bad = cfg->nerr == 0 && node_tls_check(cfg, tls, sizeof tls) != 0;
    scp_tls_dates dates;
    /* Files that load but are past their date refuse every peer: an error
     * here, so that `check-config && systemctl reload` stops. */
    if (cfg->nerr == 0 && !tls_bad && node_tls_dates(&cfg->node, &dates, tls, sizeof tls) == 0)
        tls_bad = node_tls_past(&cfg->node, &dates, ldct_now_ms() / 1000, tls, sizeof tls);
    else if (!tls_bad)
        tls[0] = '\0';
    if (o->json) {
        check_config_json(o->argv[0], cfg, NULL, tls_bad ? tls : "");
        config_free(cfg);
        return rc || tls_bad ? 1 : 0;
    }
    if (tls_bad)
        fprintf(stderr, "%s: %s\n", o->argv[0], tls);
    for (int i = 0; i < cfg->nerr && i < CFG_ERR_MAX; i++)
        fprintf(stderr, "%s\n", cfg->err[i]);
    if (cfg->nerr > CFG_ERR_MAX)
        fprintf(stderr, "... and %d more error(s)\n", cfg->nerr - CFG_ERR_MAX);
    if (cfg->nerr == 0 && !tls_bad) {
        printf("%s: OK (%d destination(s), %d rule(s))\n", o->argv[0], cfg->ndest, cfg->nrule);
        config_node_print(cfg, stdout);
        config_rules_print(cfg, stdout);
        for (int i = 0; i < cfg->ndest; i++)
            if (unused_destination_text(o->argv[0], cfg, i, tls, sizeof tls))
                fprintf(stderr, "%s\n", tls);
        scp_tls_dates d;
        if (node_tls_dates(&cfg->node, &d, tls, sizeof tls) == 0)
            node_tls_warn(&cfg->node, &d, ldct_now_ms() / 1000); /* near: logged */
        node_tls_warn_crl_gaps(&cfg->node);
        node_tls_warn_key_mode(&cfg->node);
    } else {
        fprintf(stderr, "%s: %d error(s)\n", o->argv[0], cfg->nerr + tls_bad);
    }
    config_free(cfg);
    return rc || tls_bad ? 1 : 0;
}

static int cmd_version(cli_opts *o)
{
    if (o->json)
        printf("{\"version\":\"%s\",\"database_schema\":%d}\n", LDCT_VERSION, db_schema_version());
    else
        printf("ldct %s (database schema %d)\n", LDCT_VERSION, db_schema_version());
    return 0;
}

enum { MAX_POSITIONAL = 64, MAX_LIMIT = 1000000 };

/* max_args: the positional arguments a command takes at most (retry and
 * check-config check their own); more is a usage error (exit 2). */
static const struct {
    const char *name;
    int (*run)(cli_opts *o);
    int max_args;
} COMMANDS[] = {
    {"status", cmd_status, 0},
    {"series", cmd_series, 0},
    {"jobs", cli_jobs, 0},
    {"retry", cli_retry, 1},
    {"release", cli_release, MAX_POSITIONAL},
    {"check-config", cmd_check_config, 1},
    {"version", cmd_version, 0},
};

static int run_command(size_t i, cli_opts *o)
{
    if ((o->to || o->from) && strcmp(COMMANDS[i].name, "retry") != 0) {
        fprintf(stderr, "ldct %s: --%s is an option of retry\n", COMMANDS[i].name,
                o->to ? "to" : "from");
        return 2;
    }
    if (o->all && strcmp(COMMANDS[i].name, "release") != 0) {
        fprintf(stderr, "ldct %s: --all is an option of release\n", COMMANDS[i].name);
        return 2;
    }
    if (o->argc > COMMANDS[i].max_args) {
        fprintf(stderr, "ldct %s: unexpected argument '%s'\n", COMMANDS[i].name,
                o->argv[COMMANDS[i].max_args]);
        usage(stderr);
        return 2;
    }
    return COMMANDS[i].run(o);
}

/* --limit's value into o->limit; 0, or -1 after saying why. */
static int parse_limit(const char *v, cli_opts *o)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*end || end == v || errno || n < 0 || n > MAX_LIMIT) {
        fprintf(stderr, "ldct: --limit %s: expected a count from 0 (all) to %d\n", v, MAX_LIMIT);
        return -1;
    }
    o->limit = (int)n;
    return 0;
}

/* 1 when a is a global option that takes a value. */
static int takes_value(const char *a)
{
    static const char *const VALUED[] = {"--config", "--state-dir", "--limit", "--to", "--from"};
    for (size_t k = 0; k < sizeof VALUED / sizeof VALUED[0]; k++)
        if (!strcmp(a, VALUED[k]))
            return 1;
    return 0;
}

/* One option that takes a value (argv[*i], its value next); 1 when a is
 * not one of them, 0 when taken, -1 after saying why. */
static int parse_valued(int argc, char **argv, int *i, cli_opts *o)
{
    const char *a = argv[*i];
    if (!takes_value(a))
        return 1;
    const char **slot = !strcmp(a, "--config")      ? &o->config
                        : !strcmp(a, "--state-dir") ? &o->state_dir
                        : !strcmp(a, "--to")        ? &o->to
                        : !strcmp(a, "--from")      ? &o->from
                                                    : NULL; /* --limit */
    if (*i + 1 >= argc) {
        fprintf(stderr, "ldct: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!slot)
        return parse_limit(v, o);
    *slot = v;
    return 0;
}

/* Splits global options from the subcommand's positional arguments. */
static int parse_global(int argc, char **argv, cli_opts *o, const char **cmd)
{
    static char *pos[MAX_POSITIONAL];
    *cmd = NULL;
    o->argv = pos;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = parse_valued(argc, argv, &i, o);
        if (rc <= 0) {
            if (rc < 0)
                return -1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--all")) {
            o->all = 1;
        } else if (!*cmd && !strcmp(a, "--version")) {
            *cmd = "version";
        } else if (!*cmd && a[0] != '-') {
            *cmd = a;
        } else if (*cmd && a[0] != '-' && o->argc < MAX_POSITIONAL) {
            pos[o->argc++] = argv[i];
        } else if (a[0] != '-') {
            fprintf(stderr, "ldct: too many arguments (at most %d)\n", MAX_POSITIONAL);
            return -1;
        } else {
            fprintf(stderr, "ldct: unknown option '%s'\n", a);
            return -1;
        }
    }
    return 0;
}

/* Commands that parse their own options, which follow their name. db: the
 * command takes --config / --state-dir before its name (tune's cache lives
 * in the state directory); json: it has --json. */
typedef struct standalone {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name; NULL: tune */
    int db, json;
} standalone;

static const standalone STANDALONE[] = {
    {"bench", gpu_bench_main, 0, 1}, {"filter", cli_filter, 0, 0}, {"phantom", cli_phantom, 0, 0},
    {"quality", cli_quality, 0, 1},  {"tune", NULL, 1, 1},
};

/* The index of the command's name: past the global options and their values. */
static int command_index(int argc, char **argv)
{
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        int valued = takes_value(argv[i]);
        if (!valued && strcmp(argv[i], "--json") != 0)
            break;
        i += valued ? 2 : 1;
    }
    return i;
}

/* Runs a standalone command named at argv[first]: a --json before its name
 * moves after it; --config / --state-dir stay for tune; any other global
 * option there is a usage error (exit 2), said as such. */
static int run_standalone(const standalone *c, int argc, char **argv, int first)
{
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args)
        return fprintf(stderr, "ldct: out of memory\n"), 1;
    int n = 0, json = 0, rc = 2;
    args[n++] = argv[0];
    for (int i = 1; i < first; i++) {
        int where = !strcmp(argv[i], "--config") || !strcmp(argv[i], "--state-dir");
        if (!strcmp(argv[i], "--json") && c->json) {
            json = 1;
        } else if (where && c->db) {
            args[n++] = argv[i];
            args[n++] = argv[++i];
        } else {
            fprintf(
                stderr,
                "ldct: %s is not an option of %s; its options follow its name (ldct %s --help)\n",
                argv[i], c->name, c->name);
            goto done;
        }
    }
    const int name = n;
    for (int i = first; i < argc; i++)
        args[n++] = argv[i];
    if (json)
        args[n++] = "--json";
    rc = c->run ? c->run(n - name, args + name) : cli_tune(n, args); /* tune: the options too */
done:
    free(args);
    return rc;
}

int main(int argc, char **argv)
{
    log_level = LOG_LVL_WARNING;
    const int first = command_index(argc, argv);
    for (size_t i = 0; first < argc && i < sizeof STANDALONE / sizeof STANDALONE[0]; i++)
        if (!strcmp(argv[first], STANDALONE[i].name))
            return run_standalone(&STANDALONE[i], argc, argv, first);
    if (cli_wants_help(argc, argv)) { /* the other commands' usage is this one */
        usage(stdout);
        return 0;
    }
    cli_opts o = {0};
    const char *cmd;
    if (parse_global(argc, argv, &o, &cmd)) { /* said what is wrong */
        fprintf(stderr, "ldct --help lists the commands and their options\n");
        return 2;
    }
    if (!cmd) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(cmd, COMMANDS[i].name))
            return run_command(i, &o);
    fprintf(stderr, "ldct: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
