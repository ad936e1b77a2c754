/* Unit tests for db/: migrations and the state transitions of series and instances. */
#include "common/err.h"
#include "common/log.h"
#include "db/db.h"
#include "db/internal.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

static char dbpath[128];

static db *open_fresh(void)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    snprintf(dbpath, sizeof dbpath, "%s/ldct.db", dir);
    db *d = NULL;
    ck_assert_int_eq(db_open(dbpath, 0, &d), 0);
    return d;
}

static db_instance_rec rec(const char *series, const char *sop, int64_t t)
{
    static char path[3][256];
    static int k;
    k = (k + 1) % 3;
    snprintf(path[k], sizeof path[k], "/spool/1.2/%s/%s.dcm", series, sop);
    return (db_instance_rec){.study_uid = "1.2",
                             .series_uid = series,
                             .sop_instance_uid = sop,
                             .sop_class_uid = "1.2.840.10008.5.1.4.1.1.2",
                             .transfer_syntax_uid = "1.2.840.10008.1.2.1",
                             .modality = "CT",
                             .path = path[k],
                             .size = 100,
                             .received_ms = t,
                             .stable_seconds = 30};
}

typedef struct {
    int n;
    char state[8][16];
    int count[8];
} listing;

static void collect(void *ctx, const db_series_row *r)
{
    listing *l = ctx;
    snprintf(l->state[l->n], sizeof l->state[0], "%s", r->state);
    l->count[l->n++] = r->instances;
}

static listing list(db *d)
{
    listing l = {0};
    ck_assert_int_eq(db_series_list(d, 0, collect, &l), 0);
    return l;
}

START_TEST(new_database_has_the_latest_schema)
{
    db *d = open_fresh();
    int v;
    ck_assert_int_eq(db_user_version(d, &v), 0);
    ck_assert_int_eq(v, db_schema_version());
    db_close(d);
    /* Opening again applies nothing and keeps the version. */
    ck_assert_int_eq(db_open(dbpath, 0, &d), 0);
    ck_assert_int_eq(db_user_version(d, &v), 0);
    ck_assert_int_eq(v, db_schema_version());
    db_close(d);
}
END_TEST

