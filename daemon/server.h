/* server: the ldctd process wiring. Owns the libuv loop (signals, the series
 * stability timer, the systemd watchdog), the current configuration
 * (swapped whole on SIGHUP), the ingest module and the DICOM server.
 *
 * Only the loop thread calls these functions; the SCP handlers it installs
 * run on association threads and read the configuration under a mutex.
 */
#ifndef LDCT_DAEMON_SERVER_H
#define LDCT_DAEMON_SERVER_H

/* Runs the daemon until SIGTERM/SIGINT. config_path NULL = embedded
 * defaults. Returns the process exit code (0 after a clean shutdown). */
int server_run(const char *config_path);

/* Blocks SIGHUP, SIGTERM and SIGINT in the calling thread: main calls it
 * before any thread starts, so that only the loop thread ever takes them
 * (server_run unblocks them there once their handlers exist). */
void server_block_stop_signals(void);

#endif
