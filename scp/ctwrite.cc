/* placeholder */
#include "scp/scp.h"
#include <cerrno>
extern "C" int scp_ct_write(const scp_ct_params *, const char *)
{
    return -ENOSYS;
}