/* A fresh database whose header then says schema version `pragma`. */
static void fresh_db_of_version(const char *pragma)
{
    db_close(open_fresh());
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(dbpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, pragma, 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
}

START_TEST(newer_schema_is_refused)
{
    fresh_db_of_version("PRAGMA user_version = 999");
    db *d = NULL;
    ck_assert_int_eq(db_open(dbpath, 0, &d), LDCT_ESCHEMA);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(db_open(dbpath, 1, &d), LDCT_ESCHEMA);
}
END_TEST

/* A negative schema version (a damaged header) made the read-write open
 * (ldctd, ldct retry) run DB_MIGRATIONS[-1]: memory before the table. */
START_TEST(negative_schema_version_is_refused)
{
    fresh_db_of_version("PRAGMA user_version = -1");
    db *d = NULL;
    ck_assert_int_eq(db_open(dbpath, 0, &d), LDCT_EDB);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(db_open(dbpath, 1, &d), LDCT_EDB);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(readonly_open_of_missing_file_fails)
{
    db *d = NULL;
    ck_assert_int_ne(db_open("/tmp/ldct-no-such-dir/ldct.db", 1, &d), 0);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(resend_keeps_one_row)
{
    db *d = open_fresh();
    char old[256];
    db_instance_rec r = rec("1.2.3", "1.2.3.1", 1000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_str_eq(old, "");
    r = rec("1.2.3", "1.2.3.2", 1001);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    db_totals t;
    ck_assert_int_eq(db_totals_get(d, &t), 0);
    ck_assert_int_eq(t.instances, 2);
    ck_assert_int_eq(t.series, 1);
    listing l = list(d);
    ck_assert_int_eq(l.count[0], 2);
    ck_assert_str_eq(l.state[0], "receiving");
    db_close(d);
}
END_TEST

START_TEST(resend_into_another_series_moves_the_instance)
{
    db *d = open_fresh();
    char old[256];
    db_instance_rec r = rec("1.2.3", "1.2.3.1", 1000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    r = rec("1.2.4", "1.2.3.1", 2000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_str_eq(old, "/spool/1.2/1.2.3/1.2.3.1.dcm");
    listing l = list(d); /* newest activity first */
    ck_assert_int_eq(l.n, 2);
    ck_assert_int_eq(l.count[0], 1);
    ck_assert_int_eq(l.count[1], 0);
    char path[256];
    ck_assert_int_eq(db_instance_path(d, "1.2.3.1", path, sizeof path), 0);
    ck_assert_str_eq(path, "/spool/1.2/1.2.4/1.2.3.1.dcm");
    ck_assert_int_eq(db_instance_path(d, "9.9", path, sizeof path), LDCT_ENOTFOUND);
    db_close(d);
}
END_TEST

static int stable_calls;
static void on_stable(void *ctx, const char *uid, int n)
{
    (void)ctx;
    ck_assert_str_eq(uid, "1.2.3");
    ck_assert_int_eq(n, 1);
    stable_calls++;
}

START_TEST(series_becomes_stable_after_quiet_and_reopens)
{
    db *d = open_fresh();
    char old[256];
    db_instance_rec r = rec("1.2.3", "1.2.3.1", 100000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    stable_calls = 0;
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 29999, on_stable, NULL), 0);
    ck_assert_str_eq(list(d).state[0], "receiving");
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 30000, on_stable, NULL), 1);
    ck_assert_int_eq(stable_calls, 1);
    ck_assert_str_eq(list(d).state[0], "stable");
    /* Marking again finds nothing new. */
    ck_assert_int_eq(db_series_mark_stable(d, 200000, on_stable, NULL), 0);
    /* A late instance reopens the series. */
    r = rec("1.2.3", "1.2.3.2", 300000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_str_eq(list(d).state[0], "receiving");
    ck_assert_int_eq(list(d).count[0], 2);
    db_close(d);
}
END_TEST

/* After a restart at 500000, a series last heard of at 100000 (its
 * association cut off by the stop) waits stable_seconds from the restart. */
START_TEST(after_a_restart_a_receiving_series_waits_its_quiet_again)
{
    db *d = open_fresh();
    char old[256];
    db_instance_rec r = rec("1.2.3", "1.2.3.1", 100000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    db_series_quiet_from(d, 500000);
    ck_assert_int_eq(db_series_mark_stable(d, 500000 + 29999, on_stable, NULL), 0);
    ck_assert_str_eq(list(d).state[0], "receiving");
    ck_assert_int_eq(db_series_mark_stable(d, 500000 + 30000, on_stable, NULL), 1);
    db_close(d);
}
END_TEST

START_TEST(delivery_says_what_became_of_the_sends)
{
    char out[32];
    db_series_row r = {.sends = 0};
    db_series_delivery(&r, out, sizeof out);
    ck_assert_str_eq(out, "-");
    r = (db_series_row){.sends = 3, .sends_done = 3};
    db_series_delivery(&r, out, sizeof out);
    ck_assert_str_eq(out, "delivered");
    r = (db_series_row){.sends = 3, .sends_done = 1, .sends_sending = 1};
    db_series_delivery(&r, out, sizeof out);
    ck_assert_str_eq(out, "sending 1/3");
    r = (db_series_row){.sends = 3, .sends_done = 1}; /* the others wait for a try */
    db_series_delivery(&r, out, sizeof out);
    ck_assert_str_eq(out, "queued 1/3");
    r = (db_series_row){.sends = 3, .sends_done = 2, .sends_dead = 1};
    db_series_delivery(&r, out, sizeof out);
    ck_assert_str_eq(out, "1 dead");
}
END_TEST

/* Lines of stderr (where the log goes) while `n` failures of `sql` and one
 * of `other` run, counted by what they contain. */
static void failing_log(db *d, const char *sql, int n, const char *other, char *out, size_t len)
{
    char path[96], dir[64];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/stderr", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(db__exec(d, sql), LDCT_EDB);
    ck_assert_int_eq(db__exec(d, other), LDCT_EDB);
    dup2(saved, 2);
    close(saved);
    close(fd);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(out, 1, len - 1, f) : 0;
    out[got] = '\0';
    if (f)
        fclose(f);
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* A failure that repeats (a full disk fails every timer tick) is logged
 * once a minute, not each time; another failure still gets its line. */
START_TEST(a_repeated_failure_is_logged_once_a_minute)
{
    db *d = open_fresh();
    log_level = LOG_LVL_ERR;
    char out[4096];
    failing_log(d, "NOT SQL AT ALL", 20, "ALSO NOT SQL", out, sizeof out);
    ck_assert_msg(count_of(out, "NOT SQL AT ALL") == 1, "%s", out);
    ck_assert_msg(count_of(out, "ALSO NOT SQL") == 1, "%s", out);
    ck_assert_int_eq(count_of(out, "\n"), 2);
    db_close(d);
}
END_TEST

/* A series whose association was aborted waits the longer quiet, until
 * an instance comes from an association begun after the abort (the
 * resend); one from an association already running keeps the wait. */
START_TEST(an_interrupted_series_waits_longer_for_its_resend)
{
    db *d = open_fresh();
    char old[256];
    db_series_interrupted_wait(d, 600);
    db_instance_rec r = rec("1.2.3", "1.2.3.1", 100000);
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_int_eq(db_series_interrupted(d, "1.2.3", 100000, NULL), 0);
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 599999, NULL, NULL), 0);
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 600000, NULL, NULL), 1);
    /* Reopened by a resend, cut again at 800000. */
    r = rec("1.2.3", "1.2.3.2", 800000);
    r.assoc_started_ms = 790000;
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_int_eq(db_series_interrupted(d, "1.2.3", 800000, NULL), 0);
    /* A second association of the sender, begun before the cut: still held. */
    r = rec("1.2.3", "1.2.3.3", 810000);
    r.assoc_started_ms = 795000;
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_int_eq(db_series_mark_stable(d, 810000 + 30000, NULL, NULL), 0);
    /* The resend, begun after it: the usual 30 s apply. */
    r = rec("1.2.3", "1.2.3.4", 900000);
    r.assoc_started_ms = 900000;
    ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    ck_assert_int_eq(db_series_mark_stable(d, 900000 + 30000, NULL, NULL), 1);
    /* Only a receiving series takes the mark. */
    int marked = -1;
    ck_assert_int_eq(db_series_interrupted(d, "1.2.3", 950000, &marked), 0);
    ck_assert_int_eq(marked, 0);
    ck_assert_str_eq(list(d).state[0], "stable");
    db_close(d);
}
END_TEST

/* Refusals for lack of resources hold a series, or every receiving series
 * of the calling AE, once per association (not again for its next
 * refusal); another AE's series and a stable one stay as they are. */
START_TEST(refusals_hold_the_senders_receiving_series_once)
{
    db *d = open_fresh();
    char old[256];
    db_series_interrupted_wait(d, 600);
    const char *series[3] = {"1.2.10", "1.2.11", "1.2.12"}, *aes[3] = {"CT1", "CT1", "CT2"};
    for (int i = 0; i < 3; i++) {
        char sop[32];
        snprintf(sop, sizeof sop, "%s.1", series[i]);
        db_instance_rec r = rec(series[i], sop, 100000);
        r.calling_ae = aes[i];
        ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
    }
    int held = -1;
    ck_assert_int_eq(db_series_hold(d, NULL, "CT1", 110000, 105000, &held), 0);
    ck_assert_int_eq(held, 2);
    ck_assert_int_eq(db_series_hold(d, NULL, "CT1", 111000, 105000, &held), 0);
    ck_assert_int_eq(held, 0); /* the same association's next refusal */
    ck_assert_int_eq(db_series_hold(d, "1.2.10", NULL, 112000, 105000, &held), 0);
    ck_assert_int_eq(held, 0);
    ck_assert_int_eq(db_series_hold(d, NULL, "CT1", 120000, 115000, &held), 0);
    ck_assert_int_eq(held, 2); /* a later association: again */
    /* 30 s after the last instance only CT2's series is complete. */
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 30000, NULL, NULL), 1);
    ck_assert_int_eq(db_series_hold(d, "1.2.12", NULL, 140000, 135000, &held), 0);
    ck_assert_int_eq(held, 0); /* stable: not held any more */
    db_close(d);
}
END_TEST

