/* Unit tests of the FDK backprojector's genetic-algorithm tuner and its
 * cache (gpu/fdk_tune.c), on the CPU: the search runs against synthetic
 * fitness landscapes with a known optimum (the GPU measurement is only the
 * fitness function; it runs on the device), repair keeps every measured
 * configuration valid, and the cache stores, replaces and finds entries.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "gpu/fdk_tune.h"
#include "testutil.h"

typedef struct landscape {
    gpu_fdk_cfg opt; /* the optimum */
    int evaluations, invalid;
    int max_threads, max_i;
    int fail_i_above; /* > 0: configurations with I above this cannot run */
} landscape;

static int is_pow2(int v)
{
    return v > 0 && !(v & (v - 1));
}

static int valid(const landscape *l, const gpu_fdk_cfg *c)
{
    return c->i >= 1 && c->i <= l->max_i && (c->k == 1 || c->k == 2 || c->k == 4 || c->k == 8) &&
           is_pow2(c->bx) && is_pow2(c->by) && c->bx * c->by <= l->max_threads &&
           (c->bx * c->by) % 32 == 0;
}

/* A smooth bowl in log space around the optimum, 100 ms at its bottom. */
static int bowl(void *ctx, const gpu_fdk_cfg *c, double *ms)
{
    landscape *l = ctx;
    l->evaluations++;
    if (!valid(l, c))
        l->invalid++;
    if (l->fail_i_above > 0 && c->i > l->fail_i_above)
        return LDCT_ENOMEM_GPU;
    *ms = 100 + 10 * fabs(log2((double)c->i / l->opt.i)) +
          20 * fabs(log2((double)c->k / l->opt.k)) + 15 * fabs(log2((double)c->bx / l->opt.bx)) +
          5 * fabs(log2((double)c->by / l->opt.by));
    return 0;
}

static gpu_fdk_ga_result run_ga(landscape *l, uint64_t seed, int generations)
{
    gpu_fdk_ga_opts o;
    gpu_fdk_ga_opts_default(&o);
    o.seed = seed;
    o.generations = generations;
    o.patience = generations;
    o.max_i = l->max_i;
    o.max_threads = l->max_threads;
    gpu_fdk_ga_result r;
    ck_assert_int_eq(gpu_fdk_ga_run(&o, bowl, l, &r), 0);
    return r;
}

