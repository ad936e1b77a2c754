/* tmppool: empty temp files made ahead of time in one directory, so that a
 * C-STORE's critical path (receive, fsync, rename, fsync the directory,
 * commit) does not also create an inode.
 *
 * Creating a file is not free. The file system allocates an inode; on
 * ext4 without a journal that scans past every inode deleted in the last
 * minute (retention, replaced resends). The first fsync of a new file then
 * also writes its directory. A background thread does both for up to
 * `target` files: it creates each (O_EXCL) and fsyncs it, then offers it;
 * while more than a quarter are ready it waits for 50 ms without a take
 * (a burst of stores keeps the disk to itself). tmppool_take hands one out.
 * The receiver writes into it from the start (DCMTK truncates it), fsyncs,
 * and renames it into the spool exactly as it did a fresh file. So
 * durability is unchanged: a pooled file is scratch until that rename.
 * Unused files are removed at tmppool_free; after a crash the owner's
 * start-up sweep of the directory removes them. The pool makes files only
 * while the file system keeps TMPPOOL_INODE_RESERVE free inodes besides,
 * so on one short of inodes the stores get them, not the pool.
 *
 * Thread-safety: tmppool_take from any thread; _new and _free from one.
 */
#ifndef LDCT_PIPELINE_TMPPOOL_H
#define LDCT_PIPELINE_TMPPOOL_H

#include <stddef.h>

typedef struct tmppool tmppool;

enum { TMPPOOL_INODE_RESERVE = 4096 };

/* Starts the refill thread for `dir` (which must exist) with names
 * "<prefix>-p<n>.part". 0, -ENOMEM, or a pthread error as -errno. Free
 * with tmppool_free (NULL is a no-op). */
int tmppool_new(const char *dir, const char *prefix, int target, tmppool **out);

/* Copies a ready file's path into path and returns 1; 0 when none is ready
 * (the caller names a fresh file as before). The caller owns the file. */
int tmppool_take(tmppool *p, char *path, size_t len);

/* Stops the thread and removes the files nobody took. */
void tmppool_free(tmppool *p);

#endif
