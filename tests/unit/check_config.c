/* Unit tests for config/: defaults, parsing, and errors reported with file:line. */
#include "common/err.h"
#include "common/log.h"
#include "config/config.h"
#include "tests/unit/testutil.h"

#include <check.h>

static ldct_config *load_text(const char *text, int *rc)
{
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    tu_write(dir, "t.conf", text, path, sizeof path);
    ldct_config *cfg = NULL;
    *rc = config_load(path, &cfg);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

/* True if some error message ends with ":LINE: ..." and contains `needle`. */
static int has_error(const ldct_config *cfg, int line, const char *needle)
{
    char tag[32];
    snprintf(tag, sizeof tag, ":%d: ", line);
    for (int i = 0; i < cfg->nerr && i < CFG_ERR_MAX; i++)
        if (strstr(cfg->err[i], tag) && strstr(cfg->err[i], needle))
            return 1;
    return 0;
}

START_TEST(defaults_match_the_design)
{
    ldct_config *cfg;
    ck_assert_int_eq(config_new_defaults(&cfg), 0);
    ck_assert_str_eq(cfg->node.ae_title, "LDCTNODE");
    ck_assert_int_eq(cfg->node.port, 11112);
    ck_assert_str_eq(cfg->node.state_dir, "./var/ldct");
    ck_assert_int_eq(cfg->node.max_associations, 16);
    ck_assert_int_eq(cfg->node.stable_seconds, 30);
    ck_assert_int_eq(cfg->node.allowed_calling_aes.n, 0);
    ck_assert_int_eq(cfg->node.check_called_ae, 1);
    config_free(cfg);
}
END_TEST

START_TEST(file_values_override_defaults)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "ae_title = MYNODE\n"
                                 "port = 4242\n"
                                 "allowed_calling_aes = CT1, CT2 ; inline comment\n"
                                 "allowed_hosts = 127.0.0.1\n"
                                 "stable_seconds = 5\n"
                                 "log_level = debug\n"
                                 "[destination pacs]\n"
                                 "host = localhost\n"
                                 "port = 4243\n"
                                 "ae_title = \"PACS\"\n"
                                 "[rule chest]\n"
                                 "match.modality = CT\n"
                                 "series_description_suffix = \" [DN]\"\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->node.ae_title, "MYNODE");
    ck_assert_int_eq(cfg->node.port, 4242);
    ck_assert_int_eq(cfg->node.allowed_calling_aes.n, 2);
    ck_assert_str_eq(cfg->node.allowed_calling_aes.v[1], "CT2");
    ck_assert_int_eq(cfg->node.stable_seconds, 5);
    ck_assert_int_eq(cfg->node.log_level, LOG_LVL_DEBUG);
    const cfg_destination *d = config_destination_find(cfg, "pacs");
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(d->ae_title, "PACS");
    ck_assert_int_eq(d->port, 4243);
    ck_assert_int_eq(cfg->nrule, 1);
    ck_assert_str_eq(cfg->rule[0].kv[1].value, " [DN]");
    ck_assert_int_eq(cfg->rule[0].kv[1].line, 14);
    config_free(cfg);
}
END_TEST

START_TEST(every_error_is_reported_with_its_line)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "port = 70000\n"
                                 "max_associations = many\n"
                                 "colour = blue\n"
                                 "check_called_ae = perhaps\n"
                                 "ae_title = THIS_AE_TITLE_IS_TOO_LONG\n"
                                 "[mystery]\n"
                                 "a = b\n"
                                 "[destination pacs]\n"
                                 "port = 104\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "out of range"));
    ck_assert(has_error(cfg, 3, "not an integer"));
    ck_assert(has_error(cfg, 4, "unknown option 'colour'"));
    ck_assert(has_error(cfg, 5, "expected yes or no"));
    ck_assert(has_error(cfg, 6, "AE title"));
    ck_assert(has_error(cfg, 7, "unknown section [mystery]"));
    ck_assert(has_error(cfg, 9, "needs host"));
    ck_assert(has_error(cfg, 9, "needs ae_title"));
    ck_assert_int_eq(cfg->nerr, 8);
    config_free(cfg);
}
END_TEST

START_TEST(duplicate_sections_are_errors)
{
    int rc;
    ldct_config *cfg = load_text("[destination a]\nhost = h\nae_title = A\n"
                                 "[destination a]\nhost = h\nae_title = A\n"
                                 "[rule r]\naction = route\n[rule r]\naction = route\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 4, "defined twice"));
    ck_assert(has_error(cfg, 9, "defined twice"));
    config_free(cfg);
}
END_TEST

START_TEST(syntax_error_names_the_line)
{
    int rc;
    ldct_config *cfg = load_text("[node]\nport = 1\nthis line has no equals sign\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 3, "syntax error"));
    config_free(cfg);
}
END_TEST

START_TEST(option_outside_a_section_is_an_error)
{
    int rc;
    ldct_config *cfg = load_text("port = 1\n[node]\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 1, "outside any section"));
    config_free(cfg);
}
END_TEST

START_TEST(missing_file_is_an_errno)
{
    ldct_config *cfg = (ldct_config *)1;
    ck_assert_int_lt(config_load("/nonexistent/ldct.conf", &cfg), 0);
    ck_assert_ptr_null(cfg);
}
END_TEST

START_TEST(allow_lists_match_exactly)
{
    int rc;
    ldct_config *cfg = load_text("[node]\nallowed_calling_aes = CT1\n"
                                 "allowed_hosts = 127.0.0.1, ::1\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(config_ae_allowed(&cfg->node.allowed_calling_aes, "CT1"));
    ck_assert(!config_ae_allowed(&cfg->node.allowed_calling_aes, "CT10"));
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "::ffff:127.0.0.1"));
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "::1"));
    ck_assert(!config_host_allowed(&cfg->node.allowed_hosts, "10.1.2.3"));
    cfg_ae_list empty = {0};
    ck_assert(config_ae_allowed(&empty, "ANYONE"));
    config_free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_match_the_design);
    tcase_add_test(tc, file_values_override_defaults);
    tcase_add_test(tc, every_error_is_reported_with_its_line);
    tcase_add_test(tc, duplicate_sections_are_errors);
    tcase_add_test(tc, syntax_error_names_the_line);
    tcase_add_test(tc, option_outside_a_section_is_an_error);
    tcase_add_test(tc, missing_file_is_an_errno);
    tcase_add_test(tc, allow_lists_match_exactly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
