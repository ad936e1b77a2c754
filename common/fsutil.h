/* File-system helpers for durable storage: create directory trees, fsync a
 * file or a directory, move a file into place atomically, query free space.
 *
 * The durable-write recipe used by the whole project is: write a temp name,
 * fs_fsync_path(temp), fs_rename_durable(temp, final) (which renames and
 * fsyncs the destination directory). Every function is thread-safe and
 * returns 0 or -errno unless it says otherwise.
 */
#ifndef LDCT_COMMON_FSUTIL_H
#define LDCT_COMMON_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

/* mkdir -p with mode 0750; each directory created is fsync'd into its parent. */
int fs_mkdirs(const char *path);

/* fsync the file or directory at `path`. */
int fs_fsync_path(const char *path);

/* rename(from, to) then fsync the directory that holds `to`. */
int fs_rename_durable(const char *from, const char *to);

/* Free space available to unprivileged users on the file system holding
 * `path`, in MiB, into *mb. */
int fs_free_mb(const char *path, uint64_t *mb);

/* Inodes (files) available to unprivileged users on the file system
 * holding `path` into *n; UINT64_MAX where it has no fixed count (it
 * reports none, as btrfs does). */
int fs_free_inodes(const char *path, uint64_t *n);

/* fs_free_mb and fs_free_inodes from one statvfs (one round trip on a
 * network file system), for the check before each C-STORE. */
int fs_free_mb_inodes(const char *path, uint64_t *mb, uint64_t *inodes);

/* Bytes available to unprivileged users and the size of the filesystem
 * holding path. 0 or -errno. */
int fs_space_bytes(const char *path, uint64_t *avail, uint64_t *total);

/* Copies the directory part of `path` into `dir` (size `len`). */
int fs_dirname(const char *path, char *dir, size_t len);

/* 1 if files a and b both exist and hold the same bytes, else 0 (also
 * when either cannot be read). */
int fs_same_content(const char *a, const char *b);

#endif
