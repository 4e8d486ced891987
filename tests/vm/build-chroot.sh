#!/bin/bash
# rtctl built FOR a Debian release other than the host's, in a chroot of that release (Debian 13 for the
# trixie VM run): the binaries link against that release's libraries, as a package built there would.
#
#   tests/vm/build-chroot.sh --suite trixie --install DESTDIR   meson build of the work tree, installed
#                                                               into DESTDIR (meson install --destdir)
#   tests/vm/build-chroot.sh --suite trixie --deb OUTDIR        dpkg-buildpackage of the committed HEAD
#                                                               (as tools/build-deb); prints the .deb
#
# Cache ($RTCTL_VM_CACHE/<suite>, beside the image's base):
#   buildroot-<key>/   debootstrap minbase + debian/control's build dependencies; <key> hashes the suite,
#                      mirror, package list and this script's chroot code. Built once (~2 min).
#   buildroot-<key>/rootfs/build   the meson build dir: kept, so a warm --install recompiles what the
#                      work tree changed (the source is copied in with its mtimes).
#   deb/<commit>/      the package of one commit: a warm --deb of the same HEAD is a copy.
# Needs root. Nothing outside the chroot is mounted (a private mount namespace).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SUITE=${SUITE:-trixie}
mode= target=
while [ $# -gt 0 ]; do
	case $1 in
	--suite) SUITE=$2; shift ;;
	--suite=*) SUITE=${1#*=} ;;
	--install | --deb) mode=${1#--}; target=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) echo "build-chroot.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$mode" ] || { echo "build-chroot.sh: --install DESTDIR or --deb OUTDIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "build-chroot.sh: must run as root (debootstrap, chroot)" >&2; exit 1; }
CACHE=${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}
[ "$SUITE" = bookworm ] || CACHE=$CACHE/$SUITE
ARCH=amd64
log() { printf '[build-chroot %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf 'build-chroot.sh: error: %s\n' "$*" >&2; exit 1; }

# debian/control's Build-Depends, what dpkg-buildpackage itself needs, and dbus (dbus-daemon) for the
# unit tests the package build runs (test-systemd and test-journal-restore start a private bus)
BUILD_PKGS=(build-essential dpkg-dev debhelper meson ninja-build pkgconf python3
	libglib2.0-dev libjson-c-dev libnl-3-dev libsystemd-dev zlib1g-dev libjack-jackd2-dev libpipewire-0.3-dev
	dbus)
# shellcheck source=tests/vm/mirrors.sh
. "$HERE/mirrors.sh"
MIRROR=$(detect_mirror)
SECURITY_MIRROR=$(detect_security_mirror)

# in the chroot, in a private mount namespace: /proc, /dev and the deb cache mounted for this command only
in_root() { # root, command (a /bin/sh -c string), args...
	local root=$1 cmd=$2
	shift 2
	# shellcheck disable=SC2016 # $1, $2 expand in the inner shell
	unshare --mount --propagation private /bin/sh -euc '
		root=$1 debs=$2 cmd=$3
		shift 3
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		mkdir -p "$root/var/cache/apt/archives"
		mount --bind "$debs" "$root/var/cache/apt/archives"
		exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
			DEBIAN_FRONTEND=noninteractive /bin/sh -euc "$cmd" sh "$@"' \
		sh "$root" "$CACHE/debs/apt" "$cmd" "$@"
}

build_root() { # $1 = directory to create
	local dir=$1 root=$1/rootfs
	mkdir -p "$dir" "$CACHE/debs/apt/partial"
	log "debootstrap --variant=minbase $SUITE for the build chroot (log: $dir/build-root.log)"
	debootstrap --variant=minbase --arch="$ARCH" --cache-dir="$CACHE/debs" "$SUITE" "$root" "$MIRROR" \
		>"$dir/build-root.log" 2>&1 || { tail -n 20 "$dir/build-root.log" >&2; return 1; }
	build_sources >"$root/etc/apt/sources.list"
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	log "build dependencies: ${BUILD_PKGS[*]}"
	in_root "$root" 'apt-get -o Acquire::Retries=3 update -qq &&
		apt-get -o Acquire::Retries=3 upgrade -y -q &&
		apt-get -o Acquire::Retries=3 install -y -q --no-install-recommends "$@" &&
		rm -rf /var/lib/apt/lists/*' "${BUILD_PKGS[@]}" >>"$dir/build-root.log" 2>&1 ||
		{ tail -n 20 "$dir/build-root.log" >&2; return 1; }
}

root_key() {
	{
		echo "suite=$SUITE arch=$ARCH mirror=$MIRROR security=$SECURITY_MIRROR"
		echo "pkgs=${BUILD_PKGS[*]}"
		declare -f build_root in_root build_sources build_sources_updates deb_line
	} | sha256sum | cut -c1-16
}

mkdir -p "$CACHE"
exec 8>"$CACHE/.build-chroot.lock"
flock 8 # one user of the build chroot at a time
KEY=$(root_key)
BR=$CACHE/buildroot-$KEY
ROOT=$BR/rootfs
t0=$SECONDS
if [ ! -f "$BR/complete" ]; then
	rm -rf "$BR" "$BR.tmp"
	build_root "$BR.tmp" || { rm -rf "$BR.tmp"; log "retrying once"; build_root "$BR.tmp"; } ||
		die "building the $SUITE build chroot failed (log: $BR.tmp/build-root.log)"
	mv "$BR.tmp" "$BR"
	touch "$BR/complete"
	log "build chroot $KEY built in $((SECONDS - t0)) s"
fi
for old in "$CACHE"/buildroot-*; do
	[ "$old" = "$BR" ] || { log "removing stale $old"; rm -rf "$old"; }
done

case $mode in
install)
	# The work tree as the host's build sees it (tracked and untracked files, not the ignored ones),
	# with its mtimes: ninja in the kept build dir recompiles only what changed.
	rm -rf "$ROOT/src" "$ROOT/dest"
	mkdir -p "$ROOT/src"
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -C "$ROOT/src" -xf -
	log "meson build of the work tree in the $SUITE chroot (log: $BR/meson.log)"
	in_root "$ROOT" '[ -f /build/build.ninja ] || meson setup /build /src --prefix=/usr
		nice -n 19 ninja -C /build
		meson install -C /build --destdir /dest --quiet' >"$BR/meson.log" 2>&1 ||
		{ tail -n 40 "$BR/meson.log" >&2; die "meson build in the $SUITE chroot failed (log: $BR/meson.log)"; }
	mkdir -p "$target"
	cp -a "$ROOT/dest/." "$target/"
	rm -rf "$ROOT/dest"
	log "installed into $target ($((SECONDS - t0)) s)"
	;;
deb)
	commit=$(git -C "$REPO" rev-parse HEAD)
	if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
		log "note: uncommitted changes are not in the package; it is built from HEAD"
	fi
	cached=$CACHE/deb/$commit-$KEY
	if ! ls "$cached"/rtctl_*.deb >/dev/null 2>&1; then
		rm -rf "$ROOT/debbuild" "$cached"
		mkdir -p "$ROOT/debbuild"
		git -C "$REPO" archive --format=tar --prefix=rtctl/ HEAD | tar -x -C "$ROOT/debbuild"
		log "dpkg-buildpackage of $commit in the $SUITE chroot (log: $BR/deb.log)"
		in_root "$ROOT" 'cd /debbuild/rtctl && nice -n 19 dpkg-buildpackage -b -us -uc -Jauto' >"$BR/deb.log" 2>&1 ||
			{ tail -n 40 "$BR/deb.log" >&2; die "dpkg-buildpackage in the $SUITE chroot failed (log: $BR/deb.log)"; }
		rm -rf "$CACHE/deb"
		mkdir -p "$cached"
		cp "$ROOT"/debbuild/rtctl_*.deb "$cached/"
		cp "$BR/deb.log" "$cached/rtctl-build.log"
		rm -rf "$ROOT/debbuild"
	fi
	deb=$(ls "$cached"/rtctl_*.deb | head -n1)
	mkdir -p "$target"
	cp "$deb" "$target/"
	log "package $(basename "$deb") ($((SECONDS - t0)) s)"
	echo "$target/$(basename "$deb")"
	;;
esac
