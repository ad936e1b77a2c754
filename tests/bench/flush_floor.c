/* The cost of ldctd's durability on this disk, without DICOM: per instance,
 * write 525 KB (32 writes of 16 KiB, as PDVs arrive) into a temp file, then
 * one of these sequences, and print milliseconds per instance:
 *   write-only   rename, no flush (what storescp does)
 *   serial       fsync(file), rename, fsync(dir), SQLite commit (ldctd)
 *   tmpfile      O_TMPFILE, fsync(file), linkat, fsync(dir), commit
 *   overlapped   the commit on a second thread while fsync(file), rename
 *                and fsync(dir) run
 * The SQLite database runs as ldctd's: WAL, synchronous=FULL, one
 * transaction per instance. Used by tests/bench/flush_floor.sh; single
 * threaded except for the overlapped variant's commit thread. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 16384, CHUNKS = 32 };

static char g_chunk[CHUNK];
static sqlite3 *g_db;
static sqlite3_stmt *g_insert;
static int g_row;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int write_instance(int fd)
{
    for (int i = 0; i < CHUNKS; i++) {
        if (write(fd, g_chunk, CHUNK) != CHUNK)
            return -1;
        (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
    return 0;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void *commit_row(void *unused)
{
    (void)unused;
    sqlite3_exec(g_db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_bind_int(g_insert, 1, g_row);
    sqlite3_step(g_insert);
    sqlite3_reset(g_insert);
    sqlite3_exec(g_db, "COMMIT", NULL, NULL, NULL);
    return NULL;
}

static int store_tmpfile(const char *dir, const char *final)
{
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0640);
    if (fd < 0 || write_instance(fd) || fsync(fd))
        return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int rc = linkat(AT_FDCWD, proc, AT_FDCWD, final, AT_SYMLINK_FOLLOW);
    close(fd);
    if (rc || fsync_path(dir))
        return -1;
    commit_row(NULL);
    return 0;
}

static int store(const char *variant, const char *base, int i)
{
    char dir[512], tmp[600], final[600];
    snprintf(dir, sizeof dir, "%s/series", base);
    snprintf(final, sizeof final, "%s/%d.dcm", dir, i);
    snprintf(tmp, sizeof tmp, "%s/tmp/%d.part", base, i);
    g_row = i;
    if (!strcmp(variant, "tmpfile"))
        return store_tmpfile(dir, final);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0 || write_instance(fd))
        return -1;
    if (!strcmp(variant, "write-only")) {
        close(fd);
        return rename(tmp, final);
    }
    pthread_t t;
    int overlapped = !strcmp(variant, "overlapped");
    if (overlapped && pthread_create(&t, NULL, commit_row, NULL))
        return -1;
    int rc = fsync(fd);
    close(fd);
    rc = rc || rename(tmp, final) || fsync_path(dir);
    if (overlapped)
        pthread_join(t, NULL);
    else
        commit_row(NULL);
    return rc ? -1 : 0;
}

static int open_db(const char *base)
{
    char p[512];
    snprintf(p, sizeof p, "%s/flush.db", base);
    if (sqlite3_open(p, &g_db) != SQLITE_OK)
        return -1;
    if (sqlite3_exec(g_db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE IF NOT EXISTS rows(id INTEGER PRIMARY KEY, uid TEXT);"
                     "CREATE INDEX IF NOT EXISTS rows_uid ON rows(uid);",
                     NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    return sqlite3_prepare_v2(g_db,
                              "INSERT OR REPLACE INTO rows VALUES (?, "
                              "'1.2.826.0.1.3680043.8.498.12345678901234567890123456789')",
                              -1, &g_insert, NULL) == SQLITE_OK
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: flush_floor write-only|serial|tmpfile|overlapped N EMPTY_DIR\n");
        return 2;
    }
    const char *variant = argv[1], *base = argv[3];
    int n = atoi(argv[2]);
    char p[512];
    snprintf(p, sizeof p, "%s/tmp", base);
    mkdir(p, 0750);
    snprintf(p, sizeof p, "%s/series", base);
    mkdir(p, 0750);
    for (size_t i = 0; i < sizeof g_chunk; i++)
        g_chunk[i] = (char)(i * 2654435761u >> 24);
    if (open_db(base)) {
        fprintf(stderr, "flush_floor: cannot open the database in %s\n", base);
        return 1;
    }
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (store(variant, base, i)) {
            perror("flush_floor");
            return 1;
        }
    printf("%s %.3f ms/instance\n", variant, (now_s() - t0) * 1e3 / n);
    sqlite3_finalize(g_insert);
    sqlite3_close(g_db);
    return 0;
}
