/* lockfile: who holds ldctd.lock and what its last writer left in it
 * (lockfile.h). */
#include "daemon/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

const char *ldctd_state_name(ldctd_state s)
{
    static const char *const names[] = {"unknown", "running", "stopped", "killed"};
    return names[s];
}

void lockfile_path(const char *state_dir, char *out, size_t len)
{
    snprintf(out, len, "%s/ldctd.lock", state_dir);
}

int lockfile_text_receiving(const char *text)
{
    if (text[0] < '0' || text[0] > '9')
        return 0;
    const char *rest = text + strspn(text, "0123456789");
    return strncmp(rest, LOCKFILE_RECEIVING, strlen(LOCKFILE_RECEIVING)) == 0 ? 1 : -1;
}

/* 1 if process pid is an ldctd (its /proc comm), else 0. */
static int pid_is_ldctd(long pid)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(comm, sizeof comm, f) && strcmp(comm, "ldctd\n") == 0;
    fclose(f);
    return ok;
}

/* The pid of the process whose flock(2) is held on the file st describes,
 * from a /proc/locks line "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0
 * EOF" (device numbers in hex); 0 if none; -1 if /proc/locks cannot be
 * read. On an overlay file system the lock names the lower file's device,
 * so an inode match counts when the holder is an ldctd. */
static long flock_holder(const struct stat *st)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f)
        return -1;
    char line[256];
    long holder = 0;
    while (!holder && fgets(line, sizeof line, f)) {
        long pid;
        unsigned maj, min;
        unsigned long ino;
        if (sscanf(line, "%*d: FLOCK %*s %*s %ld %x:%x:%lu", &pid, &maj, &min, &ino) != 4 ||
            ino != (unsigned long)st->st_ino)
            continue; /* also "N: -> FLOCK ...", a waiter, whose fields do not scan */
        if ((maj == major(st->st_dev) && min == minor(st->st_dev)) || pid_is_ldctd(pid))
            holder = pid;
    }
    fclose(f);
    return holder;
}

/* The lock's text, "" when it cannot be read; returns -1 then. */
static int read_lock_text(const char *path, char *text, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, text, len - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return n < 0 ? -1 : 0;
}

ldctd_state lockfile_daemon_state(const char *state_dir, long *pid)
{
    char path[1100], text[64];
    struct stat st;
    *pid = 0;
    lockfile_path(state_dir, path, sizeof path);
    if (stat(path, &st) != 0)
        return errno == ENOENT ? LDCTD_STOPPED : LDCTD_UNKNOWN; /* ENOENT: none ever ran here */
    long holder = flock_holder(&st);
    if (holder < 0)
        return LDCTD_UNKNOWN;
    if (holder > 0) {
        *pid = holder;
        return LDCTD_RUNNING;
    }
    if (read_lock_text(path, text, sizeof text))
        return LDCTD_UNKNOWN;
    return lockfile_text_receiving(text) == 1 ? LDCTD_KILLED : LDCTD_STOPPED;
}