/* ldct release: a held series waits only its own quiet again; one
 * series by UID, or every held one; others and stable ones untouched. */
START_TEST(a_released_series_waits_only_its_quiet)
{
    db *d = open_fresh();
    char old[256], state[16];
    db_series_interrupted_wait(d, 600);
    const char *series[3] = {"1.2.20", "1.2.21", "1.2.22"};
    for (int i = 0; i < 3; i++) {
        char sop[32];
        snprintf(sop, sizeof sop, "%s.1", series[i]);
        db_instance_rec r = rec(series[i], sop, 100000);
        ck_assert_int_eq(db_instance_put(d, &r, old, sizeof old), 0);
        ck_assert_int_eq(db_series_interrupted(d, series[i], 100000, NULL), 0);
    }
    int released = -1, marked = -1;
    ck_assert_int_eq(db_series_release(d, "1.2.20", &released), 0);
    ck_assert_int_eq(released, 1);
    ck_assert_int_eq(db_series_state(d, "1.2.20", state, sizeof state, &marked), 0);
    ck_assert_str_eq(state, "receiving");
    ck_assert_int_eq(marked, 0);
    ck_assert_int_eq(db_series_state(d, "1.2.21", state, sizeof state, &marked), 0);
    ck_assert_int_eq(marked, 1);
    ck_assert_int_eq(db_series_state(d, "9.9", state, sizeof state, &marked), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 30000, NULL, NULL), 1); /* 1.2.20 only */
    ck_assert_int_eq(db_series_release(d, "1.2.20", &released), 0);
    ck_assert_int_eq(released, 0); /* stable now */
    ck_assert_int_eq(db_series_release(d, NULL, &released), 0);
    ck_assert_int_eq(released, 2);
    ck_assert_int_eq(db_series_mark_stable(d, 100000 + 30001, NULL, NULL), 2);
    db_close(d);
}
END_TEST

