/* Unit tests for config/: defaults, parsing, and errors reported with file:line. */
#include "common/err.h"
#include "common/log.h"
#include "config/config.h"
#include "tests/unit/testutil.h"

#include <check.h>
#include <errno.h>
#include <math.h>

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
    ck_assert_str_eq(cfg->rule[0].modality, "CT");
    ck_assert_str_eq(cfg->rule[0].series_description_suffix, " [DN]");
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

/* The node's AE title and state directory cannot be left empty: both
 * passed check-config before, and ldctd then stopped at the start with
 * "cannot listen on port N: Invalid argument" (or an error at line 0). */
START_TEST(empty_node_ae_title_and_state_dir_are_errors_at_their_line)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "ae_title =\n"
                                 "state_dir =\n"
                                 "[destination pacs]\n"
                                 "host = h\n"
                                 "ae_title = \"  \"\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "an AE title has 1 to 16"));
    ck_assert(has_error(cfg, 3, "state_dir = : must not be empty"));
    ck_assert(has_error(cfg, 6, "not only spaces"));
    ck_assert(!has_error(cfg, 4, "needs ae_title")); /* one error for one mistake */
    ck_assert_int_eq(cfg->nerr, 3);
    config_free(cfg);
    cfg = load_text("[destination a]\nhost =\nae_title = A\n", &rc); /* given, empty */
    ck_assert(has_error(cfg, 2, "destination 'a' needs host"));
    ck_assert_int_eq(cfg->nerr, 1);
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

START_TEST(rules_parse_with_their_defaults)
{
    int rc;
    ldct_config *cfg = load_text("[destination pacs]\nhost = h\nae_title = PACS\n"
                                 "[rule chest]\n"
                                 "match.series_description = *LOW*DOSE*\n"
                                 "match.slice_thickness = 0.5..2\n"
                                 "match.kvp = 100..\n"
                                 "match.ctdivol = ..5\n"
                                 "match.exposure = 40\n"
                                 "action = both\n"
                                 "algorithm = nlm3d\n"
                                 "strength = 0.8\n"
                                 "destinations = pacs\n"
                                 "priority = 10\n"
                                 "[rule rest]\naction = discard\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    const cfg_rule *r = &cfg->rule[0];
    ck_assert_int_eq(r->action, RULE_BOTH);
    ck_assert_int_eq(r->algorithm, ALGO_NLM3D);
    ck_assert(r->strength == 0.8);
    ck_assert(r->slice_thickness.set && r->slice_thickness.lo == 0.5 && r->slice_thickness.hi == 2);
    ck_assert(r->kvp.lo == 100 && isinf(r->kvp.hi));
    ck_assert(isinf(r->ctdivol.lo) && r->ctdivol.hi == 5);
    ck_assert(r->exposure.lo == 40 && r->exposure.hi == 40);
    ck_assert_int_eq(r->ndest, 1);
    ck_assert_str_eq(r->destinations[0], "pacs");
    const cfg_rule *rest = &cfg->rule[1];
    ck_assert_int_eq(rest->algorithm, ALGO_AUTO);
    ck_assert_int_eq(rest->series_number_offset, 1000);
    ck_assert_str_eq(rest->series_description_suffix, " [DN]");
    ck_assert(!rest->kvp.set);
    config_free(cfg);
}
END_TEST

START_TEST(rule_errors_name_their_lines)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\n"
                                 "action = denoise\n"
                                 "algorithm = magic\n"
                                 "match.kvp = 140..80\n"
                                 "match.ctdivol = lots\n"
                                 "strength = 0\n"
                                 "destinations = nowhere\n"
                                 "match.colour = red\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "expected process, both, route or discard"));
    ck_assert(has_error(cfg, 3, "expected auto, nlm2d, nlm3d, anlm, adaptive4d or fdk"));
    ck_assert(has_error(cfg, 4, "range is empty"));
    ck_assert(has_error(cfg, 5, "expected a number or a range"));
    ck_assert(has_error(cfg, 6, "out of range"));
    ck_assert(has_error(cfg, 7, "no [destination nowhere]")); /* its destinations line */
    ck_assert(has_error(cfg, 8, "unknown option 'match.colour'"));
    config_free(cfg);
}
END_TEST

/* A range of NaN was accepted and matched nothing; an infinite bound
 * (1e999) likewise; and a lower bound longer than 63 characters was cut
 * and read as another number (0...01..5 as 0..5). */
START_TEST(ranges_take_finite_numbers_only)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\n"
                                 "match.kvp = nan\n"
                                 "match.ctdivol = nan..5\n"
                                 "match.exposure = 1e999..\n"
                                 "match.slice_thickness = ..-inf\n"
                                 "match.kvp = 0000000000000000000000000000000000000000000000000000"
                                 "0000000000000001..5\n"
                                 "match.exposure = 00001..5\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "match.kvp = nan: expected a number or a range"));
    ck_assert(has_error(cfg, 3, "expected a range LO..HI"));
    ck_assert(has_error(cfg, 4, "expected a range LO..HI"));
    ck_assert(has_error(cfg, 5, "expected a range LO..HI"));
    ck_assert(has_error(cfg, 6, "expected a range LO..HI"));
    ck_assert_int_eq(cfg->nerr, 5);
    ck_assert(cfg->rule[0].exposure.set);
    ck_assert_double_eq(cfg->rule[0].exposure.lo, 1);
    ck_assert_double_eq(cfg->rule[0].exposure.hi, 5);
    config_free(cfg);
}
END_TEST