START_TEST(repair_makes_blocks_valid_and_clamps_i)
{
    landscape l = {.max_threads = 1024, .max_i = 20};
    gpu_fdk_cfg cases[] = {{64, 4, 512, 128}, {1, 1, 4, 1}, {0, 2, 8, 2}, {33, 8, 512, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gpu_fdk_cfg c = cases[i];
        gpu_fdk_cfg_repair(&c, 1024, 20);
        ck_assert_msg(valid(&l, &c), "case %zu -> %d,%d,%d,%d", i, c.i, c.k, c.bx, c.by);
    }
    gpu_fdk_cfg c = {64, 4, 512, 128};
    gpu_fdk_cfg_repair(&c, 256, 64);
    ck_assert_int_le(c.bx * c.by, 256);
}
END_TEST

START_TEST(repair_terminates_on_absurd_values)
{
    gpu_fdk_cfg c = {100000, 4, 65536, 65536};
    gpu_fdk_cfg_repair(&c, 1024, 64);
    landscape l = {.max_threads = 1024, .max_i = 64};
    ck_assert(valid(&l, &c));
    gpu_fdk_cfg z = {0, 1, 0, -8};
    gpu_fdk_cfg_repair(&z, 1024, 64);
    ck_assert(valid(&l, &z));
}
END_TEST

START_TEST(damaged_cache_lines_are_ignored)
{
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    tu_write(dir, "fdk-tune.cache",
             "G\t496x1248x960\t512x512x512\t32,4,65536,65536\t1.0\n"
             "G\t496x1248x960\t512x512x512\t0,4,32,8\t1.0\n"
             "G\t0x1248x960\t512x512x512\t32,4,32,8\t1.0\n"
             "G\tgarbage\n",
             path, sizeof path);
    gpu_fdk_cfg got;
    ck_assert_int_eq(gpu_fdk_tune_cache_lookup(path, "G", 496, 1248, 960, 512, 512, 512, &got),
                     LDCT_ENOTFOUND);
    /* A valid store next to them works and is found. */
    gpu_fdk_cfg c = {16, 4, 32, 8};
    ck_assert_int_eq(gpu_fdk_tune_cache_store(path, "G", 496, 1248, 960, 512, 512, 512, &c, 2.0),
                     0);
    ck_assert_int_eq(gpu_fdk_tune_cache_lookup(path, "G", 496, 1248, 960, 512, 512, 512, &got), 0);
    ck_assert_int_eq(got.i, 16);
    unlink(path);
    char lock[160];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    rmdir(dir);
}
END_TEST

START_TEST(ga_finds_the_optimum_of_a_bowl_with_few_measurements)
{
    /* 64 x 4 x 8 x 8 genomes, about 1500 valid configurations. */
    const gpu_fdk_cfg optima[] = {{16, 4, 64, 4}, {40, 2, 32, 8}, {8, 8, 128, 2}};
    for (size_t t = 0; t < sizeof optima / sizeof optima[0]; t++) {
        landscape l = {.opt = optima[t], .max_threads = 1024, .max_i = 64};
        gpu_fdk_ga_result r = run_ga(&l, 1234 + t, 30);
        printf("optimum %d,%d,%d,%d: found %d,%d,%d,%d %.2f ms after %d measurements, %d "
               "generations\n",
               l.opt.i, l.opt.k, l.opt.bx, l.opt.by, r.best.i, r.best.k, r.best.bx, r.best.by,
               r.best_ms, r.evaluations, r.generations);
        ck_assert_int_eq(l.invalid, 0);
        ck_assert_int_eq(r.evaluations, l.evaluations); /* each configuration measured once */
        ck_assert(valid(&l, &r.best));
        /* Within 3% of the optimum (one step of I costs 10 / log2 step). */
        ck_assert_msg(r.best_ms <= 103.0, "best %.2f ms", r.best_ms);
        ck_assert_int_lt(r.evaluations, 400);
    }
}
END_TEST

START_TEST(ga_best_never_worse_than_the_default_which_joins_the_race)
{
    landscape l = {.opt = {32, 4, 32, 8}, .max_threads = 1024, .max_i = 64};
    gpu_fdk_ga_result r = run_ga(&l, 99, 1);
    ck_assert_double_eq_tol(r.best_ms, 100.0, 1e-9); /* generation 1 holds the default */
}
END_TEST

START_TEST(ga_survives_configurations_that_cannot_run)
{
    landscape l = {.opt = {48, 4, 32, 8}, .max_threads = 1024, .max_i = 64, .fail_i_above = 24};
    gpu_fdk_ga_result r = run_ga(&l, 7, 20);
    ck_assert_int_le(r.best.i, 24);
    ck_assert(r.best_ms <= 110.0 + 1e-9); /* I = 24, the best that can run */
}
END_TEST

START_TEST(ga_rejects_bad_options)
{
    gpu_fdk_ga_opts o;
    gpu_fdk_ga_opts_default(&o);
    o.population = 1;
    gpu_fdk_ga_result r;
    landscape l = {.opt = {16, 4, 64, 4}, .max_threads = 1024, .max_i = 64};
    ck_assert_int_eq(gpu_fdk_ga_run(&o, bowl, &l, &r), LDCT_EINPUT);
}
END_TEST

START_TEST(cache_stores_replaces_and_finds_nearest)
{
    char dir[64], path[128];
    tu_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/fdk-tune.cache", dir);
    gpu_fdk_cfg a = {16, 4, 64, 4}, b = {32, 2, 32, 8}, c = {8, 8, 128, 2}, got;
    ck_assert_int_eq(gpu_fdk_tune_cache_lookup(path, "GPU X", 496, 1248, 960, 512, 512, 512, &got),
                     LDCT_ENOTFOUND);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_store(path, "NVIDIA H200", 496, 1248, 960, 512, 512, 512, &a, 90), 0);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_store(path, "NVIDIA H200", 124, 312, 240, 128, 128, 128, &b, 2), 0);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_store(path, "Other GPU", 496, 1248, 960, 512, 512, 512, &b, 300), 0);
    /* Same key again: replaced, not appended. */
    ck_assert_int_eq(
        gpu_fdk_tune_cache_store(path, "NVIDIA H200", 496, 1248, 960, 512, 512, 512, &c, 85), 0);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int lines = 0;
    for (int ch; (ch = fgetc(f)) != EOF;)
        lines += ch == '\n';
    fclose(f);
    ck_assert_int_eq(lines, 3);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_lookup(path, "NVIDIA H200", 496, 1248, 960, 512, 512, 512, &got), 0);
    ck_assert(got.i == c.i && got.k == c.k && got.bx == c.bx && got.by == c.by);
    /* 400 projections into 480^3 is nearer to the big entry than to the small one. */
    ck_assert_int_eq(
        gpu_fdk_tune_cache_lookup(path, "NVIDIA H200", 400, 1248, 960, 480, 480, 480, &got), 1);
    ck_assert(got.i == c.i && got.bx == c.bx);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_lookup(path, "NVIDIA H200", 100, 300, 240, 128, 128, 100, &got), 1);
    ck_assert(got.i == b.i && got.bx == b.bx);
    ck_assert_int_eq(gpu_fdk_tune_cache_lookup(path, "GPU X", 496, 1248, 960, 512, 512, 512, &got),
                     LDCT_ENOTFOUND);
    /* The process-wide file is what a NULL path means. */
    gpu_fdk_tune_cache_set(path);
    ck_assert_int_eq(
        gpu_fdk_tune_cache_lookup(NULL, "Other GPU", 496, 1248, 960, 512, 512, 512, &got), 0);
    ck_assert(got.i == b.i && got.k == b.k);
    gpu_fdk_tune_cache_set(NULL);
    unlink(path);
    char lock[160];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    rmdir(dir);
}
END_TEST

static Suite *tune_suite(void)
{
    Suite *s = suite_create("fdk_tune");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, repair_makes_blocks_valid_and_clamps_i);
    tcase_add_test(tc, repair_terminates_on_absurd_values);
    tcase_add_test(tc, damaged_cache_lines_are_ignored);
    tcase_add_test(tc, ga_finds_the_optimum_of_a_bowl_with_few_measurements);
    tcase_add_test(tc, ga_best_never_worse_than_the_default_which_joins_the_race);
    tcase_add_test(tc, ga_survives_configurations_that_cannot_run);
    tcase_add_test(tc, ga_rejects_bad_options);
    tcase_add_test(tc, cache_stores_replaces_and_finds_nearest);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(tune_suite());
}
