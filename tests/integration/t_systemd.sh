#!/usr/bin/env bash
# The systemd unit passes systemd-analyze verify (where systemd is installed)
# and the daemon speaks sd_notify (READY=1, STOPPING=1) to NOTIFY_SOCKET.
. "$(dirname "$0")/lib.sh"
if command -v systemd-analyze > /dev/null; then
    sed "s#/usr/bin/ldctd#$LDCTD#" "$ROOT/systemd/ldctd.service" > "$T/ldctd.service"
    out=$(systemd-analyze verify "$T/ldctd.service" 2>&1) || fail "systemd-analyze: $out"
    [ -z "$out" ] || fail "systemd-analyze warnings: $out"
else
    note "systemd-analyze not installed; unit not verified"
fi
# make install: the binaries, the unit pointing at them, its sysusers and
# tmpfiles entries, a configuration that checks, the documentation; an
# edited configuration survives a second install.
inst=$T/root
make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$inst" PREFIX=/usr/local > "$T/install.log" 2>&1 ||
    fail "make install: $(tail -n 5 "$T/install.log")"
for f in usr/local/bin/ldctd usr/local/bin/ldct usr/local/lib/systemd/system/ldctd.service \
    usr/local/lib/sysusers.d/ldct.conf usr/local/lib/tmpfiles.d/ldct.conf etc/ldct/ldctd.conf \
    usr/local/share/doc/ldct-node/README.md; do
    [ -s "$inst/$f" ] || fail "make install did not write $f"
done
grep -q "^ExecStart=/usr/local/bin/ldctd --config /etc/ldct/ldctd.conf" \
    "$inst/usr/local/lib/systemd/system/ldctd.service" || fail "unit ExecStart not at PREFIX"
"$inst/usr/local/bin/ldct" check-config "$inst/etc/ldct/ldctd.conf" > /dev/null ||
    fail "the installed configuration does not check"
echo "; edited" >> "$inst/etc/ldct/ldctd.conf"
make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$inst" PREFIX=/usr/local > /dev/null 2>&1 ||
    fail "second make install"
grep -q "^; edited" "$inst/etc/ldct/ldctd.conf" || fail "make install replaced an edited configuration"
command -v socat > /dev/null || skip "socat not installed"
socat -u UNIX-RECVFROM:"$T/notify",fork OPEN:"$T/notify.log",creat,append &
sock=$!
sleep 0.3
NOTIFY_SOCKET="$T/notify" start_daemon
for _ in $(seq 1 30); do grep -q READY=1 "$T/notify.log" && break; sleep 0.1; done
grep -q READY=1 "$T/notify.log" || fail "no READY=1"
stop_daemon || fail "exit code $?"
sleep 0.3
grep -q STOPPING=1 "$T/notify.log" || fail "no STOPPING=1"
kill "$sock"
