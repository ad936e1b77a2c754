/* Unit tests of pipeline/tmppool: the files it hands out exist, are empty
 * and distinct, it makes more as they are taken, it removes what nobody
 * took when freed, and it keeps working (without files) when it cannot
 * create any. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
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

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A stop that comes while the refill thread tries to create a file (here in
 * a directory that does not exist, under a deep path so that the failing
 * open takes long enough to be hit) must not wait out the 1 s retry: the
 * stop's wake-up came while nobody waited. About 1 in 10 cycles hit that
 * window before the fix. */
START_TEST(free_returns_at_once_when_stopped_during_a_failing_batch)
{
    char dir[64], deep[1000];
    tu_tmpdir(dir, sizeof dir);
    int len = snprintf(deep, sizeof deep, "%s", dir);
    for (int i = 0; i < 400 && len < 900; i++) {
        len += snprintf(deep + len, sizeof deep - (size_t)len, "/d");
        ck_assert_int_eq(mkdir(deep, 0700), 0);
    }
    snprintf(deep + len, sizeof deep - (size_t)len, "/missing");
    for (int i = 0; i < 100; i++) {
        tmppool *p = NULL;
        ck_assert_int_eq(tmppool_new(deep, "1", 4, &p), 0);
        usleep((useconds_t)(i % 60));
        const double t0 = mono_s();
        tmppool_free(p);
        const double took = mono_s() - t0;
        ck_assert_msg(took < 0.5, "tmppool_free took %.2f s (cycle %d)", took, i);
    }
    for (char *slash; (slash = strrchr(deep, '/')) && strlen(deep) > strlen(dir);) {
        *slash = '\0';
        rmdir(deep);
    }
    rmdir(dir);
}
END_TEST

/* A pooled file becomes a stored instance: it gets the mode DCMTK's
 * fopen(path, "wb") gives a fresh one (0666 less the umask), so that an
 * instance's mode does not depend on whether the pool had a file. */
START_TEST(files_have_the_mode_of_a_file_dcmtk_creates)
{
    char dir[64], path[1400];
    tu_tmpdir(dir, sizeof dir);
    const mode_t old = umask(022);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(dir, "5", 8, &p), 0);
    ck_assert(take_waiting(p, path, sizeof path));
    tmppool_free(p);
    umask(old);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq((int)(st.st_mode & 0777), 0644);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* An empty pool refills at once, whatever its size: a pool of under 4
 * files (a quarter of it rounds to 0) used to wait for 50 ms without a
 * take even when empty, so a steady stream of takes got no file. */
START_TEST(an_empty_small_pool_refills_while_takes_keep_coming)
{
    char dir[64], path[1400];
    tu_tmpdir(dir, sizeof dir);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(dir, "8", 2, &p), 0);
    for (int i = 0; i < 6; i++) { /* three times the pool, a take every 10 ms */
        ck_assert_msg(take_waiting(p, path, sizeof path), "no file after 5 s (%d)", i);
        unlink(path);
    }
    tmppool_free(p);
    ck_assert_int_eq(count_entries(dir), 0);
    rmdir(dir);
}
END_TEST

/* The thread ids of this process, at most n, into tids; the count. */
static int list_threads(int *tids, int n)
{
    DIR *d = opendir("/proc/self/task");
    int k = 0;
    for (struct dirent *e; d && k < n && (e = readdir(d));)
        if (e->d_name[0] != '.')
            tids[k++] = atoi(e->d_name);
    if (d)
        closedir(d);
    return k;
}

/* The refill thread blocks every signal: a process-directed SIGTERM that
 * comes after ldctd closed its handlers (a second one while it stops) must
 * not be delivered, with its default action, through this thread. */
START_TEST(the_refill_thread_takes_no_signal)
{
    char dir[64];
    tu_tmpdir(dir, sizeof dir);
    int before[64], after[64];
    const int nb = list_threads(before, 64);
    /* Check runs a test with most signals blocked, which a new thread would
     * inherit: ldctd's threads block only SIGHUP. */
    sigset_t none, saved;
    sigemptyset(&none);
    sigaddset(&none, SIGHUP);
    pthread_sigmask(SIG_SETMASK, &none, &saved);
    tmppool *p = NULL;
    ck_assert_int_eq(tmppool_new(dir, "6", 8, &p), 0);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    /* A new thread runs with every signal blocked until it sets the mask
     * it inherited: a file made shows that it has. */
    char path[1400];
    ck_assert(take_waiting(p, path, sizeof path));
    unlink(path);
    const int na = list_threads(after, 64);
    int refill = 0;
    for (int i = 0; i < na; i++) {
        int old = 0;
        for (int j = 0; j < nb; j++)
            old |= after[i] == before[j];
        if (!old)
            refill = after[i];
    }
    ck_assert_int_ne(refill, 0);
    char status[128], line[256];
    snprintf(status, sizeof status, "/proc/self/task/%d/status", refill);
    FILE *f = fopen(status, "r");
    ck_assert_ptr_nonnull(f);
    unsigned long long blocked = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
            break;
    fclose(f);
    tmppool_free(p);
    ck_assert_msg(blocked & (1ULL << (SIGTERM - 1)), "SIGTERM not blocked: %llx", blocked);
    ck_assert_msg(blocked & (1ULL << (SIGINT - 1)), "SIGINT not blocked: %llx", blocked);
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
    tcase_add_test(tc, free_returns_at_once_when_stopped_during_a_failing_batch);
    tcase_add_test(tc, files_have_the_mode_of_a_file_dcmtk_creates);
    tcase_add_test(tc, an_empty_small_pool_refills_while_takes_keep_coming);
    tcase_add_test(tc, the_refill_thread_takes_no_signal);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
