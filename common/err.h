/* Error codes of the whole project.
 *
 * Convention (from libuv): 0 is success, negative values are errors.
 * System failures are -errno; the project's own codes below start at
 * -10000 so they never collide with errno values. One X-macro table keeps
 * the code, its name and its message together. Any thread may call these.
 */
#ifndef LDCT_COMMON_ERR_H
#define LDCT_COMMON_ERR_H

#define LDCT_ERR_MAP(X)                                                                            \
    X(EINVAL_CONFIG, -10001, "invalid configuration")                                              \
    X(EDB, -10002, "database error")                                                               \
    X(EDICOM, -10003, "DICOM error")                                                               \
    X(ENOGPU, -10004, "no usable GPU")                                                             \
    X(ECUDA, -10005, "CUDA error")                                                                 \
    X(ENOMEM_GPU, -10006, "out of GPU memory")                                                     \
    X(EBUSY_DB, -10007, "database busy")                                                           \
    X(ESCHEMA, -10008, "database schema is newer than this program")                               \
    X(ENOSPACE, -10009, "not enough free disk space")                                              \
    X(ENOTFOUND, -10010, "not found")                                                              \
    X(EINPUT, -10011, "invalid input")                                                             \
    X(EUNSUPPORTED, -10012, "not supported")                                                       \
    X(ENET, -10013, "network error")                                                               \
    X(EPEER, -10014, "peer refused")                                                               \
    X(ECANCELED, -10015, "cancelled")

enum {
#define LDCT_ERR_ENUM(name, value, msg) LDCT_##name = (value),
    LDCT_ERR_MAP(LDCT_ERR_ENUM)
#undef LDCT_ERR_ENUM
};

/* Returns a static message for `err` (a project code or -errno). Never NULL. */
const char *ldct_strerror(int err);

#endif
