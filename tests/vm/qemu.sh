#!/bin/bash
# Prints the qemu-system-x86_64 the VM tier boots its guests with: one that locks guest pages while it
# translates them (QEMU 8.1 and later), fetched once from bookworm-backports when the host's is older.
#
# Why: under multi-threaded TCG, QEMU before 8.1 reads guest code for translation without the page
# locks and links the block only afterwards, so a store by another vCPU in between (the kernel patching
# its own text: jump labels, static calls, a tracepoint switched on) invalidates nothing and the stale
# block runs on. The guest then takes an int3 already taken back, or loops at a patched site (upstream
# deba78709ae8, "accel/tcg: Always lock pages before translation"; tests/vm/README.md). Debian 12's
# QEMU is 7.2.
#
# RTCTL_VM_QEMU names one and skips all this; RTCTL_VM_MIRROR, the Debian mirror to fetch from. The fetched one lives in $RTCTL_VM_CACHE/qemu/VERSION
# (dpkg-deb -x of qemu-system-x86, -common, -data and seabios, read through a private apt state: the
# host's apt lists and dpkg database are not touched), run by a wrapper there that points it at its own
# firmware and modules. It runs on the host's libraries, which Debian 12's qemu-system-x86 brought (a
# backport is built against the release's own). Fails, saying why, when none can be had.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}/qemu
SUITE=bookworm
ARCH=$(dpkg --print-architecture)
PKGS=(qemu-system-x86 qemu-system-common qemu-system-data seabios)

log() { printf '[qemu %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf 'qemu.sh: error: %s\n' "$*" >&2; exit 1; }

# "MAJOR.MINOR" of a qemu-system-x86_64, from its --version line.
version_of() {
	"$1" --version 2>/dev/null | sed -n '1s/^QEMU emulator version \([0-9]*\)\.\([0-9]*\).*/\1.\2/p'
}

new_enough() { # MAJOR.MINOR
	local major=${1%%.*} minor=${1#*.}
	[ -n "$1" ] && { [ "$major" -gt 8 ] || { [ "$major" = 8 ] && [ "$minor" -ge 1 ]; }; }
}

if [ -n "${RTCTL_VM_QEMU:-}" ]; then
	echo "$RTCTL_VM_QEMU"
	exit 0
fi
host=$(command -v qemu-system-x86_64 || true)
if [ -n "$host" ] && new_enough "$(version_of "$host")"; then
	echo "$host"
	exit 0
fi

# One fetched before: the newest that still runs.
for w in $(ls -d "$CACHE"/*/qemu-system-x86_64 2>/dev/null | sort -V -r); do
	if new_enough "$(version_of "$w")"; then
		echo "$w"
		exit 0
	fi
done

[ "$(id -u)" = 0 ] || die "needs root to fetch a QEMU of 8.1 or later (the host's is ${host:-missing})"
# The libraries the backport links against come with the release's own package.
if [ -z "$host" ]; then
	log "installing Debian 12's qemu-system-x86 (its libraries)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
fi

# shellcheck source=tests/vm/mirrors.sh
. "$HERE/mirrors.sh"
mirror=${RTCTL_VM_MIRROR:-$(find_uri "$SUITE-backports")}
[ -n "$mirror" ] || mirror=$(detect_mirror)
p=$CACHE/apt
a=(-o "Dir::Etc::SourceList=$p/sources.list" -o "Dir::Etc::SourceParts=$p/none"
	-o "Dir::State=$p/state" -o "Dir::State::status=$p/status" -o "Dir::Cache=$p/cache"
	-o "APT::Architecture=$ARCH" -o Debug::NoLocking=true -o Acquire::Retries=3
	-o APT::Sandbox::User=root)
rm -rf "$p"
mkdir -p "$p/none" "$p/state/lists/partial" "$p/cache/archives/partial" "$p/debs"
: >"$p/status"
deb_line "$mirror" "$SUITE-backports" |
	sed 's|^deb \[|deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg |' >"$p/sources.list"
log "host QEMU ${host:-missing} ($(version_of "${host:-/nonexistent}" || true)) is older than 8.1:" \
	"fetching qemu-system-x86 from $SUITE-backports ($mirror)"
# apt-get update ends 0 when a source could not be fetched ("W: Failed to fetch"): its warnings count.
if ! apt-get "${a[@]}" update -qq >"$p/update.log" 2>&1 || grep -q '^[WE]: ' "$p/update.log"; then
	cat "$p/update.log" >&2
	die "apt-get update of $SUITE-backports failed ($mirror)"
fi
ver=$(apt-cache "${a[@]}" show qemu-system-x86 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n1) || true
[ -n "$ver" ] || die "$SUITE-backports at $mirror has no qemu-system-x86"
(cd "$p/debs" && apt-get "${a[@]}" download -q "${PKGS[@]}" >"$p/download.log" 2>&1) ||
	{ cat "$p/download.log" >&2; die "downloading ${PKGS[*]} from $SUITE-backports failed"; }

dir=$CACHE/${ver//[:~+]/_}
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp/root"
for deb in "$p"/debs/*.deb; do
	dpkg-deb -x "$deb" "$dir.tmp/root"
done
root=$dir/root
cat >"$dir.tmp/qemu-system-x86_64" <<EOF
#!/bin/sh
# qemu-system-x86 $ver from $SUITE-backports, unpacked by tests/vm/qemu.sh: its own firmware, its own modules.
QEMU_MODULE_DIR=$root/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/qemu
export QEMU_MODULE_DIR
exec $root/usr/bin/qemu-system-x86_64 -L $root/usr/share/qemu -L $root/usr/share/seabios "\$@"
EOF
chmod 755 "$dir.tmp/qemu-system-x86_64"
missing=$(ldd "$dir.tmp/root/usr/bin/qemu-system-x86_64" | awk '/not found/ { print $1 }' | tr '\n' ' ')
[ -z "$missing" ] || die "qemu-system-x86 $ver needs libraries this host lacks: $missing"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
rm -rf "$p"
v=$(version_of "$dir/qemu-system-x86_64")
new_enough "$v" || die "qemu-system-x86 $ver unpacked in $dir does not run (version '${v}')"
log "QEMU $v in $dir"
echo "$dir/qemu-system-x86_64"
