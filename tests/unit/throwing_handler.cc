/* A check_association handler that throws on its first call, for
 * check_scp's test that an exception in an association's thread gives the
 * association's slot back and aborts it (C tests cannot throw). */
#include "scp/scp.h"

#include <new>

extern "C" scp_assoc_verdict tu_verdict_throwing_once(void *ctx, const scp_assoc_info *info)
{
    (void)info;
    int *calls = static_cast<int *>(ctx);
    if ((*calls)++ == 0)
        throw std::bad_alloc();
    return SCP_ASSOC_ACCEPT;
}
