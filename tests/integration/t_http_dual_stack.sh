#!/usr/bin/env bash
# http_bind = :: is every interface, IPv4 ones too (as the option's help
# says): monitoring reaches /healthz over 127.0.0.1 and ::1.
. "$(dirname "$0")/lib.sh"
python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2> /dev/null ||
    skip "no IPv6 on this machine"
HTTP=$(free_port)
write_config "http_port = $HTTP" "http_bind = ::"
start_daemon
[ "$(curl -s "http://127.0.0.1:$HTTP/healthz")" = ok ] || fail "/healthz over IPv4 with http_bind = ::"
[ "$(curl -s "http://[::1]:$HTTP/healthz")" = ok ] || fail "/healthz over IPv6 with http_bind = ::"
stop_daemon || fail "exit code $?"
