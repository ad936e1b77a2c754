/* Unit tests for daemon/lockfile: whether an ldctd holds ldctd.lock (seen in
 * /proc/locks, the lock never taken by the reader) and what the text left
 * in it says of how the last run ended. */
#include "daemon/lockfile.h"
#include "tests/unit/testutil.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

START_TEST(the_text_tells_a_receiving_run_from_a_stopped_one)
{
    ck_assert_int_eq(lockfile_text_receiving("4242" LOCKFILE_RECEIVING "\n"), 1);
    ck_assert_int_eq(lockfile_text_receiving(""), 0);
    ck_assert_int_eq(lockfile_text_receiving("4242\n"), -1); /* an older ldctd */
    ck_assert_int_eq(lockfile_text_receiving("4242 stopped\n"), -1);
}
END_TEST

static void write_lock(const char *dir, const char *text)
{
    char path[1100];
    tu_write(dir, "ldctd.lock", text, path, sizeof path);
}

START_TEST(no_lock_file_means_no_ldctd_ever_ran)
{
    char dir[64];
    long pid = -1;
    tu_tmpdir(dir, sizeof dir);
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_STOPPED);
    ck_assert_int_eq(pid, 0);
}
END_TEST

START_TEST(an_unheld_lock_says_how_the_last_run_ended)
{
    char dir[64];
    long pid = -1;
    tu_tmpdir(dir, sizeof dir);
    write_lock(dir, "4242" LOCKFILE_RECEIVING "\n");
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_KILLED);
    ck_assert_int_eq(pid, 0);
    write_lock(dir, "");
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_STOPPED);
    write_lock(dir, "4242\n");
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_STOPPED);
}
END_TEST

/* The holder is found whatever the text says (a stopping ldctd has emptied
 * it already). */
START_TEST(a_held_lock_names_its_holder)
{
    char dir[64], path[1100];
    long pid = 0;
    tu_tmpdir(dir, sizeof dir);
    write_lock(dir, "");
    lockfile_path(dir, path, sizeof path);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_RUNNING);
    ck_assert_int_eq(pid, (long)getpid());
    ck_assert_int_eq(flock(fd, LOCK_UN), 0);
    ck_assert_int_eq(lockfile_daemon_state(dir, &pid), LDCTD_STOPPED);
    close(fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lockfile");
    TCase *tc = tcase_create("lockfile");
    tcase_add_test(tc, the_text_tells_a_receiving_run_from_a_stopped_one);
    tcase_add_test(tc, no_lock_file_means_no_ldctd_ever_ran);
    tcase_add_test(tc, an_unheld_lock_says_how_the_last_run_ended);
    tcase_add_test(tc, a_held_lock_names_its_holder);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
