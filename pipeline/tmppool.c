/* tmppool: empty temp files made ahead of time (see tmppool.h). One refill
 * thread creates and fsyncs files while fewer than `target` are ready; the
 * ready ones sit in a ring guarded by `lock`. Above a quarter of the
 * target it refills only after IDLE_MS without a take, so a burst of
 * stores does not share the disk with the refill's fsyncs; below it, at
 * once. */
#include "pipeline/tmppool.h"

#include "common/fsutil.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { BATCH = 8, RETRY_S = 1, IDLE_MS = 50, RESERVE_LEFT = 1 };

struct tmppool {
    char dir[1100], prefix[64];
    int target;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the refill thread waits on it */
    pthread_t thread;
    atomic_int stop;            /* set under lock (for `wake`); make_batch reads it */
    unsigned long long next_id; /* refill thread only */
    uint64_t free_inodes;       /* refill thread only: at the last RESERVE_LEFT */
    unsigned long long *ready;  /* ring of ids, capacity target */
    int head, count;            /* under lock */
    struct timespec last_take;  /* under lock; CLOCK_MONOTONIC */
};

static void name_of(const tmppool *p, unsigned long long id, char *path, size_t len)
{
    snprintf(path, len, "%s/%s-p%llu.part", p->dir, p->prefix, id);
}

/* Creates and fsyncs one file; 0, -errno, or RESERVE_LEFT when only the
 * reserve of free inodes is left (their count into p->free_inodes). */
static int make_one(tmppool *p, unsigned long long id)
{
    uint64_t inodes;
    if (fs_free_inodes(p->dir, &inodes) == 0 && inodes <= TMPPOOL_INODE_RESERVE) {
        p->free_inodes = inodes;
        return RESERVE_LEFT;
    }
    char path[1300];
    name_of(p, id, path, sizeof path);
    /* 0666 less the umask, as DCMTK's fopen(path, "wb") creates a fresh
     * file: a stored instance's mode does not depend on whether the pool
     * had a file for it (the unit's UMask= decides for both). */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -errno;
    /* The first fsync of a new file also writes its directory entry (ext4)
     * or commits its creation (journals): done here, off the store's path. */
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    if (rc)
        unlink(path);
    return rc;
}

/* Makes up to n files; their ids into ids[], the count returned (*err: the
 * failure that ended the batch early, else 0). A stop ends it between files:
 * each one's fsync may take long on a busy disk. */
static int make_batch(tmppool *p, int n, unsigned long long *ids, int *err)
{
    int made = 0;
    *err = 0;
    while (made < n && !*err && !atomic_load(&p->stop)) {
        const unsigned long long id = p->next_id++;
        if ((*err = make_one(p, id)) == 0)
            ids[made++] = id;
    }
    return made;
}

/* Waits on `wake` for at most ms milliseconds (the condition variable
 * runs on CLOCK_MONOTONIC). */
static void wait_ms(tmppool *p, long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&p->wake, &p->lock, &t);
}

/* Milliseconds the refill should still wait (0: refill now). */
static long refill_delay_ms(const tmppool *p)
{
    if (p->count * 4 < p->target) /* rounded up: an empty pool never waits */
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long since = (long)(now.tv_sec - p->last_take.tv_sec) * 1000 +
                 (now.tv_nsec - p->last_take.tv_nsec) / 1000000;
    return since >= IDLE_MS ? 0 : IDLE_MS - since;
}

static void *refill(void *arg)
{
    tmppool *p = arg;
    unsigned long long ids[BATCH];
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        if (p->count >= p->target) {
            pthread_cond_wait(&p->wake, &p->lock);
            continue;
        }
        const long delay = refill_delay_ms(p);
        if (delay > 0) {
            wait_ms(p, delay);
            continue;
        }
        int want = p->target - p->count, err = 0;
        pthread_mutex_unlock(&p->lock);
        const int made = make_batch(p, want < BATCH ? want : BATCH, ids, &err);
        pthread_mutex_lock(&p->lock);
        for (int i = 0; i < made; i++)
            p->ready[(p->head + p->count++) % p->target] = ids[i];
        if (err) {
            char line[1400];
            if (err == RESERVE_LEFT)
                snprintf(line, sizeof line,
                         "not making temp files ahead in %s: its file system has %llu free "
                         "inodes, not more than the %d kept for stores",
                         p->dir, (unsigned long long)p->free_inodes, TMPPOOL_INODE_RESERVE);
            else
                snprintf(line, sizeof line, "cannot make temp files ahead in %s: %s", p->dir,
                         strerror(-err));
            log_limited(LOG_LVL_WARNING, line);
            /* A stop signalled while the batch ran found nobody waiting:
             * without this check tmppool_free waited out the retry. */
            if (!p->stop)
                wait_ms(p, RETRY_S * 1000); /* stores go on with fresh files meanwhile */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int tmppool_new(const char *dir, const char *prefix, int target, tmppool **out)
{
    *out = NULL;
    tmppool *p = calloc(1, sizeof *p);
    if (!p || target < 1 || !(p->ready = calloc((size_t)target, sizeof *p->ready))) {
        free(p);
        return -ENOMEM;
    }
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    snprintf(p->prefix, sizeof p->prefix, "%s", prefix);
    p->target = target;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    /* The refill thread takes no signal: a process-directed one (a second
     * SIGTERM while ldctd stops, after its handlers are closed) must not
     * find it as the one thread that does not block it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->thread, NULL, refill, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p->ready);
        free(p);
        return -rc;
    }
    *out = p;
    return 0;
}

int tmppool_take(tmppool *p, char *path, size_t len)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->lock);
    const int got = p->count > 0;
    clock_gettime(CLOCK_MONOTONIC, &p->last_take);
    if (got) {
        name_of(p, p->ready[p->head], path, len);
        p->head = (p->head + 1) % p->target;
        p->count--;
    }
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    return got;
}

void tmppool_free(tmppool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    char path[1300];
    for (int i = 0; i < p->count; i++) {
        name_of(p, p->ready[(p->head + i) % p->target], path, sizeof path);
        unlink(path);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->ready);
    free(p);
}