/* What ldctd records for `ldct series` (its interrupted_seconds) is read
 * back through another, read-only handle; nothing recorded is
 * LDCT_ENOTFOUND, so the reader falls back to its configuration. */
START_TEST(the_daemons_settings_are_recorded_for_readers)
{
    db *d = open_fresh(), *r = NULL;
    int64_t v = -1;
    ck_assert_int_eq(db_node_setting_get(d, DB_SETTING_INTERRUPTED_SECONDS, &v), LDCT_ENOTFOUND);
    ck_assert_int_eq(db_node_setting_put(d, DB_SETTING_INTERRUPTED_SECONDS, 45, 1000), 0);
    ck_assert_int_eq(db_node_setting_put(d, DB_SETTING_INTERRUPTED_SECONDS, 120, 2000), 0);
    ck_assert_int_eq(db_open(dbpath, 1, &r), 0);
    ck_assert_int_eq(db_node_setting_get(r, DB_SETTING_INTERRUPTED_SECONDS, &v), 0);
    ck_assert_int_eq(v, 120);
    db_close(r);
    db_close(d);
}
END_TEST

/* A database of schema 7 (before node_settings and job_progress), which
 * an older ldctd may still be writing: a reader opens it, finds no
 * recorded setting and lists it; schema 6 stays refused; a writer
 * migrates it. */
START_TEST(a_schema_7_database_is_read_without_recorded_settings)
{
    db_close(open_fresh());
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(dbpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "DROP TABLE node_settings; DROP TABLE job_progress;"
                                  " ALTER TABLE jobs DROP COLUMN ran_algorithm;"
                                  " PRAGMA user_version = 7",
                                  0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(h);
    db *d = NULL;
    int64_t v;
    ck_assert_int_eq(db_open(dbpath, 1, &d), 0);
    ck_assert_int_eq(db_node_setting_get(d, DB_SETTING_INTERRUPTED_SECONDS, &v), LDCT_ENOTFOUND);
    ck_assert_int_eq(list(d).n, 0);
    db_close(d);
    ck_assert_int_eq(sqlite3_open(dbpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 6", 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
    ck_assert_int_eq(db_open(dbpath, 1, &d), LDCT_EDB);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(sqlite3_open(dbpath, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 7", 0, 0, 0), SQLITE_OK);
    sqlite3_close(h);
    ck_assert_int_eq(db_open(dbpath, 0, &d), 0);
    ck_assert_int_eq(db_node_setting_put(d, DB_SETTING_INTERRUPTED_SECONDS, 30, 1000), 0);
    ck_assert_int_eq(db_node_setting_get(d, DB_SETTING_INTERRUPTED_SECONDS, &v), 0);
    ck_assert_int_eq(v, 30);
    db_close(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("db");
    tcase_add_test(tc, new_database_has_the_latest_schema);
    tcase_add_test(tc, newer_schema_is_refused);
    tcase_add_test(tc, negative_schema_version_is_refused);
    tcase_add_test(tc, readonly_open_of_missing_file_fails);
    tcase_add_test(tc, resend_keeps_one_row);
    tcase_add_test(tc, resend_into_another_series_moves_the_instance);
    tcase_add_test(tc, series_becomes_stable_after_quiet_and_reopens);
    tcase_add_test(tc, delivery_says_what_became_of_the_sends);
    tcase_add_test(tc, after_a_restart_a_receiving_series_waits_its_quiet_again);
    tcase_add_test(tc, a_repeated_failure_is_logged_once_a_minute);
    tcase_add_test(tc, an_interrupted_series_waits_longer_for_its_resend);
    tcase_add_test(tc, refusals_hold_the_senders_receiving_series_once);
    tcase_add_test(tc, a_released_series_waits_only_its_quiet);
    tcase_add_test(tc, the_daemons_settings_are_recorded_for_readers);
    tcase_add_test(tc, a_schema_7_database_is_read_without_recorded_settings);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