START_TEST(fdk_rule_keys_parse_with_defaults_and_bounds)
{
    int rc;
    ldct_config *cfg = load_text("[rule p]\n"
                                 "algorithm = fdk\n"
                                 "matrix = 256\n"
                                 "fov_mm = 350\n"
                                 "kernel = hann\n"
                                 "[rule q]\n"
                                 "algorithm = fdk\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    const cfg_rule *p = &cfg->rule[0], *q = &cfg->rule[1];
    ck_assert_int_eq(p->fdk_matrix, 256);
    ck_assert_double_eq_tol(p->fdk_fov_mm, 350, 1e-9);
    ck_assert_int_eq(p->fdk_kernel, 4); /* ram-lak, shepp-logan, cosine, hamming, hann */
    ck_assert_int_eq(q->fdk_matrix, 512);
    ck_assert_int_eq(q->fdk_kernel, 1); /* shepp-logan */
    ck_assert_double_eq_tol(q->fdk_mu_water, 0.0193, 1e-12);
    ck_assert(q->fdk_fov_mm == 0);
    ck_assert_int_eq(q->fdk_slices, 0);
    config_free(cfg);
    cfg = load_text("[rule p]\n"
                    "kernel = sharp\n"
                    "matrix = 8\n"
                    "mu_water = 0\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "expected ram-lak, shepp-logan, cosine, hamming or hann"));
    ck_assert(has_error(cfg, 3, "out of range"));
    ck_assert(has_error(cfg, 4, "out of range"));
    config_free(cfg);
}
END_TEST

START_TEST(adaptive4d_mapping_keys_parse_with_defaults_and_bounds)
{
    int rc;
    ldct_config *cfg = load_text("[rule p]\n"
                                 "algorithm = adaptive4d\n"
                                 "adaptive4d.downsample = 1\n"
                                 "adaptive4d.m_sigma = 4.5\n"
                                 "adaptive4d.pass_t = 0\n"
                                 "adaptive4d.m_reference = max\n"
                                 "[rule q]\n"
                                 "algorithm = adaptive4d\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    const cfg_rule *p = &cfg->rule[0], *q = &cfg->rule[1];
    ck_assert_int_eq(p->a4d_downsample, 1);
    ck_assert_double_eq_tol(p->a4d_m_sigma, 4.5, 1e-12);
    ck_assert(p->a4d_pass_t == 0);
    ck_assert_int_eq(p->a4d_m_reference, 2); /* default, noise, max */
    ck_assert_int_eq(q->a4d_m_reference, 0);
    ck_assert(q->a4d_m_pass < 0);
    ck_assert(p->a4d_m_alpha < 0 && p->a4d_t_scale < 0); /* not set: the engine's */
    ck_assert_int_eq(q->a4d_downsample, 0);
    ck_assert(q->a4d_m_sigma < 0 && q->a4d_mu_alpha < 0 && q->a4d_pass_t < 0);
    config_free(cfg);
    cfg = load_text("[rule p]\n"
                    "adaptive4d.downsample = 3\n"
                    "adaptive4d.mu_alpha = 2\n"
                    "adaptive4d.m_beta = x\n"
                    "adaptive4d.m_reference = median\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "out of range"));
    ck_assert(has_error(cfg, 3, "out of range"));
    ck_assert(has_error(cfg, 4, "not a number"));
    ck_assert(has_error(cfg, 5, "expected default, noise or max"));
    config_free(cfg);
}
END_TEST

START_TEST(patch_weighting_parses_and_bad_values_name_their_line)
{
    int rc;
    ldct_config *cfg = load_text("[rule g]\n"
                                 "algorithm = nlm3d\n"
                                 "patch_weighting = gaussian\n"
                                 "[rule u]\n"
                                 "patch_weighting = Uniform\n"
                                 "[rule d]\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->rule[0].patch_weighting, 1);
    ck_assert_int_eq(cfg->rule[1].patch_weighting, 0);
    ck_assert_int_eq(cfg->rule[2].patch_weighting, 0); /* the default: uniform */
    config_free(cfg);
    cfg = load_text("[rule p]\n"
                    "algorithm = nlm2d\n"
                    "patch_weighting = box\n"
                    "[rule q]\n"
                    "patch_weighting = 1\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_int_eq(cfg->nerr, 2);
    ck_assert(has_error(cfg, 3, "patch_weighting"));
    ck_assert(has_error(cfg, 3, "expected uniform or gaussian"));
    ck_assert(has_error(cfg, 5, "expected uniform or gaussian"));
    config_free(cfg);
}
END_TEST

/* distance_cutoff: a real in 0..80 (gpu_nlm_params.cutoff), default 4;
 * 0 (off) is a value; negative, too large, NaN and garbage name their line. */
START_TEST(distance_cutoff_parses_with_bounds_and_default_4)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\n"
                                 "algorithm = nlm3d\n"
                                 "distance_cutoff = 5.5\n"
                                 "[rule off]\n"
                                 "distance_cutoff = 0\n"
                                 "[rule max]\n"
                                 "distance_cutoff = 80\n"
                                 "[rule d]\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_double_eq(cfg->rule[0].distance_cutoff, 5.5);
    ck_assert_double_eq(cfg->rule[1].distance_cutoff, 0);
    ck_assert_double_eq(cfg->rule[2].distance_cutoff, 80);
    ck_assert_double_eq(cfg->rule[3].distance_cutoff, 4); /* the default */
    config_free(cfg);
    ck_assert_int_eq(config_new_defaults(&cfg), 0); /* the built-in rule too */
    ck_assert_double_eq(cfg->rule[0].distance_cutoff, 4);
    config_free(cfg);
    cfg = load_text("[rule p]\n"
                    "distance_cutoff = -1\n"
                    "distance_cutoff = 80.5\n"
                    "distance_cutoff = nan\n"
                    "distance_cutoff = four\n"
                    "distance_cutoff = 4x\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_int_eq(cfg->nerr, 5);
    ck_assert(has_error(cfg, 2, "distance_cutoff = -1: out of range (0 to 80)"));
    ck_assert(has_error(cfg, 3, "out of range (0 to 80)"));
    ck_assert(has_error(cfg, 4, "out of range (0 to 80)"));
    ck_assert(has_error(cfg, 5, "distance_cutoff = four: not a number"));
    ck_assert(has_error(cfg, 6, "not a number"));
    config_free(cfg);
}
END_TEST

START_TEST(rules_are_ordered_by_priority_then_file_order)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\npriority = 1\n[rule b]\npriority = 5\n"
                                 "[rule c]\npriority = 1\n[rule d]\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    const cfg_rule *o[8];
    ck_assert_int_eq(config_rules_ordered(cfg, o, 8), 4);
    ck_assert_str_eq(o[0]->name, "b");
    ck_assert_str_eq(o[1]->name, "a");
    ck_assert_str_eq(o[2]->name, "c");
    ck_assert_str_eq(o[3]->name, "d");
    config_free(cfg);
}
END_TEST

START_TEST(wildcards_match_case_insensitively)
{
    ck_assert(config_glob_match("*LOW*DOSE*", "Chest low dose 1.0"));
    ck_assert(config_glob_match("", "anything"));
    ck_assert(config_glob_match("CT", "ct"));
    ck_assert(config_glob_match("C?", "CT"));
    ck_assert(config_glob_match("*", ""));
    ck_assert(!config_glob_match("*LOW*DOSE*", "Chest standard"));
    ck_assert(!config_glob_match("CT", "CTX"));
    ck_assert(!config_glob_match("a*b*c", "a-b-d"));
}
END_TEST

/* Patterns and values are UTF-8 (rules read the values through the
 * series' Specific Character Set): '?' is one character and case folds
 * beyond ASCII; a stray byte is matched as itself, never read past. */
START_TEST(glob_steps_by_utf8_character)
{
    ck_assert(config_glob_match("*d\xc3\xb6sis*", "THORAX D\xc3\x96SIS")); /* ö ~ Ö */
    ck_assert(config_glob_match("D?SIS", "D\xc3\x96SIS"));                 /* ? = Ö */
    ck_assert(config_glob_match("*\xc5\x81\xc3\xb3"
                                "d\xc5\xba*",
                                "\xc5\x82\xc3\x93"
                                "D\xc5\xb9")); /* ŁóDŹ */
    ck_assert(config_glob_match(
        "\xd0\xba\xd1\x82*",
        "\xd0\x9a\xd0\xa2 \xd0\xb3\xd1\x80\xd1\x83\xd0\xb4\xd1\x8c")); /* кт ~ КТ */
    ck_assert(config_glob_match("*\xce\xb1*", "\xce\x91"));            /* α ~ Α */
    ck_assert(!config_glob_match("D?SIS", "D\xc3\x96\xc3\x96SIS"));
    ck_assert(!config_glob_match("\xc3\xb7", "\xc3\xb7\xc3\xb7"));
    ck_assert(!config_glob_match("\xc3\x97", "\xc3\xb7")); /* × is no capital of ÷ */
    ck_assert(config_glob_match("A?C", "A\xff"
                                       "C"));        /* a stray byte is one character */
    ck_assert(config_glob_match("*\xc3", "AB\xc3")); /* a cut sequence at the end */
    ck_assert(!config_glob_match("*\xc3\x96", "AB\xc3"));
}
END_TEST

/* The series' text reaches the rules in UTF-8 (a Latin-1 "DÖSIS" as
 * "D\xc3\x96SIS"): '?' is one character there, as it was one byte in the
 * Latin-1 value before the conversion (review 22's cases). */
START_TEST(question_mark_matches_one_utf8_character)
{
    ck_assert(config_glob_match("D?SIS", "D\xc3\x96SIS"));
    ck_assert(config_glob_match("*?SIS", "D\xc3\x96SIS"));
    ck_assert(config_glob_match("??", "\xe5\xb1\xb1\xe5\xb1\xb1"));
    ck_assert(!config_glob_match("???", "\xe5\xb1\xb1\xe5\xb1\xb1"));
    ck_assert(config_glob_match("*\xc3\x96*", "THORAX D\xc3\x96SIS"));
    ck_assert(config_glob_match("*?X", "\xc3\x96\xc3\x96X"));
    /* A value kept as received (no conversion): a byte where nothing follows. */
    ck_assert(config_glob_match("D?SIS", "D\xd6SIS"));
}
END_TEST

/* Case folds by Unicode's simple lower-case mapping over the blocks the
 * header names, not by a rule of thumb: İ is a capital i (not the
 * dotless ı), Ÿ pairs with ÿ, Greek capitals with tonos or dialytika and
 * Cyrillic capitals past Я (Ukrainian Ґ, Kazakh Ә Қ Ү) have small
 * letters, and a final sigma is a sigma. Letters of other blocks stay. */
START_TEST(case_folds_by_unicode_lower_case_mapping)
{
    ck_assert(config_glob_match("*beyin*", "BEY\xc4\xb0N"));                /* BEYİN */
    ck_assert(!config_glob_match("\xc4\xb1", "\xc4\xb0"));                  /* ı is no İ */
    ck_assert(config_glob_match("\xc3\xbf", "\xc5\xb8"));                   /* ÿ ~ Ÿ */
    ck_assert(config_glob_match("\xce\xac", "\xce\x86"));                   /* ά ~ Ά */
    ck_assert(config_glob_match("\xcf\x8e", "\xce\x8f"));                   /* ώ ~ Ώ */
    ck_assert(config_glob_match("\xcf\x8a", "\xce\xaa"));                   /* ϊ ~ Ϊ */
    ck_assert(config_glob_match("*\xcf\x82", "\xce\xa3"));                  /* ς ~ Σ */
    ck_assert(config_glob_match("\xd2\x91", "\xd2\x90"));                   /* ґ ~ Ґ */
    ck_assert(config_glob_match("\xd3\x99\xd2\x9b", "\xd3\x98\xd2\x9a"));   /* әқ ~ ӘҚ */
    ck_assert(config_glob_match("\xd3\x8f", "\xd3\x80"));                   /* ӏ ~ Ӏ */
    ck_assert(config_glob_match("\xd3\x82", "\xd3\x81"));                   /* ӂ ~ Ӂ */
    ck_assert(config_glob_match("*\xc8\x99\xc8\x9b*", "\xc8\x98\xc8\x9a")); /* șț ~ ȘȚ */
    ck_assert(config_glob_match("\xc9\x93", "\xc6\x81"));                   /* ɓ ~ Ɓ */
    ck_assert(config_glob_match("\xc7\x8e", "\xc7\x8d"));                   /* ǎ ~ Ǎ */
    ck_assert(config_glob_match("\xc7\x86", "\xc7\x85"));                   /* ǆ ~ ǅ */
    ck_assert(config_glob_match("\xc7\x85", "\xc7\x84"));                   /* ǅ ~ Ǆ */
    ck_assert(config_glob_match("*\xd5\xa1*", "\xd4\xb1"));                 /* ա ~ Ա */
    ck_assert(config_glob_match("\xe1\x83\x90", "\xe1\xb2\x90"));           /* ა ~ Ა */
    ck_assert(config_glob_match("\xef\xbd\x81", "\xef\xbc\xa1"));           /* ａ ~ Ａ */
    ck_assert(config_glob_match("\xf0\x90\x90\xa8", "\xf0\x90\x90\x80"));   /* 𐐨 ~ 𐐀 */
    ck_assert(!config_glob_match("\xd3\x82", "\xd3\x83"));
    ck_assert(!config_glob_match("\xd5\xa1", "\xd5\xa2")); /* ա is no բ */
    ck_assert(!config_glob_match("\xc7\x86", "\xc7\x87")); /* ǆ is no Ǉ */
}
END_TEST

/* A value kept as received may hold overlong forms: they are stray bytes,
 * never the character they spell. An overlong NUL used to match the end
 * of the pattern and step the matcher past its terminator (the pattern's
 * buffer, zeros after it here, then matched "CT" against a longer value). */
START_TEST(overlong_forms_in_a_value_are_stray_bytes)
{
    char pat[16] = "CT";
    ck_assert(!config_glob_match(pat, "CT\xe0\x80\x80"));
    ck_assert(!config_glob_match(pat, "CT\xf0\x80\x80\x80"));
    ck_assert(!config_glob_match("CTA", "CT\xe0\x81\x81")); /* an overlong 'A' */
    ck_assert(config_glob_match("CT???", "CT\xe0\x81\x81"));
    ck_assert(config_glob_match("?", "\xed\xa0\x80") == 0); /* a surrogate: 3 bytes */
    ck_assert(config_glob_match("*", "\xf4\x90\x80\x80"));  /* past U+10FFFF */
    ck_assert(!config_glob_match("?", "\xf4\x90\x80\x80"));
}
END_TEST

/* Rule text is UTF-8: a pattern saved in Latin-1 would never match the
 * series' UTF-8 values and a Latin-1 suffix would be written as '?', both
 * silently; a UTF-8 file loads. */
START_TEST(rule_text_that_is_not_utf8_is_refused)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\n"
                                 "match.series_description = *D\xd6SIS*\n"
                                 "series_description_suffix = \" [d\xe9]\"\n"
                                 "match.manufacturer = \xc0\xae\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "not valid UTF-8"));
    ck_assert(has_error(cfg, 3, "not valid UTF-8"));
    ck_assert(has_error(cfg, 4, "not valid UTF-8")); /* an overlong '.' */
    config_free(cfg);
    cfg = load_text("[rule a]\n"
                    "match.series_description = *D\xc3\x96SIS*\n"
                    "series_description_suffix = \" [d\xc3\xa9 \xe5\xb1\xb1 \xf0\x9f\x98\x80]\"\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->rule[0].series_description, "*D\xc3\x96SIS*");
    config_free(cfg);
}
END_TEST

/* A Series Description holds 64 characters, up to 256 bytes in UTF-8: a
 * pattern for a long Cyrillic one fits. A line longer than inih's buffer
 * is refused as such, at its own line; it was cut, the cut value taken
 * and the rest parsed as the next line. */
START_TEST(text_patterns_hold_64_characters_of_utf8)
{
    char text[1024], pat[300] = "", desc[300] = "";
    for (int i = 0; i < 64; i++) {
        strcat(pat, i % 2 ? "\xd0\xb4" : "\xd0\x94"); /* Д and д */
        strcat(desc, "\xd0\x94");
    }
    int rc;
    snprintf(text, sizeof text, "[rule a]\nmatch.series_description = %s\n", pat);
    ldct_config *cfg = load_text(text, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(config_glob_match(cfg->rule[0].series_description, desc));
    config_free(cfg);
    snprintf(text, sizeof text, "[rule a]\nmatch.protocol_name = %s%s*\npriority = 3\n", pat, pat);
    cfg = load_text(text, &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "line too long (at most"));
    ck_assert_int_eq(cfg->nerr, 1);
    ck_assert_int_eq(cfg->rule[0].priority, 3); /* the next line is read as it is */
    config_free(cfg);
}
END_TEST

/* The suffix ends a Series Description, LO of one value: a backslash
 * would make a second value and a control character is not allowed. */
START_TEST(suffix_with_a_delimiter_or_control_character_is_refused)
{
    int rc;
    ldct_config *cfg = load_text("[rule a]\n"
                                 "series_description_suffix = \" [a\\b]\"\n"
                                 "[rule b]\n"
                                 "series_description_suffix = \" [a\tb]\"\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "contains a backslash"));
    ck_assert(has_error(cfg, 4, "contains a control character"));
    config_free(cfg);
    /* C1 controls too: a Latin-1 series would get the byte 0x85 (NEL). */
    ck_assert_str_eq(config_suffix_check(" [a\xc2\x85]"), "contains a control character");
    ck_assert_str_eq(config_suffix_check("\xc2\x80"), "contains a control character");
    ck_assert_ptr_null(config_suffix_check(" [\xc2\xa0\xc2\xb5]")); /* NBSP, micro sign */
    ck_assert_ptr_null(config_suffix_check(" [d\xc3\xa9"
                                           "bruit\xc3\xa9]"));
}
END_TEST

START_TEST(missing_file_is_an_errno)
{
    ldct_config *cfg = (ldct_config *)1;
    ck_assert_int_lt(config_load("/nonexistent/ldct.conf", &cfg), 0);
    ck_assert_ptr_null(cfg);
}
END_TEST

/* A folder given for the file was read as an empty file: the defaults,
 * with no error, so ldctd --config /etc/ldct/ started on them. */
START_TEST(a_directory_is_not_a_configuration_file)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    ldct_config *cfg = (ldct_config *)1;
    ck_assert_int_eq(config_load(dir, &cfg), -EISDIR);
    ck_assert_ptr_null(cfg);
}
END_TEST

/* A NUL byte ended the line's C string: "state_dir = ./a\0b" was read as
 * ./a with no error, and the rest of a long line as a line of its own.
 * Each line with one is an error at its line, and nothing of it is used;
 * the lines after it are read as they are. */
START_TEST(a_nul_byte_is_an_error_at_its_line)
{
    static const char text[] =
        "[node]\n"
        "state_dir = ./a\0b\n"
        "port = 4242\n"
        "ae_title = X\0"
        "YYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY"
        "YYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY"
        "YYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY"
        "\nport = 99999\n"
        "stable_seconds = 7\n";
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.conf", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
    fclose(f);
    ldct_config *cfg = NULL;
    ck_assert_int_eq(config_load(path, &cfg), LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "contains a NUL byte"));
    ck_assert(has_error(cfg, 4, "contains a NUL byte"));
    ck_assert(has_error(cfg, 5, "port = 99999: out of range"));
    ck_assert_int_eq(cfg->nerr, 3);
    ck_assert_str_eq(cfg->node.state_dir, "./var/ldct");
    ck_assert_str_eq(cfg->node.ae_title, "LDCTNODE");
    ck_assert_int_eq(cfg->node.port, 4242);
    ck_assert_int_eq(cfg->node.stable_seconds, 7);
    config_free(cfg);
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

/* Host names in allowed_hosts or http_bind were accepted by check-config,
 * and then every peer was refused ("localhost" matches no peer address)
 * or the start failed. They are errors now; numeric addresses are kept in
 * the canonical form peers are compared in. */
START_TEST(addresses_must_be_numeric_and_are_kept_canonical)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "allowed_hosts = localhost\n"
                                 "http_bind = localhost\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_int_eq(cfg->nerr, 2);
    ck_assert(has_error(cfg, 2, "numeric IPv4 or IPv6"));
    ck_assert(has_error(cfg, 3, "numeric IPv4 or IPv6"));
    config_free(cfg);
    cfg = load_text("[node]\nallowed_hosts = 127.000.000.001\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "numeric"));
    config_free(cfg);
    cfg = load_text("[node]\nallowed_hosts = 0:0:0:0:0:0:0:1, ::ffff:10.0.0.7\n"
                    "http_bind = 0:0::0\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "::1"));
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "::ffff:10.0.0.7"));
    ck_assert(!config_host_allowed(&cfg->node.allowed_hosts, "10.0.0.70"));
    ck_assert_str_eq(cfg->node.http_bind, "::");
    config_free(cfg);
}
END_TEST

/* An IPv6 zone id (fe80::1%eth0) used to get the generic "expected
 * numeric" error, which does not say what is wrong with a valid link-local
 * address. It cannot be honoured (peers are compared by address alone, and
 * the DICOM port takes IPv4 peers only), so it is refused at its line,
 * naming the entry and the zone; so is a range, with or without a zone.
 * The entries around it are not the cause and are not named. */
START_TEST(zone_ids_and_ranges_in_allowed_hosts_are_refused_at_their_line)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "allowed_hosts = 10.0.0.5, fe80::1%eth0\n"
                                 "[destination pacs]\n"
                                 "host = 10.0.0.9\n"
                                 "ae_title = PACS\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_int_eq(cfg->nerr, 1);
    ck_assert_msg(has_error(cfg, 2, "fe80::1%eth0: IPv6 zone ids (%eth0) are not supported"), "%s",
                  cfg->err[0]);
    ck_assert_msg(strstr(cfg->err[0], "list the peer's IPv4 address"), "%s", cfg->err[0]);
    config_free(cfg);
    cfg = load_text("[node]\nallowed_hosts = fe80::%2\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_msg(has_error(cfg, 2, "zone ids (%2) are not supported"), "%s", cfg->err[0]);
    config_free(cfg);
    cfg = load_text("[node]\n\nallowed_hosts = 10.0.0.0/24\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_msg(has_error(cfg, 3, "10.0.0.0/24: address ranges are not supported"), "%s",
                  cfg->err[0]);
    config_free(cfg);
    cfg = load_text("[node]\nallowed_hosts = fe80::/64%eth0\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_msg(has_error(cfg, 2, "fe80::/64%eth0: IPv6 zone ids (%eth0)"), "%s", cfg->err[0]);
    config_free(cfg);
    /* The same link-local address without a zone is still an address. */
    cfg = load_text("[node]\nallowed_hosts = FE80::0001\n", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "fe80::1"));
    config_free(cfg);
}
END_TEST

START_TEST(route_and_both_need_destinations)
{
    int rc;
    ldct_config *cfg = load_text("[rule r]\n"
                                 "action = route\n"
                                 "[rule b]\n"
                                 "action = both\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 1, "action route needs destinations"));
    ck_assert(has_error(cfg, 3, "action both needs destinations"));
    config_free(cfg);
    /* A destination named twice is one send, not two of the same files. */
    cfg = load_text("[destination pacs]\nhost = 127.0.0.1\nport = 104\nae_title = PACS\n"
                    "[rule r]\naction = route\ndestinations = pacs, pacs\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->rule[0].ndest, 1);
    config_free(cfg);
}
END_TEST

START_TEST(without_rules_ct_goes_to_the_results_folder)
{
    int rc;
    ldct_config *cfg = load_text("[node]\nstate_dir = /srv/ldct\n", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->nrule, 1);
    ck_assert_str_eq(cfg->rule[0].name, CFG_DEFAULT_RULE);
    ck_assert_str_eq(cfg->rule[0].modality, "CT");
    ck_assert_int_eq(cfg->rule[0].action, RULE_PROCESS);
    ck_assert_int_eq(cfg->rule[0].ndest, 0);
    char dir[256];
    config_results_dir(cfg, dir, sizeof dir);
    ck_assert_str_eq(dir, "/srv/ldct/results");
    config_free(cfg);
    cfg = load_text("[rule only]\nmatch.modality = MR\n", &rc);
    ck_assert_int_eq(cfg->nrule, 1);
    ck_assert_str_eq(cfg->rule[0].name, "only");
    config_free(cfg);
}
END_TEST

START_TEST(uid_root_devices_and_retries_are_checked)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "uid_root = 1.2.03\n"
                                 "devices = gpu:x\n"
                                 "sender_threads = 0\n"
                                 "[destination p]\n"
                                 "host = h\n"
                                 "ae_title = P\n"
                                 "retry_multiplier = 0.5\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "UID root"));
    ck_assert(has_error(cfg, 3, "gpu:0"));
    ck_assert(has_error(cfg, 4, "out of range"));
    ck_assert(has_error(cfg, 8, "out of range"));
    config_free(cfg);
    cfg = load_text("[node]\nuid_root = 1.2.826.0.1.3680043.2\ndevices = gpu:0, gpu:1\n", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->node.devices, "gpu:0, gpu:1");
    config_free(cfg);
}
END_TEST

/* strtod reads "nan" and "inf": neither may pass as a strength, an h or a
 * retry multiplier (NaN compares false with both bounds). */
/* The command line's --uid-root gets the file's check and message. */
START_TEST(uid_root_check_is_the_files)
{
    ck_assert_ptr_null(config_uid_root_check("1.2.826.0.1.3680043.9"));
    ck_assert_ptr_null(config_uid_root_check("1.2.0.3"));
    const char *bad[] = {"", "abc", "1.02", "1..2", ".1", "1.", "1.2.3.4.5.6.7.8.9.10.11.12"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = config_uid_root_check(bad[i]);
        ck_assert_msg(why && strstr(why, "digits and dots") && strstr(why, "24 characters"),
                      "%s accepted", bad[i]);
    }
    int rc;
    ldct_config *cfg = load_text("[node]\nuid_root = abc\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, config_uid_root_check("abc")));
    config_free(cfg);
}
END_TEST

START_TEST(nan_and_infinity_are_out_of_range)
{
    int rc;
    ldct_config *cfg = load_text("[destination p]\n"
                                 "host = h\n"
                                 "ae_title = P\n"
                                 "retry_multiplier = nan\n"
                                 "[rule r]\n"
                                 "strength = nan\n"
                                 "h = inf\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 4, "out of range (1 to 10)"));
    ck_assert(has_error(cfg, 6, "out of range (0.01 to 10)"));
    ck_assert(has_error(cfg, 7, "out of range (0 to 10000)"));
    config_free(cfg);
}
END_TEST

/* The GPU keys: 60 and 300 by default, read from a file, bounded. */
START_TEST(gpu_check_and_down_wait_have_defaults_and_bounds)
{
    ldct_config *cfg;
    ck_assert_int_eq(config_new_defaults(&cfg), 0);
    ck_assert_int_eq(cfg->node.gpu_check_seconds, 60);
    ck_assert_int_eq(cfg->node.gpu_down_wait_seconds, 300);
    config_free(cfg);
    int rc;
    cfg = load_text("[node]\ngpu_check_seconds = 5\ngpu_down_wait_seconds = 0\n", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->node.gpu_check_seconds, 5);
    ck_assert_int_eq(cfg->node.gpu_down_wait_seconds, 0);
    config_free(cfg);
    cfg = load_text("[node]\ngpu_check_seconds = 4\ngpu_down_wait_seconds = -1\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "gpu_check_seconds = 4: out of range (5 to 86400)"));
    ck_assert(has_error(cfg, 3, "gpu_down_wait_seconds = -1: out of range (0 to 86400)"));
    config_free(cfg);
}
END_TEST

/* TLS: off by default; the listener's keys belong together (each error
 * at the line of the key it is about, one left at its default blamed on
 * tls_port), and a TLS destination needs the CA file that verifies it. */
START_TEST(tls_keys_belong_together)
{
    ldct_config *cfg;
    ck_assert_int_eq(config_new_defaults(&cfg), 0);
    ck_assert_int_eq(cfg->node.tls_port, 0);
    ck_assert_int_eq(cfg->node.tls_require_client_certificate, 1);
    ck_assert_int_eq(cfg->node.tls_profile, CFG_TLS_BCP195_ND);
    config_free(cfg);
    int rc;
    cfg = load_text("[node]\nport = 104\ntls_port = 2762\ntls_certificate = /c\n"
                    "tls_private_key = /k\ntls_ca_certificates = /ca\ntls_profile = bcp195\n"
                    "[destination p]\nhost = h\nae_title = P\ntls = yes\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->node.tls_port, 2762);
    ck_assert_int_eq(cfg->node.tls_profile, CFG_TLS_BCP195);
    ck_assert_int_eq(cfg->dest[0].tls, 1);
    config_free(cfg);
    cfg = load_text("[node]\nport = 2762\ntls_port = 2762\ntls_profile = tls13\n"
                    "[destination p]\nhost = h\nae_title = P\ntls = yes\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 3, "tls_port 2762 is also port: give TLS its own port"));
    ck_assert(has_error(cfg, 3, "tls_port needs tls_certificate and tls_private_key"));
    ck_assert(has_error(cfg, 3, "tls_require_client_certificate needs tls_ca_certificates"));
    ck_assert(has_error(cfg, 4, "tls_profile = tls13: use bcp195-nd or bcp195"));
    ck_assert(has_error(cfg, 8, "destination 'p': tls needs the node's tls_ca_certificates"));
    config_free(cfg);
    /* The status listener may share neither DICOM port. */
    cfg = load_text("[node]\nport = 104\nhttp_port = 104\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 3, "http_port 104 is also port: give the status listener its own"));
    config_free(cfg);
    /* A refused repeat leaves the value in effect, and its line. */
    cfg = load_text("[node]\ntls_port = 2762\ntls_port = 99999999\n[destination p]\nhost = h\n"
                    "ae_title = P\ntls = yes\ntls = maybe\n",
                    &rc);
    ck_assert(has_error(cfg, 3, "tls_port = 99999999: out of range"));
    ck_assert(has_error(cfg, 2, "tls_port needs tls_certificate"));
    ck_assert(has_error(cfg, 8, "tls = maybe: expected yes or no"));
    ck_assert(has_error(cfg, 7, "destination 'p': tls needs the node's tls_ca_certificates"));
    config_free(cfg);
    cfg = load_text("[node]\ntls_port = 2762\ntls_certificate = /c\ntls_private_key = /k\n"
                    "tls_require_client_certificate = maybe\n",
                    &rc);
    ck_assert(has_error(cfg, 5, "expected yes or no"));
    ck_assert_int_eq(cfg->nerr, 1); /* one error for one mistake */
    config_free(cfg);
    cfg = load_text("[node]\ntls_ca_certificates = /ca\n[destination p]\nhost = h\nae_title = P\n"
                    "tls = yes\ntls_peer_name = pacs.example.org\n[destination q]\nhost = h\n"
                    "ae_title = Q\ntls_peer_name = q.example.org\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert_str_eq(cfg->dest[0].tls_peer_name, "pacs.example.org");
    ck_assert(has_error(cfg, 11, "destination 'q': tls_peer_name needs tls = yes"));
    ck_assert_int_eq(cfg->nerr, 1);
    config_free(cfg);
    const char *good[] = {"pacs", "pacs-1.example.org", "127.0.0.1", "::1", "fd00::7", "1pacs"};
    const char *bad[] = {"pacs:2762", "[::1]", "127.1", "fe80::1%eth0", "-pacs",
                         "pacs-.org", "a..b",  "pacs.", "pa cs",        "*.example.org"};
    for (int i = 0; i < 16; i++) {
        const int ok = i < 6;
        const char *name = ok ? good[i] : bad[i - 6];
        char text[256];
        snprintf(text, sizeof text,
                 "[node]\ntls_ca_certificates = /ca\n[destination p]\nhost = h\nae_title = P\n"
                 "tls = yes\ntls_peer_name = %s\n",
                 name);
        cfg = load_text(text, &rc);
        ck_assert_msg(rc == (ok ? 0 : LDCT_EINVAL_CONFIG), "%s: %d", name, rc);
        ck_assert_msg(ok || has_error(cfg, 7, "is neither a host name nor an IP address"), "%s",
                      name);
        config_free(cfg);
    }
    cfg = load_text("[node]\ntls_port = 2762\ntls_certificate = /c\ntls_private_key = /k\n"
                    "tls_require_client_certificate = no\n",
                    &rc);
    ck_assert_int_eq(rc, 0); /* no client certificates asked: no CA needed */
    config_free(cfg);
    cfg = load_text("[node]\ntls_ca_certificates = /ca\ntls_crl = /crl.pem\n", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->node.tls_crl, "/crl.pem");
    config_free(cfg);
    cfg = load_text("[node]\nport = 104\ntls_crl = /crl.pem\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 3, "tls_crl needs tls_ca_certificates"));
    config_free(cfg);
    cfg = load_text("[node]\ntls_port = 2762\ntls_certificate = /c\ntls_private_key = /k\n"
                    "port = 104\ntls_require_client_certificate = yes\ntls_crl = /crl.pem\n"
                    "tls_caller_names = CT1=ct1.example.org\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 6, "tls_require_client_certificate needs tls_ca_certificates"));
    ck_assert(has_error(cfg, 7, "tls_crl needs tls_ca_certificates"));
    ck_assert(has_error(cfg, 8, "tls_caller_names needs tls_port and tls_ca_certificates"));
    ck_assert_int_eq(cfg->nerr, 3);
    config_free(cfg);
}
END_TEST

/* tls_caller_names: AE=NAME entries, split at the last '=', each AE title
 * once and in any case (rules match AE titles so); bound titles need the
 * TLS listener and its CAs. */
START_TEST(tls_caller_names_bind_ae_titles)
{
    static const char tls[] = "[node]\ntls_port = 2762\ntls_certificate = /c\n"
                              "tls_private_key = /k\ntls_ca_certificates = /ca\n";
    char text[512];
    int rc;
    snprintf(text, sizeof text, "%stls_caller_names = CT1 = ct1.example.org, A=B=10.0.0.7\n", tls);
    ldct_config *cfg = load_text(text, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->node.tls_caller_names.n, 2);
    ck_assert_str_eq(config_ae_bound_name(&cfg->node.tls_caller_names, "CT1"), "ct1.example.org");
    ck_assert_str_eq(config_ae_bound_name(&cfg->node.tls_caller_names, "A=B"), "10.0.0.7");
    ck_assert_ptr_null(config_ae_bound_name(&cfg->node.tls_caller_names, "CT2"));
    ck_assert_str_eq(config_ae_bound_name(&cfg->node.tls_caller_names, "ct1"), "ct1.example.org");
    config_free(cfg);
    /* Quoted spaces around a title are dropped, as from a received one. */
    snprintf(text, sizeof text, "%stls_caller_names = \" CT1 \"=h\n", tls);
    cfg = load_text(text, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->node.tls_caller_names.ae[0], "CT1");
    config_free(cfg);
    const char *bad[] = {"CT1",
                         "CT1=",
                         "=ct1.example.org",
                         "CT1=a b",
                         "CT1=pacs:104",
                         "THIRTEEN_CHARS_AND_MORE=h",
                         "CT1=h1, CT1=h2",
                         "CT1=h1, ct1=h2"};
    const char *why[] = {"expected AE=NAME",    "neither a host name", "AE title before '='",
                         "neither a host name", "neither a host name", "AE title before '='",
                         "bound twice",         "bound twice"};
    for (int i = 0; i < 8; i++) {
        snprintf(text, sizeof text, "%stls_caller_names = %s\n", tls, bad[i]);
        cfg = load_text(text, &rc);
        ck_assert_msg(rc == LDCT_EINVAL_CONFIG && has_error(cfg, 6, why[i]), "%s", bad[i]);
        config_free(cfg);
    }
    cfg = load_text("[node]\ntls_caller_names = CT1=ct1.example.org\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "tls_caller_names needs tls_port and tls_ca_certificates"));
    config_free(cfg);
}
END_TEST

/* A [node] list key or a rule's destinations given again goes on with its
 * list (a line holds at most 199 bytes); other keys still take the last
 * value. */
START_TEST(repeated_list_keys_continue_the_list)
{
    int rc;
    ldct_config *cfg = load_text("[node]\ntls_port = 2762\ntls_certificate = /c\n"
                                 "tls_private_key = /k\ntls_ca_certificates = /ca\n"
                                 "tls_caller_names = CT1=h1\ntls_caller_names = CT2=h2\n"
                                 "allowed_calling_aes = CT1\nallowed_calling_aes = CT2, CT1\n"
                                 "allowed_hosts = 10.0.0.1\nallowed_hosts = ::ffff:10.0.0.2\n"
                                 "port = 104\nport = 105\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(config_ae_bound_name(&cfg->node.tls_caller_names, "CT1"), "h1");
    ck_assert_str_eq(config_ae_bound_name(&cfg->node.tls_caller_names, "CT2"), "h2");
    ck_assert_int_eq(cfg->node.allowed_calling_aes.n, 2);
    ck_assert(config_ae_allowed(&cfg->node.allowed_calling_aes, "CT1"));
    ck_assert(config_ae_allowed(&cfg->node.allowed_calling_aes, "CT2"));
    ck_assert_int_eq(cfg->node.allowed_hosts.n, 2);
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "10.0.0.1"));
    ck_assert(config_host_allowed(&cfg->node.allowed_hosts, "10.0.0.2"));
    ck_assert_int_eq(cfg->node.port, 105);
    config_free(cfg);
    cfg = load_text("[node]\ntls_port = 2762\ntls_certificate = /c\ntls_private_key = /k\n"
                    "tls_ca_certificates = /ca\ntls_caller_names = CT1=h1\n"
                    "tls_caller_names = CT1=h2\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 7, "bound twice"));
    config_free(cfg);
    /* A rule's destinations too; a missing one is named at its own line. */
    cfg = load_text("[destination a]\nhost = h\nae_title = A\n[destination b]\nhost = h\n"
                    "ae_title = B\n[rule r]\naction = route\ndestinations = a\n"
                    "destinations = b, a\n[rule s]\naction = route\ndestinations = b\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->rule[0].ndest, 2);
    ck_assert_str_eq(cfg->rule[0].destinations[0], "a");
    ck_assert_str_eq(cfg->rule[0].destinations[1], "b");
    ck_assert_int_eq(cfg->rule[1].ndest, 1); /* another rule starts its own list */
    config_free(cfg);
    /* An empty value resets the list (as in systemd's files). */
    cfg = load_text("[node]\nallowed_calling_aes = CT1\nallowed_calling_aes =\n"
                    "allowed_calling_aes = CT2\n[destination a]\nhost = h\nae_title = A\n"
                    "[rule r]\ndestinations = a\ndestinations = \"\"\n",
                    &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->node.allowed_calling_aes.n, 1);
    ck_assert(config_ae_allowed(&cfg->node.allowed_calling_aes, "CT2"));
    ck_assert_int_eq(cfg->rule[0].ndest, 0);
    config_free(cfg);
    cfg = load_text("[destination a]\nhost = h\nae_title = A\n[rule r]\naction = route\n"
                    "destinations = a\ndestinations = nosuch\n",
                    &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 7, "rule 'r': no [destination nosuch]"));
    ck_assert_int_eq(cfg->nerr, 1);
    config_free(cfg);
}
END_TEST

/* The message names the bounds, so the admin need not look them up. */
START_TEST(out_of_range_names_the_bounds)
{
    int rc;
    ldct_config *cfg = load_text("[node]\nstable_seconds = 0\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "stable_seconds = 0: out of range (1 to 86400)"));
    config_free(cfg);
    /* An integer beyond long was "not an integer". */
    cfg = load_text("[node]\nport = 99999999999999999999\nmax_pdu = -9223372036854775809\n", &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2, "port = 99999999999999999999: out of range (0 to 65535)"));
    ck_assert(has_error(cfg, 3, "max_pdu = -9223372036854775809: out of range (4096 to 4194304)"));
    config_free(cfg);
}
END_TEST

/* ldct filter checks its options through the [rule] table: same bounds. */
START_TEST(rule_option_set_checks_like_a_file)
{
    ldct_config *cfg = NULL;
    ck_assert_int_eq(config_new_defaults(&cfg), 0);
    cfg_rule r = cfg->rule[0];
    ck_assert_ptr_null(config_rule_option_set(&r, "strength", "2.5"));
    ck_assert_double_eq(r.strength, 2.5);
    ck_assert_str_eq(config_rule_option_set(&r, "strength", "0"), "out of range (0.01 to 10)");
    ck_assert_str_eq(config_rule_option_set(&r, "strength", "abc"), "not a number");
    ck_assert_str_eq(config_rule_option_set(&r, "search_radius", "1.5"), "not an integer");
    ck_assert_str_eq(config_rule_option_set(&r, "no_such_key", "1"), "unknown option");
    ck_assert_ptr_null(config_rule_option_set(&r, "kernel", "hann"));
    ck_assert_int_eq(r.fdk_kernel, 4);
    ck_assert_double_eq(r.strength, 2.5); /* a refused value changes nothing */
    config_free(cfg);
}
END_TEST

/* A quoted section name is unquoted in place: under AddressSanitizer the
 * overlapping memcpy that did it aborted the load (memcpy-param-overlap). */
START_TEST(a_quoted_section_name_is_unquoted)
{
    int rc;
    ldct_config *cfg = load_text("[destination \"my pacs\"]\n"
                                 "host = h\n"
                                 "ae_title = P\n"
                                 "[rule \"low dose\"]\n"
                                 "destinations = \"my pacs\"\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cfg->dest[0].name, "my pacs");
    ck_assert_str_eq(cfg->rule[0].name, "low dose");
    ck_assert_str_eq(cfg->rule[0].destinations[0], "my pacs");
    config_free(cfg);
}
END_TEST

/* inih read an indented line as more of the value before it: "  ae_title
 * = X" after "port = 4242" was "port = ae_title = X: not an integer", and
 * an indented [rule b] became rule b's match.modality. */
START_TEST(indented_lines_are_read_as_they_stand)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "  port = 4242\n"
                                 "\tae_title = INDENTED\n"
                                 "  ; an indented comment\n"
                                 "[rule a]\n"
                                 "  match.modality = CT\n"
                                 "  [rule b]\n"
                                 "  action = discard\n",
                                 &rc);
    ck_assert_int_eq(cfg->nerr, 0);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cfg->node.port, 4242);
    ck_assert_str_eq(cfg->node.ae_title, "INDENTED");
    ck_assert_int_eq(cfg->nrule, 2);
    ck_assert_str_eq(cfg->rule[0].modality, "CT");
    ck_assert_str_eq(cfg->rule[1].name, "b");
    ck_assert_str_eq(cfg->rule[1].modality, "");
    ck_assert_int_eq(cfg->rule[1].action, RULE_DISCARD);
    config_free(cfg);
}
END_TEST

START_TEST(a_misspelt_option_gets_a_suggestion)
{
    int rc;
    ldct_config *cfg = load_text("[node]\n"
                                 "stabel_seconds = 5\n"
                                 "colour = blue\n"
                                 "[rule r]\n"
                                 "algoritm = nlm3d\n",
                                 &rc);
    ck_assert_int_eq(rc, LDCT_EINVAL_CONFIG);
    ck_assert(has_error(cfg, 2,
                        "unknown option 'stabel_seconds' in [node] (did you mean "
                        "stable_seconds?)"));
    ck_assert(has_error(cfg, 3, "unknown option 'colour' in [node]"));
    ck_assert(!has_error(cfg, 3, "did you mean"));
    ck_assert(has_error(cfg, 5, "(did you mean algorithm?)"));
    config_free(cfg);
}
END_TEST

/* The reload's log line: what differs, by option and section name. */
START_TEST(changes_name_what_a_reload_changes)
{
    int rc;
    const char *base = "[node]\nstable_seconds = 30\n"
                       "[destination pacs]\nhost = 10.0.0.1\nport = 104\nae_title = PACS\n"
                       "[rule a]\naction = process\ndestinations = pacs\n"
                       "[rule b]\naction = discard\n";
    ldct_config *old = load_text(base, &rc), *same = load_text(base, &rc);
    ck_assert_int_eq(rc, 0);
    char out[512];
    config_changes(old, same, out, sizeof out);
    ck_assert_str_eq(out, "");
    /* Moved in the file (a comment above), one rule's radius and one node
     * value changed, one rule gone, one destination added. */
    ldct_config *cur = load_text("; moved\n[node]\nstable_seconds = 10\nlog_level = debug\n"
                                 "[destination pacs]\nhost = 10.0.0.1\nport = 104\n"
                                 "ae_title = PACS\n"
                                 "[destination archive]\nhost = 10.0.0.2\nport = 104\n"
                                 "ae_title = ARCH\n"
                                 "[rule a]\naction = process\ndestinations = pacs\n"
                                 "search_radius = 7\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    config_changes(old, cur, out, sizeof out);
    ck_assert_str_eq(out, "stable_seconds 30 -> 10; log_level info -> debug; [destination "
                          "archive] added; [rule a] search_radius 0 -> 7; [rule b] removed");
    char small[96]; /* cut: the items that fit whole, then a mark */
    config_changes(old, cur, small, sizeof small);
    ck_assert_str_eq(small, "stable_seconds 30 -> 10; log_level info -> debug; ... (more changes;"
                            " the file shows them)");
    config_free(old);
    config_free(same);
    config_free(cur);
}
END_TEST

/* What the reload compares is the value the file gives, not the bytes a
 * longer earlier value left behind it. */
START_TEST(changes_ignore_what_an_earlier_value_left)
{
    int rc;
    ldct_config *old = load_text("[rule a]\nmatch.manufacturer = Siemens*\n", &rc);
    ldct_config *cur = load_text("[rule a]\nmatch.manufacturer = Philips Healthcare*\n"
                                 "match.manufacturer = Siemens*\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    char out[512];
    config_changes(old, cur, out, sizeof out);
    ck_assert_str_eq(out, "");
    config_free(old);
    config_free(cur);
}
END_TEST

/* Rules of equal priority match in file order: swapping two sections
 * changes which one a series meets first, and the reload says so. */
START_TEST(changes_name_a_new_rule_order)
{
    int rc;
    ldct_config *old = load_text("[rule a]\naction = discard\n[rule b]\naction = discard\n"
                                 "[rule c]\naction = discard\npriority = 5\n",
                                 &rc);
    ldct_config *cur = load_text("[rule b]\naction = discard\n[rule a]\naction = discard\n"
                                 "[rule c]\naction = discard\npriority = 5\n",
                                 &rc);
    ck_assert_int_eq(rc, 0);
    char out[512];
    config_changes(old, cur, out, sizeof out);
    ck_assert_str_eq(out, "rule order c, a, b -> c, b, a");
    config_free(old);
    config_free(cur);
}
END_TEST

/* Options of every kind, with values of any length, say old -> new. */
START_TEST(changes_show_each_kind_of_value)
{
    int rc;
    /* 60 addresses, 10 to a line (a line has at most 199 bytes): a value
     * of about 800 characters */
    char hosts[2200] = "", more[2300];
    for (int i = 1; i <= 60; i++)
        snprintf(hosts + strlen(hosts), sizeof hosts - strlen(hosts), "%s10.0.%d.%d",
                 i == 1        ? ""
                 : i % 10 == 1 ? "\nallowed_hosts = "
                               : ", ",
                 i, 100 + i);
    char a[2600], b[2600];
    snprintf(more, sizeof more, "%s\nallowed_hosts = 10.9.9.9", hosts);
    snprintf(a, sizeof a,
             "[node]\nallowed_hosts = %s\n[destination p]\nhost = 10.0.0.1\nport = 104\n"
             "ae_title = P\n[rule r]\naction = process\nalgorithm = nlm3d\nmatch.kvp = 80..100\n"
             "strength = 1\ndestinations = p\n",
             hosts);
    snprintf(b, sizeof b,
             "[node]\nallowed_hosts = %s\n[destination p]\nhost = 10.0.0.1\nport = 105\n"
             "ae_title = P\n[rule r]\naction = both\nalgorithm = nlm2d\nmatch.kvp = 120..\n"
             "strength = 1.25\ndestinations = p\n",
             more);
    ldct_config *old = load_text(a, &rc), *cur = load_text(b, &rc);
    ck_assert_int_eq(rc, 0);
    char out[8192];
    config_changes(old, cur, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "10.0.60.160 -> 10.0.1.101")); /* old list's end */
    ck_assert_ptr_nonnull(strstr(out, "10.0.60.160, 10.9.9.9; [destination p] port 104 -> 105; "
                                      "[rule r] match.kvp 80..100 -> 120..; [rule r] action "
                                      "process -> both; [rule r] algorithm nlm3d -> nlm2d; "
                                      "[rule r] strength 1 -> 1.25"));
    config_free(old);
    config_free(cur);
}
END_TEST

/* check-config prints what a value that stands for another becomes. */
START_TEST(node_print_shows_effective_values)
{
    ldct_config *cfg;
    ck_assert_int_eq(config_new_defaults(&cfg), 0);
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    ck_assert_ptr_nonnull(f);
    config_node_print(cfg, f);
    fclose(f);
    ck_assert_msg(strstr(text, "max_associations_per_host = 0  ; 12: max_associations but a "
                               "quarter kept for other hosts\n"),
                  "%s", text);
    ck_assert_msg(strstr(text, "\nresults_dir              =  ; ./var/ldct/results\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nmax_associations         = 16\n"), "%s", text);
    free(text);
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
    tcase_add_test(tc, a_misspelt_option_gets_a_suggestion);
    tcase_add_test(tc, a_quoted_section_name_is_unquoted);
    tcase_add_test(tc, indented_lines_are_read_as_they_stand);
    tcase_add_test(tc, empty_node_ae_title_and_state_dir_are_errors_at_their_line);
    tcase_add_test(tc, duplicate_sections_are_errors);
    tcase_add_test(tc, syntax_error_names_the_line);
    tcase_add_test(tc, option_outside_a_section_is_an_error);
    tcase_add_test(tc, missing_file_is_an_errno);
    tcase_add_test(tc, a_directory_is_not_a_configuration_file);
    tcase_add_test(tc, a_nul_byte_is_an_error_at_its_line);
    tcase_add_test(tc, rules_parse_with_their_defaults);
    tcase_add_test(tc, rule_errors_name_their_lines);
    tcase_add_test(tc, ranges_take_finite_numbers_only);
    tcase_add_test(tc, fdk_rule_keys_parse_with_defaults_and_bounds);
    tcase_add_test(tc, patch_weighting_parses_and_bad_values_name_their_line);
    tcase_add_test(tc, distance_cutoff_parses_with_bounds_and_default_4);
    tcase_add_test(tc, rules_are_ordered_by_priority_then_file_order);
    tcase_add_test(tc, wildcards_match_case_insensitively);
    tcase_add_test(tc, glob_steps_by_utf8_character);
    tcase_add_test(tc, question_mark_matches_one_utf8_character);
    tcase_add_test(tc, overlong_forms_in_a_value_are_stray_bytes);
    tcase_add_test(tc, case_folds_by_unicode_lower_case_mapping);
    tcase_add_test(tc, rule_text_that_is_not_utf8_is_refused);
    tcase_add_test(tc, text_patterns_hold_64_characters_of_utf8);
    tcase_add_test(tc, suffix_with_a_delimiter_or_control_character_is_refused);
    tcase_add_test(tc, allow_lists_match_exactly);
    tcase_add_test(tc, addresses_must_be_numeric_and_are_kept_canonical);
    tcase_add_test(tc, zone_ids_and_ranges_in_allowed_hosts_are_refused_at_their_line);
    tcase_add_test(tc, route_and_both_need_destinations);
    tcase_add_test(tc, without_rules_ct_goes_to_the_results_folder);
    tcase_add_test(tc, uid_root_devices_and_retries_are_checked);
    tcase_add_test(tc, uid_root_check_is_the_files);
    tcase_add_test(tc, nan_and_infinity_are_out_of_range);
    tcase_add_test(tc, out_of_range_names_the_bounds);
    tcase_add_test(tc, gpu_check_and_down_wait_have_defaults_and_bounds);
    tcase_add_test(tc, tls_keys_belong_together);
    tcase_add_test(tc, tls_caller_names_bind_ae_titles);
    tcase_add_test(tc, repeated_list_keys_continue_the_list);
    tcase_add_test(tc, adaptive4d_mapping_keys_parse_with_defaults_and_bounds);
    tcase_add_test(tc, rule_option_set_checks_like_a_file);
    tcase_add_test(tc, changes_name_what_a_reload_changes);
    tcase_add_test(tc, changes_ignore_what_an_earlier_value_left);
    tcase_add_test(tc, changes_name_a_new_rule_order);
    tcase_add_test(tc, changes_show_each_kind_of_value);
    tcase_add_test(tc, node_print_shows_effective_values);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
