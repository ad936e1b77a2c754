/* Unit tests for pipeline/ingest: refusals with the right DIMSE status, the
 * durable placement of accepted files, and the disk-space refusal. */
#include "common/err.h"
#include "common/log.h"
#include "db/db.h"
#include "pipeline/ingest.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <unistd.h>

static char state[64];
static ingest *in;
static const scp_assoc_info ASSOC = {
    .calling_ae = "CT1", .called_ae = "LDCTNODE", .peer_host = "127.0.0.1"};

static void setup(void)
{
    log_level = LOG_LVL_ERR;
    tu_tmpdir(state, sizeof state);
    ingest_policy p = {.min_free_mb = 0, .stable_seconds = 30};
    ck_assert_int_eq(ingest_new(state, &p, &in), 0);
}

static void teardown(void)
{
    ingest_free(in);
}

/* Begins a store and writes `bytes` into the temp file it hands out. */
static void receive(char *tmp, size_t len, const char *bytes)
{
    char comment[128];
    ck_assert_uint_eq(ingest_store_begin(in, tmp, len, comment, sizeof comment), 0);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(bytes, f);
    fclose(f);
}

static scp_instance instance(const char *tmp, const char *sop)
{
    const char *ct = "1.2.840.10008.5.1.4.1.1.2";
    return (scp_instance){.req_sop_class_uid = ct,
                          .req_sop_instance_uid = sop,
                          .sop_class_uid = ct,
                          .sop_instance_uid = sop,
                          .study_uid = "1.2.3",
                          .series_uid = "1.2.3.4",
                          .modality = "CT",
                          .series_description = "",
                          .transfer_syntax_uid = "1.2.840.10008.1.2.1",
                          .file_path = tmp,
                          .file_size = 5,
                          .parsed = 1};
}

START_TEST(accepted_instance_lands_in_the_spool_with_its_row)
{
    char tmp[256], comment[128], path[512], want[512];
    receive(tmp, sizeof tmp, "first");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    snprintf(want, sizeof want, "%s/spool/1.2.3/1.2.3.4/1.2.3.4.5.dcm", state);
    ck_assert_int_eq(access(want, R_OK), 0);
    db *d;
    char dbp[128];
    ingest_db_path(state, dbp, sizeof dbp);
    ck_assert_int_eq(db_open(dbp, 1, &d), 0);
    ck_assert_int_eq(db_instance_path(d, "1.2.3.4.5", path, sizeof path), 0);
    ck_assert_str_eq(path, want);
    db_close(d);
}
END_TEST

START_TEST(resend_replaces_the_file)
{
    char tmp[256], comment[128], want[512], buf[16] = "";
    receive(tmp, sizeof tmp, "first");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0);
    receive(tmp, sizeof tmp, "second");
    i = instance(tmp, "1.2.3.4.5");
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0);
    snprintf(want, sizeof want, "%s/spool/1.2.3/1.2.3.4/1.2.3.4.5.dcm", state);
    FILE *f = fopen(want, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "second");
}
END_TEST

START_TEST(missing_uid_is_cannot_understand_and_leaves_nothing)
{
    char tmp[256], comment[128];
    receive(tmp, sizeof tmp, "x");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    i.series_uid = "";
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0xC000);
    ck_assert_ptr_nonnull(strstr(comment, "(0020,000E)"));
    ck_assert_int_eq(access(tmp, F_OK), -1);
}
END_TEST

START_TEST(unparseable_dataset_is_refused_as_such)
{
    char tmp[256], comment[128];
    receive(tmp, sizeof tmp, "x");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    i.parsed = 0;
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0xC000);
    ck_assert_ptr_nonnull(strstr(comment, "cannot be parsed"));
    ck_assert_int_eq(access(tmp, F_OK), -1);
}
END_TEST

START_TEST(path_like_uid_is_refused)
{
    char tmp[256], comment[128];
    receive(tmp, sizeof tmp, "x");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    i.study_uid = "../../etc";
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0xC000);
    ck_assert_ptr_nonnull(strstr(comment, "invalid (0020,000D)"));
}
END_TEST

START_TEST(sop_class_mismatch_is_a900)
{
    char tmp[256], comment[128];
    receive(tmp, sizeof tmp, "x");
    scp_instance i = instance(tmp, "1.2.3.4.5");
    i.req_sop_class_uid = "1.2.840.10008.5.1.4.1.1.4";
    ck_assert_uint_eq(ingest_store_end(in, &ASSOC, &i, comment, sizeof comment), 0xA900);
    ck_assert_int_eq(access(tmp, F_OK), -1);
}
END_TEST

START_TEST(low_disk_space_is_a700)
{
    ingest_policy p = {.min_free_mb = 1 << 30, .stable_seconds = 30};
    ingest_policy_set(in, &p);
    char tmp[256], comment[128];
    ck_assert_uint_eq(ingest_store_begin(in, tmp, sizeof tmp, comment, sizeof comment), 0xA700);
    ck_assert_ptr_nonnull(strstr(comment, "disk space"));
}
END_TEST

START_TEST(uid_syntax)
{
    ck_assert(ingest_uid_valid("1.2.840.10008.5.1.4.1.1.2"));
    ck_assert(!ingest_uid_valid(""));
    ck_assert(!ingest_uid_valid("1..2"));
    ck_assert(!ingest_uid_valid(".1"));
    ck_assert(!ingest_uid_valid("1.2."));
    ck_assert(!ingest_uid_valid("1.2a"));
    ck_assert(!ingest_uid_valid("1.22222222222222222222222222222222222222222222222222222222222222"
                                "2222"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ingest");
    TCase *tc = tcase_create("ingest");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, accepted_instance_lands_in_the_spool_with_its_row);
    tcase_add_test(tc, resend_replaces_the_file);
    tcase_add_test(tc, missing_uid_is_cannot_understand_and_leaves_nothing);
    tcase_add_test(tc, path_like_uid_is_refused);
    tcase_add_test(tc, unparseable_dataset_is_refused_as_such);
    tcase_add_test(tc, sop_class_mismatch_is_a900);
    tcase_add_test(tc, low_disk_space_is_a700);
    tcase_add_test(tc, uid_syntax);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
