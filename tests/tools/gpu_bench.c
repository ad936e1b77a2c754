/* Stand-alone `bench` for the GPU machine (links only libgpu and libcommon):
 *   gpu_bench bench nlm3d --size 512x512x512 --device gpu --json */
#include "gpu/bench.h"

int main(int argc, char **argv)
{
    return gpu_bench_main(argc - 1, argv + 1);
}
