# The VM tier (tests/vm/README.md), installed as /etc/profile.d/rtctl-vmtest-session.sh:
# alice's login shell on tty1 (getty's autologin) becomes the test runner's agent,
# which runs what the runner asks as alice, in her logind session.
if [ "$(id -un)" = alice ] && [ "$(tty)" = /dev/tty1 ]; then
	exec /usr/bin/python3 /usr/lib/rtctl-vmtest/rtctl-vmtest.py --session-agent
fi
