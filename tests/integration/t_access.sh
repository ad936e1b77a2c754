#!/usr/bin/env bash
# Calling-AE and peer-host allow lists: a refused calling AE gets "calling AE
# title not recognized", a refused host's connection is closed before its
# request is read (t_silent_peer has the flood); SIGHUP reloads
# the lists without a restart, and names each option that needs one, with
# the running value (compared with what runs, not with the last file read).
. "$(dirname "$0")/lib.sh"
write_config "allowed_calling_aes = CT1, CT2"
umask 022 # the daemon keeps what it creates from other users all the same
start_daemon
grep -q "any host and any calling AE title may send" "$T/ldctd.log" &&
    fail "warned about an open node with allowed_calling_aes set"
for f in "$STATE"/ldct.db*; do
    [ $((0$(stat -c %a "$f") & 07)) = 0 ] || fail "$f is mode $(stat -c %a "$f") under umask 022"
done
echoscu -aet CT1 -aec LDCTNODE 127.0.0.1 "$PORT" || fail "allowed AE refused"
out=$(echoscu -aet CT9 -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) && fail "CT9 accepted"
echo "$out" | grep -q "Calling AE Title Not Recognized" || fail "wrong reason: $out"
grep -q "calling CT9.*rejected" "$T/ldctd.log" || fail "no log line for CT9"

# Reload: only 10.9.9.9 may connect now, so loopback is refused.
write_config "allowed_hosts = 10.9.9.9"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 50); do grep -q "configuration reloaded" "$T/ldctd.log" && break; sleep 0.1; done
out=$(echoscu -aet CT9 -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) && fail "host allow list not applied"
echo "$out" | grep -q "Association Request Failed" || fail "wrong failure for host: $out"
grep -q "connection from 127.0.0.1 closed before its association request: host not in allowed_hosts" \
    "$T/ldctd.log" || fail "no log line for the refused host"

# A changed port is named once with the running one; back to the running
# value, nothing is said.
reloads_are() { [ "$(grep -c "configuration reloaded" "$T/ldctd.log")" = "$1" ]; }
write_config "allowed_hosts = 10.9.9.9" "max_associations = 3"
sed -i "s/^port = .*/port = 1/" "$T/ldctd.conf"
kill -HUP "$DAEMON_PID"
wait_until 10 "second reload" reloads_are 2
grep -q "reload: port = 1 takes effect after a restart (running with $PORT)" "$T/ldctd.log" ||
    fail "port change not named: $(grep reload: "$T/ldctd.log")"
grep -q "reload: max_associations = 3 takes effect after a restart (running with 16)" "$T/ldctd.log" ||
    fail "max_associations change not named: $(grep reload: "$T/ldctd.log")"
write_config "allowed_hosts = 10.9.9.9"
kill -HUP "$DAEMON_PID"
wait_until 10 "third reload" reloads_are 3
[ "$(grep -c "takes effect after a restart" "$T/ldctd.log")" = 2 ] ||
    fail "restart warning without a change: $(grep reload: "$T/ldctd.log")"

# A broken config on SIGHUP keeps the running one and says why, with the line.
printf '[node]\nport = nope\n' > "$T/ldctd.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 1 50); do grep -q "reload failed" "$T/ldctd.log" && break; sleep 0.1; done
grep -q "ldctd.conf:2: port = nope: not an integer" "$T/ldctd.log" || fail "no file:line error"
kill -0 "$DAEMON_PID" || fail "daemon died on a bad reload"
stop_daemon || fail "exit code $?"

# A database left readable by everyone (an older version under umask 022)
# is made private at the next start.
chmod 644 "$STATE/ldct.db"
write_config
start_daemon
[ "$(stat -c %a "$STATE/ldct.db")" = 640 ] || fail "ldct.db is $(stat -c %a "$STATE/ldct.db")"
grep -q "ldct.db was open to other users (mode 0644); now 0640" "$T/ldctd.log" ||
    fail "no log line for the database made private"
stop_daemon || fail "exit code $?"
