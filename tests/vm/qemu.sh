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
# RTCTL_VM_QEMU names one and skips all this; RTCTL_VM_MIRROR is the Debian mirror to fetch from. The
# fetched one lives in $RTCTL_VM_CACHE/qemu/VERSION: dpkg-deb -x of qemu-system-x86, -common and -data of
# one version and seabios, found through an apt state of its own (the host's apt lists and preferences
# play no part), and a wrapper there that gives it its own firmware and modules. It runs on the host's
# libraries, which Debian 12's qemu-system-x86 brings (a backport is built against the release's own):
# where that package is not installed, it is installed first, from the host's apt. Fails, saying why,
# when none can be had. One caller at a time per cache ($CACHE/.lock).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}/qemu
SUITE=bookworm

log() { printf '[qemu %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf 'qemu.sh: error: %s\n' "$*" >&2; exit 1; }

# "MAJOR.MINOR" of a qemu-system-x86_64, from its --version line.
version_of() {
	"$1" --version 2>/dev/null | sed -n '1s/^QEMU emulator version \([0-9]*\)\.\([0-9]*\).*/\1.\2/p' || true
}

new_enough() { # MAJOR.MINOR
	local major=${1%%.*} minor=${1#*.}
	[ -n "$1" ] && { [ "$major" -gt 8 ] || { [ "$major" = 8 ] && [ "$minor" -ge 1 ]; }; }
}

# The host's own, when it is new enough.
host_qemu() {
	host=$(command -v qemu-system-x86_64 || true)
	[ -n "$host" ] && new_enough "$(version_of "$host")"
}

# One fetched before, the newest (by name) that runs.
cached_qemu() {
	local w ws=()
	mapfile -t ws < <(printf '%s\n' "$CACHE"/*/qemu-system-x86_64 | sort -V -r)
	for w in "${ws[@]}"; do
		if [ -x "$w" ] && new_enough "$(version_of "$w")"; then
			echo "$w"
			return 0
		fi
	done
	return 1
}

if [ -n "${RTCTL_VM_QEMU:-}" ]; then
	echo "$RTCTL_VM_QEMU"
	exit 0
fi
if host_qemu; then
	echo "$host"
	exit 0
fi
cached_qemu && exit 0

[ "$(id -u)" = 0 ] || die "needs root to fetch a QEMU of 8.1 or later (the host's is ${host:-missing})"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
cached_qemu && exit 0 # another caller fetched it while this one waited

# The libraries the backport links against come with the release's own package (on a release whose
# own is new enough, that one is the answer).
if ! dpkg-query -W -f='${Status}' qemu-system-x86 2>/dev/null | grep -q "ok installed"; then
	log "installing the release's qemu-system-x86 (the libraries a backport runs on)"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >&2
	if host_qemu; then
		echo "$host"
		exit 0
	fi
fi

# shellcheck source=tests/vm/mirrors.sh
. "$HERE/mirrors.sh"
mirror=${RTCTL_VM_MIRROR:-$(find_uri "$SUITE-backports")}
[ -n "$mirror" ] || mirror=$(detect_mirror)
p=$CACHE/.apt
tmp=$CACHE/.unpack
trap 'rm -rf "$p" "$tmp"' EXIT
rm -rf "$p" "$tmp"
private_apt "$p" "$(dpkg --print-architecture)" < <(deb_line "$mirror" "$SUITE-backports")
mkdir -p "$p/debs" "$tmp/root"
log "host QEMU ${host:-missing} ($(version_of "${host:-/nonexistent}")) is older than 8.1:" \
	"fetching qemu-system-x86 from $SUITE-backports ($mirror)"
# apt-get update ends 0 when a source could not be fetched ("W: Failed to fetch"): its warnings count.
if ! apt-get "${APT_OPTS[@]}" update -qq >"$p/update.log" 2>&1 || grep -q '^[WE]: ' "$p/update.log"; then
	cat "$p/update.log" >&2
	die "apt-get update of $SUITE-backports failed ($mirror)"
fi
ver=$(apt-cache "${APT_OPTS[@]}" policy qemu-system-x86 2>/dev/null | sed -n 's/^ *Candidate: //p') || true
[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "$SUITE-backports at $mirror has no qemu-system-x86"
(cd "$p/debs" && apt-get "${APT_OPTS[@]}" download -q qemu-system-x86="$ver" qemu-system-common="$ver" \
	qemu-system-data="$ver" seabios >"$p/download.log" 2>&1) ||
	{ cat "$p/download.log" >&2; die "downloading qemu-system-x86 $ver from $SUITE-backports failed"; }
for deb in "$p"/debs/*.deb; do
	dpkg-deb -x "$deb" "$tmp/root"
done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
cat >"$tmp/qemu-system-x86_64" <<WRAPPER
#!/bin/sh
# qemu-system-x86 $ver from $SUITE-backports, unpacked by tests/vm/qemu.sh: its own firmware, its own modules.
root=\$(cd "\$(dirname "\$0")" && pwd)/root
QEMU_MODULE_DIR=\$root/usr/lib/$multiarch/qemu
export QEMU_MODULE_DIR
exec "\$root/usr/bin/qemu-system-x86_64" -L "\$root/usr/share/qemu" -L "\$root/usr/share/seabios" "\$@"
WRAPPER
chmod 755 "$tmp/qemu-system-x86_64"
missing=$(ldd "$tmp/root/usr/bin/qemu-system-x86_64" | awk '/not found/ { print $1 }' | tr '\n' ' ')
[ -z "$missing" ] || die "qemu-system-x86 $ver needs libraries this host lacks: $missing"
v=$(version_of "$tmp/qemu-system-x86_64")
new_enough "$v" || die "qemu-system-x86 $ver unpacked in $tmp does not run (version '$v')"
dir=$CACHE/${ver//[:~+]/_}
rm -rf "$dir"
mv "$tmp" "$dir"
log "QEMU $v in $dir"
echo "$dir/qemu-system-x86_64"
