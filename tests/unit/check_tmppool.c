/* Unit tests of pipeline/tmppool: the files it hands out exist, are empty
 * and distinct, it makes more as they are taken, it removes what nobody
 * took when freed, and it keeps working (without files) when it cannot
 * create any. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/tmppool.h"
#include "testutil.h"

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Takes a file, waiting up to 5 s for the refill thread. */
static int take_waiting(tmppool *p, char *path, size_t len)
{
    for (int i = 0; i < 500; i++) {
        if (tmppool_take(p, path, len))
            return 1;
        usleep(10000);
    }
    return 0;
}

START_TEST(taken_files_exist_empty_and_distinct_and_are_replaced)
{
    char dir[64], paths[40][1400];
    tu_tmpdir(dir, sizeof dir);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(dir, "77", 8, &p), 0);
    for (int i = 0; i < 40; i++) { /* five times the pool: it refills */
        ck_assert_msg(take_waiting(p, paths[i], sizeof paths[i]), "no file after 5 s (%d)", i);
        struct stat st;
        ck_assert_int_eq(stat(paths[i], &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_int_eq((int)st.st_size, 0);
        ck_assert_ptr_nonnull(strstr(paths[i], dir));
        ck_assert_ptr_nonnull(strstr(paths[i], "/77-p"));
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(paths[i], paths[j]);
    }
    tmppool_free(p);
    /* The 40 taken files are the caller's; the rest were removed. */
    ck_assert_int_eq(count_entries(dir), 40);
    for (int i = 0; i < 40; i++)
        unlink(paths[i]);
    rmdir(dir);
}
END_TEST

START_TEST(free_removes_the_files_nobody_took)
{
    char dir[64], path[1400];
    tu_tmpdir(dir, sizeof dir);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(dir, "9", 16, &p), 0);
    ck_assert(take_waiting(p, path, sizeof path));
    for (int i = 0; i < 500 && count_entries(dir) < 17; i++)
        usleep(10000); /* the pool refilled to 16 beside the taken one */
    ck_assert_int_eq(count_entries(dir), 17);
    tmppool_free(p);
    ck_assert_int_eq(count_entries(dir), 1);
    ck_assert_int_eq(access(path, F_OK), 0);
    unlink(path);
    rmdir(dir);
    tmppool_free(NULL);
}
END_TEST

/* A directory it cannot write to: no file is offered, nothing blocks, and
 * once the directory exists files come. */
START_TEST(without_a_directory_it_offers_nothing_until_there_is_one)
{
    char dir[64], sub[128], path[1400];
    tu_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/later", dir);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(sub, "1", 4, &p), 0);
    usleep(50000);
    ck_assert_int_eq(tmppool_take(p, path, sizeof path), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_msg(take_waiting(p, path, sizeof path), "no file once the directory exists");
    ck_assert_int_eq(access(path, F_OK), 0);
    tmppool_free(p);
    unlink(path);
    ck_assert_int_eq(count_entries(sub), 0);
    rmdir(sub);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tmppool");
    TCase *tc = tcase_create("tmppool");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, taken_files_exist_empty_and_distinct_and_are_replaced);
    tcase_add_test(tc, free_removes_the_files_nobody_took);
    tcase_add_test(tc, without_a_directory_it_offers_nothing_until_there_is_one);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
