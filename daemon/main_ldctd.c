/* ldctd: the DICOM denoising daemon. Parses the command line and hands over
 * to server_run(); all wiring lives in server.c. */
#include "daemon/server.h"
#include "daemon/version.h"
#include "gpu/device.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: ldctd [--config FILE] | --help | --version\n"
               "  Receives CT series over DICOM (C-STORE SCP), queues them durably,\n"
               "  denoises them and sends the result back as a derived series.\n"
               "  Without --config it runs on embedded defaults: AE LDCTNODE, port 11112,\n"
               "  state in ./var/ldct. Every option: config/ldctd.conf.example (installed\n"
               "  in /usr/share/doc/ldct-node/); check a file with ldct check-config FILE.\n"
               "  SIGHUP reloads FILE, SIGTERM or SIGINT stops (exit 0); exit 1: could\n"
               "  not start (the log says why), 2: bad arguments.\n");
}

int main(int argc, char **argv)
{
    const char *config = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("ldctd %s\n", LDCT_VERSION);
            return 0;
        } else {
            fprintf(stderr, "ldctd: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    /* Measured on an H100: the first series' filter step took 0.28-0.35 s
     * with lazy loading against 0.13-0.19 s for the next ones, and the
     * start 0.15 s longer with eager loading (docs/PERFORMANCE.md). */
    gpu_load_kernels_eagerly();
    /* The state holds patient data: nothing the daemon creates may be read
     * by other users, whatever umask it was started with (the systemd unit
     * sets 0027 as well). A stricter umask is kept. */
    umask(umask(0) | 027);
    /* SIGHUP, SIGTERM and SIGINT are blocked here, before any thread
     * starts (they all inherit it), and only the main thread unblocks them,
     * once the loop's handlers exist. So a reload or a stop asked for
     * during the start waits for the handlers instead of killing the
     * daemon, and no other thread ever takes them under the default
     * action (at a stop the handlers are closed before the signals are
     * ignored). */
    server_block_stop_signals();
    return server_run(config);
}
