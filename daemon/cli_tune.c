/* `ldct tune fdk`: the backprojector's genetic-algorithm tuner
 * (gpu/fdk_tune.h), caching its result in the state directory the daemon
 * reads (<state_dir>/fdk-tune.cache). Single-threaded (the ldct process).
 */
#include "daemon/cli.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "gpu/fdk_tune.h"

#include <stdio.h>
#include <string.h>

int cli_tune(int argc, char **argv)
{
    cli_opts o = {0};
    int i = 1;
    for (; i + 1 < argc && (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--state-dir"));
         i += 2)
        *(argv[i][2] == 'c' ? &o.config : &o.state_dir) = argv[i + 1];
    if (i >= argc || strcmp(argv[i], "tune") != 0)
        return fprintf(stderr, "usage: ldct [--config FILE | --state-dir DIR] tune fdk ...\n"), 2;
    if (cli_wants_help(argc - i, argv + i)) /* before the state directory is made */
        return gpu_fdk_tune_main(argc - i, argv + i, NULL);
    char dir[1024], cache[1100];
    if (cli_state_dir(&o, dir, sizeof dir))
        return 1;
    int rc = fs_mkdirs(dir);
    if (rc) {
        fprintf(stderr, "ldct: cannot create %s: %s\n", dir, ldct_strerror(rc));
        return 1;
    }
    snprintf(cache, sizeof cache, "%s/fdk-tune.cache", dir);
    return gpu_fdk_tune_main(argc - i, argv + i, cache);
}
