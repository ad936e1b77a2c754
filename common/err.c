/* Messages for the project's error codes; see err.h. Thread-safe. */
#include "common/err.h"

#include <string.h>

const char *ldct_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define LDCT_ERR_CASE(name, value, msg)                                                            \
    case value:                                                                                    \
        return msg;
        LDCT_ERR_MAP(LDCT_ERR_CASE)
#undef LDCT_ERR_CASE
    default:
        break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err); /* glibc's strerror is thread-safe for known codes */
    return "unknown error";
}
