/* The program version shown by --version and in derived instances. */
#ifndef LDCT_DAEMON_VERSION_H
#define LDCT_DAEMON_VERSION_H
#define LDCT_VERSION "0.1.0"
#endif
