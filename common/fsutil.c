/* Durable file-system helpers; see fsutil.h. */
#include "common/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int fs_dirname(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return snprintf(dir, len, ".") < (int)len ? 0 : -ENAMETOOLONG;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= len)
        return -ENAMETOOLONG;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return 0;
}

int fs_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

int fs_mkdirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0750) == 0) {
            char parent[4096];
            /* A new directory entry is only durable once its parent is synced. */
            if (fs_dirname(buf, parent, sizeof parent) == 0)
                (void)fs_fsync_path(parent);
        } else if (errno != EEXIST) {
            return -errno;
        }
        buf[i] = saved;
    }
    return 0;
}

int fs_rename_durable(const char *from, const char *to)
{
    if (rename(from, to) != 0)
        return -errno;
    char dir[4096];
    int rc = fs_dirname(to, dir, sizeof dir);
    return rc ? rc : fs_fsync_path(dir);
}

int fs_free_mb(const char *path, uint64_t *mb)
{
    struct statvfs st;
    if (statvfs(path, &st) != 0)
        return -errno;
    *mb = (uint64_t)st.f_bavail * st.f_frsize / (1024 * 1024);
    return 0;
}

int fs_free_mb_inodes(const char *path, uint64_t *mb, uint64_t *inodes)
{
    struct statvfs st;
    if (statvfs(path, &st) != 0)
        return -errno;
    *mb = (uint64_t)st.f_bavail * st.f_frsize / (1024 * 1024);
    *inodes = st.f_files == 0 ? UINT64_MAX : (uint64_t)st.f_favail;
    return 0;
}

int fs_free_inodes(const char *path, uint64_t *n)
{
    uint64_t mb;
    return fs_free_mb_inodes(path, &mb, n);
}

int fs_space_bytes(const char *path, uint64_t *avail, uint64_t *total)
{
    struct statvfs st;
    if (statvfs(path, &st) != 0)
        return -errno;
    *avail = (uint64_t)st.f_bavail * st.f_frsize;
    *total = (uint64_t)st.f_blocks * st.f_frsize;
    return 0;
}

/* Reads up to len bytes (fewer only at the end of the file). */
static ssize_t read_full(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* 1 if the files open on fa and fb hold the same bytes. */
static int same_bytes(int fa, int fb)
{
    char a[16384], b[16384];
    for (;;) {
        ssize_t na = read_full(fa, a, sizeof a), nb = read_full(fb, b, sizeof b);
        if (na < 0 || nb < 0 || na != nb || memcmp(a, b, (size_t)na) != 0)
            return 0;
        if (na < (ssize_t)sizeof a)
            return 1;
    }
}

int fs_same_content(const char *a, const char *b)
{
    int fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC);
    struct stat sa, sb;
    int same = fa >= 0 && fb >= 0 && fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0 &&
               sa.st_size == sb.st_size && same_bytes(fa, fb);
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    return same;
}
