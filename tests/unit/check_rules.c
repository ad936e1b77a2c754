/* Unit tests for pipeline/rules: first match by priority, wildcards,
 * ranges with absent values, and what `auto` picks. */
#include "common/log.h"
#include "pipeline/rules.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <math.h>

static ldct_config *cfg;

static void setup(void)
{
    log_level = LOG_LVL_ERR;
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    tu_write(dir, "r.conf",
             "[rule thin-lowdose]\n"
             "match.modality = CT\n"
             "match.series_description = *low*dose*\n"
             "match.slice_thickness = ..2\n"
             "match.calling_ae = CT?\n"
             "priority = 10\n"
             "[rule any-lowdose]\n"
             "match.series_description = *LOW*DOSE*\n"
             "algorithm = nlm2d\n"
             "[rule high-kv]\n"
             "match.kvp = 130..\n"
             "action = route\n"
             "destinations = pacs\n"
             "priority = 5\n"
             "[destination pacs]\n"
             "host = 127.0.0.1\n"
             "ae_title = PACS\n",
             path, sizeof path);
    ck_assert_int_eq(config_load(path, &cfg), 0);
}

static void teardown(void)
{
    config_free(cfg);
}

static rule_series series(const char *descr, double thickness, double kvp)
{
    return (rule_series){.modality = "CT",
                         .calling_ae = "CT1",
                         .called_ae = "LDCTNODE",
                         .series_description = descr,
                         .protocol_name = "",
                         .body_part_examined = "",
                         .manufacturer = "",
                         .slice_thickness = thickness,
                         .kvp = kvp,
                         .ctdivol = NAN,
                         .exposure = NAN};
}

START_TEST(highest_priority_match_wins)
{
    rule_series s = series("Chest LOW DOSE", 1.0, 140);
    ck_assert_str_eq(rules_match(cfg, &s)->name, "thin-lowdose");
}
END_TEST

START_TEST(a_failed_condition_falls_through_to_the_next_rule)
{
    rule_series s = series("Chest LOW DOSE", 5.0, 140); /* too thick for the first */
    ck_assert_str_eq(rules_match(cfg, &s)->name, "high-kv");
    s.kvp = 120;
    ck_assert_str_eq(rules_match(cfg, &s)->name, "any-lowdose");
    s.calling_ae = "MR1";
    s.slice_thickness = 1.0;
    ck_assert_str_eq(rules_match(cfg, &s)->name, "any-lowdose");
}
END_TEST

START_TEST(absent_value_never_satisfies_a_range)
{
    rule_series s = series("Abdomen", 1.0, NAN);
    ck_assert_ptr_null(rules_match(cfg, &s));
    s = series("chest low dose", NAN, NAN);
    ck_assert_str_eq(rules_match(cfg, &s)->name, "any-lowdose");
}
END_TEST

/* A localizer (or colour or non-image series) is skipped by the rules that
 * process; a route rule still takes it. */
START_TEST(processing_rules_skip_a_series_that_cannot_be_processed)
{
    rule_series s = series("Chest LOW DOSE", 1.0, 120);
    s.not_processable = "a localizer (image type ORIGINAL\\PRIMARY\\LOCALIZER)";
    ck_assert_ptr_null(rules_match(cfg, &s));
    s.kvp = 140;
    ck_assert_str_eq(rules_match(cfg, &s)->name, "high-kv");
    s.not_processable = NULL;
    ck_assert_str_eq(rules_match(cfg, &s)->name, "thin-lowdose");
}
END_TEST

START_TEST(image_type_matches_on_all_its_values)
{
    char dir[64], path[128];
    ldct_config *c = NULL;
    tu_tmpdir(dir, sizeof dir);
    tu_write(dir, "t.conf",
             "[rule axial]\nmatch.image_type = *\\AXIAL*\n"
             "[rule forward]\naction = both\ndestinations = pacs\n"
             "[destination pacs]\nhost = 127.0.0.1\nae_title = PACS\n",
             path, sizeof path);
    ck_assert_int_eq(config_load(path, &c), 0);
    rule_series s = series("Chest", 1.0, 120);
    s.image_type = "ORIGINAL\\PRIMARY\\AXIAL";
    ck_assert_str_eq(rules_match(c, &s)->name, "axial");
    s.image_type = "ORIGINAL\\PRIMARY\\AXIAL\\CT_SOM5 SPI";
    ck_assert_str_eq(rules_match(c, &s)->name, "axial");
    s.image_type = "DERIVED\\SECONDARY\\REFORMATTED";
    ck_assert_str_eq(rules_match(c, &s)->name, "forward");
    s.image_type = NULL; /* absent */
    ck_assert_str_eq(rules_match(c, &s)->name, "forward");
    /* `both` still takes a series that cannot be processed (it then only
     * sends the original); `process` does not. */
    s.image_type = "ORIGINAL\\PRIMARY\\AXIAL";
    s.not_processable = "colour images (photometric interpretation 'RGB')";
    ck_assert_str_eq(rules_match(c, &s)->name, "forward");
    config_free(c);
}
END_TEST

START_TEST(auto_picks_by_slice_thickness)
{
    cfg_rule r = {.algorithm = ALGO_AUTO};
    ck_assert_int_eq(rules_algorithm(&r, 3.0), ALGO_NLM2D);
    ck_assert_int_eq(rules_algorithm(&r, 2.0), ALGO_NLM3D);
    ck_assert_int_eq(rules_algorithm(&r, 0.625), ALGO_NLM3D);
    ck_assert_int_eq(rules_algorithm(&r, NAN), ALGO_NLM3D);
    r.algorithm = ALGO_NLM2D;
    ck_assert_int_eq(rules_algorithm(&r, 0.5), ALGO_NLM2D);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, highest_priority_match_wins);
    tcase_add_test(tc, a_failed_condition_falls_through_to_the_next_rule);
    tcase_add_test(tc, absent_value_never_satisfies_a_range);
    tcase_add_test(tc, auto_picks_by_slice_thickness);
    tcase_add_test(tc, processing_rules_skip_a_series_that_cannot_be_processed);
    tcase_add_test(tc, image_type_matches_on_all_its_values);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
