/* Stand-alone `bench` and `tune` for the GPU machine (links only libgpu and
 * libcommon):
 *   gpu_bench bench nlm3d --size 512x512x512 --device gpu --json
 *   gpu_bench tune fdk --rabbitct-size --cache FILE --json */
#include "gpu/bench.h"
#include "gpu/fdk_tune.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "tune") == 0)
        return gpu_fdk_tune_main(argc - 1, argv + 1, NULL);
    return gpu_bench_main(argc - 1, argv + 1);
}
