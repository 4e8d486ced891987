#!/bin/bash
# Build the VM test image: Debian 12 (or 13) + systemd + the Debian kernel + rtctl.
#
#   tests/vm/build-image.sh [--suite bookworm|trixie] [--kernel generic|rt] [--no-rtctl] [--rebuild-base]
#                           [--deb FILE] [BUILD_DIR]
#
# BUILD_DIR is a meson build dir configured with --prefix=/usr (default:
# <repo>/build); its `meson install --destdir` output goes into the image.
# --suite trixie (or SUITE=trixie) builds a Debian 13 image in a cache of its
# own, $RTCTL_VM_CACHE/trixie (base, debs, out): both can exist at once. rtctl
# then comes from a trixie build chroot (tests/vm/build-chroot.sh: meson from
# the work tree, built with Debian 13's libraries), not from BUILD_DIR.
# --kernel rt installs Debian's PREEMPT_RT flavour (linux-image-rt-amd64) instead
# of the generic kernel: the one with the timerlat, osnoise and hwlat tracers.
# Its base has a key of its own; its output goes to $RTCTL_VM_CACHE/out-rt
# unless RTCTL_VM_OUT says otherwise.
# --no-rtctl builds the image without rtctl (harness work before the daemon
# exists: the daemon tests then FAIL with "rtctld is not installed").
# --deb FILE installs the package tools/build-deb built with dpkg -i in the
# image (its maintainer scripts enable the unit), instead of meson install;
# the .deb stays in /var/cache/rtctl-vmtest for the upgrade test. The stage
# is then a full copy of the base, not hard links: dpkg and its triggers
# write files in place (logs, man-db's index).
#
# Two layers:
#   base   debootstrap --variant=minbase + packages + tests/vm/base/customize.sh.
#          Slow (~70 s). Cached under $RTCTL_VM_CACHE/base-<key>, where <key>
#          hashes the suite, mirror, package lists, customize.sh and the code of
#          build_base below. Built only when the key changes.
#   top    meson install + the in-VM test runner, over a hard-link copy of the
#          base, then mkfs.ext4 -d. Rebuilt every run (~5 s).
# Output: $RTCTL_VM_OUT (default $RTCTL_VM_CACHE/out, out-rt for --kernel rt): rootfs.ext4, vmlinuz,
# initrd.img, image.env.
#
# Touches nothing of the host's kernel state: no loop devices, no mounts
# outside a private mount namespace (unshare --mount), no /sys writes; the
# packages' maintainer scripts run under a policy-rc.d that denies every
# service start.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SUITE=${SUITE:-bookworm}
for a in "$@"; do # the suite decides the cache: read it before anything else
	case $a in --suite=*) SUITE=${a#*=} ;; esac
done
for ((i = 1; i < $#; i++)); do
	[ "${!i}" = --suite ] && { j=$((i + 1)); SUITE=${!j}; }
done
case $SUITE in
bookworm | trixie) ;;
*) echo "build-image.sh: unknown suite $SUITE (bookworm or trixie)" >&2; exit 2 ;;
esac
KERNEL=generic
for ((i = 1; i <= $#; i++)); do # the kernel decides the package list and the output directory
	case ${!i} in
	--kernel=*) KERNEL=${!i#*=} ;;
	--kernel) j=$((i + 1)); KERNEL=${!j:-} ;;
	esac
done
case $KERNEL in
generic) KERNEL_PKG=linux-image-amd64 ;;
rt) KERNEL_PKG=linux-image-rt-amd64 ;;
*) echo "build-image.sh: unknown kernel $KERNEL (generic or rt)" >&2; exit 2 ;;
esac
# Debian 12 keeps the cache's top level (as before); every other suite a directory of its own in it.
CACHE=${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}
[ "$SUITE" = bookworm ] || CACHE=$CACHE/$SUITE
if [ "$KERNEL" = generic ]; then OUT=${RTCTL_VM_OUT:-$CACHE/out}; else OUT=${RTCTL_VM_OUT:-$CACHE/out-$KERNEL}; fi
ARCH=amd64

# Installed by debootstrap (--include). Names checked against Debian 12 and 13:
# Debian 13 renamed glib's runtime for the 64-bit time_t transition
# (libglib2.0-0t64) and has no libcgroup2 (rtctl does not link libcgroup).
BASE_PKGS=(
	systemd systemd-sysv udev dbus kmod
	python3 python3-dbus procps util-linux
	initramfs-tools zstd
	# runtime libraries rtctld/rtctl link against
	libsystemd0 libjson-c5 libnl-3-200 libnl-genl-3-200
)
if [ "$SUITE" = bookworm ]; then
	BASE_PKGS+=(libglib2.0-0 libcgroup2)
else
	BASE_PKGS+=(libglib2.0-0t64)
fi
# Installed with apt-get inside the chroot afterwards: the kernel (after the
# initramfs config is in place, so the initrd is built once, small) and
# polkitd (its postinst fails inside debootstrap's second stage), and irqbalance
# for the IRQ conflict test (disabled at boot by customize.sh: the test starts it).
# The session tests (polkit as a logged-in user, PipeWire's data loop): libpam-systemd
# (pam_systemd registers the autologin on tty1 with logind), dbus-user-session (the
# user's session bus, which wireplumber wants), pipewire + wireplumber as the user's
# services (pipewire-bin: pw-cat, pw-dump; libspa-0.2-modules: the null sink); jackd2
# for the shipped [Attach jackd] rule (its dummy driver needs no sound card); pipewire-jack
# (pw-jack: PipeWire's libjack, for the JACK client tests run under it); grub-pc
# for `rtctl bootargs apply` + update-grub (installed, never booted from: the guest
# boots its kernel directly, so grub-install never runs). ansible-core runs docs/fleet's playbook
# (fleet-ansible) with --connection=local, as configuration management would.
# power-profiles-daemon: its powerprofilesctl drives rtctld's answer to its API (power-slider), and the
# daemon itself keeps the names when it runs (0.12 on Debian 12, 0.30 on Debian 13); python3-gi:
# powerprofilesctl imports it (only a Recommends of the package).
CHROOT_PKGS=("$KERNEL_PKG" polkitd irqbalance power-profiles-daemon python3-gi
	libpam-systemd dbus-user-session pipewire pipewire-bin wireplumber libspa-0.2-modules jackd2
	pipewire-jack grub-pc ansible-core)

with_rtctl=1
rebuild_base=0
BUILD_DIR=
DEB=
while [ $# -gt 0 ]; do
	case $1 in
	--no-rtctl) with_rtctl=0 ;;
	--deb) DEB=$2; shift ;;
	--deb=*) DEB=${1#*=} ;;
	--suite | --kernel) shift ;; # read above
	--suite=* | --kernel=*) ;;
	--rebuild-base) rebuild_base=1 ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	-*) echo "build-image.sh: unknown option $1" >&2; exit 2 ;;
	*) BUILD_DIR=$1 ;;
	esac
	shift
done
BUILD_DIR=${BUILD_DIR:-$REPO/build}

log() { printf '[build-image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf 'build-image.sh: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, file ownership in the image)"

# --- host tools --------------------------------------------------------------
ensure_host_tools() {
	local missing=() pair
	for pair in debootstrap:debootstrap mkfs.ext4:e2fsprogs qemu-system-x86_64:qemu-system-x86 \
		unshare:util-linux flock:util-linux zstd:zstd; do
		command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
	done
	[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing host packages: ${missing[*]}"
	# an unfilled package list makes install fail: update first, once
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# find_uri, detect_mirror, detect_security_mirror: the mirrors of this machine's apt
# shellcheck source=tests/vm/mirrors.sh
. "$HERE/mirrors.sh"

# --- base layer --------------------------------------------------------------
# Everything that decides the base's content goes into the key: edit this
# function, customize.sh or a package list and the base is rebuilt.
# While debootstrap runs (CPU-bound for the most part), fetch the kernel
# package, the biggest download by far, into the apt archive the chroot step
# uses. A private apt state under $CACHE: the host's apt lists and dpkg
# database are not touched. Best effort: on any failure the chroot's own
# apt-get downloads it.
prefetch_kernel() {
	local p=$CACHE/prefetch ver
	mkdir -p "$CACHE/debs/apt/partial"
	private_apt "$p" "$ARCH" < <(apt_sources)
	apt-get "${APT_OPTS[@]}" update -qq || return 1
	ver=$(apt-cache "${APT_OPTS[@]}" depends "$KERNEL_PKG" | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$ver" ] || return 1
	(cd "$CACHE/debs/apt" && apt-get "${APT_OPTS[@]}" download -q "$KERNEL_PKG" "$ver")
}

build_base() { # $1 = directory to create; writes $1/rootfs, $1/vmlinuz, $1/initrd.img
	local dir=$1 root=$1/rootfs inc kver prefetch_pid
	inc=$(IFS=,; echo "${BASE_PKGS[*]}")
	mkdir -p "$dir" "$CACHE/debs"
	# the deb cache only speeds up rebuilds: drop what no build used for a month
	find "$CACHE/debs" -name '*.deb' -atime +30 -delete 2>/dev/null || true
	prefetch_kernel >"$dir/prefetch.log" 2>&1 &
	prefetch_pid=$!
	log "debootstrap --variant=minbase $SUITE from $MIRROR (log: $dir/debootstrap.log)"
	# Two stages, to have dpkg skip its fsyncs in the second (--force-unsafe-io:
	# a throwaway tree, ~15% faster). A private mount namespace: debootstrap's
	# /proc and /sys mounts in the target vanish with it, whatever happens.
	if ! debootstrap --foreign --variant=minbase --arch="$ARCH" --include="$inc" \
		--cache-dir="$CACHE/debs" "$SUITE" "$root" "$MIRROR" >"$dir/debootstrap.log" 2>&1 ||
		! mkdir -p "$root/etc/dpkg/dpkg.cfg.d" ||
		! echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/rtctl-vm-unsafe-io" ||
		! unshare --mount --propagation private \
			chroot "$root" /debootstrap/debootstrap --second-stage >>"$dir/debootstrap.log" 2>&1; then
		tail -n 30 "$dir/debootstrap.log" >&2
		log "debootstrap failed (full log: $dir/debootstrap.log)"
		wait "$prefetch_pid" || true
		return 1
	fi
	wait "$prefetch_pid" || log "kernel prefetch failed (see $dir/prefetch.log); the chroot step downloads it"
	{
		printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" &&
			chmod 755 "$root/usr/sbin/policy-rc.d" &&
			mkdir -p "$CACHE/debs/apt/partial" &&
			apt_sources >"$root/etc/apt/sources.list" &&
			cp "$HERE/base/customize.sh" "$root/customize.sh"
	} || return 1
	log "chroot: ${CHROOT_PKGS[*]} + customize.sh (log: $dir/customize.log)"
	# shellcheck disable=SC2016 # $1..$3 expand in the inner shell
	if ! unshare --mount --propagation private /bin/sh -euc '
		root=$1
		mount -t proc proc "$root/proc"
		mount --bind "$2" "$root/var/cache/apt/archives"
		exec chroot "$root" /usr/bin/env -i CHROOT_PKGS="$3" /bin/sh /customize.sh' \
		sh "$root" "$CACHE/debs/apt" "${CHROOT_PKGS[*]}" >"$dir/customize.log" 2>&1; then
		tail -n 30 "$dir/customize.log" >&2
		log "customizing the base failed (full log: $dir/customize.log)"
		return 1
	fi
	rm -f "$root/customize.sh" "$root/usr/sbin/policy-rc.d" "$root/etc/dpkg/dpkg.cfg.d/rtctl-vm-unsafe-io"
	# (called in an `if`: set -e does not apply here, every step checks itself)
	kver=$(find "$root/usr/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n1)
	[ -n "$kver" ] || { log "no kernel in the base"; return 1; }
	cp "$root/boot/vmlinuz-$kver" "$dir/vmlinuz" || return 1
	cp "$root/boot/initrd.img-$kver" "$dir/initrd.img" || return 1
	echo "$kver" >"$dir/kernel-version"
}

base_key() {
	{
		echo "suite=$SUITE arch=$ARCH mirror=$MIRROR"
		apt_sources
		echo "base=${BASE_PKGS[*]}"
		echo "chroot=${CHROOT_PKGS[*]}"
		declare -f build_base
		cat "$HERE/base/customize.sh"
	} | sha256sum | cut -c1-16
}

# --- top layer ---------------------------------------------------------------
install_rtctl() { # $1 = destdir
	local destdir=$1 prefix
	if [ "$SUITE" != bookworm ]; then
		# built for this release, in its own chroot: the host's build links Debian 12's libraries
		"$HERE/build-chroot.sh" --suite "$SUITE" --install "$destdir" || die "building rtctl for $SUITE failed"
	else
		install_rtctl_host "$destdir"
	fi
	# merged /usr in the image: anything installed to /bin, /sbin, /lib goes to /usr
	local d
	for d in bin sbin lib lib64; do
		if [ -d "$destdir/$d" ] && [ ! -L "$destdir/$d" ]; then
			mkdir -p "$destdir/usr/$d"
			cp -a "$destdir/$d/." "$destdir/usr/$d/"
			rm -rf "${destdir:?}/$d"
		fi
	done
	[ -x "$destdir/usr/sbin/rtctld" ] || log "warning: meson install put no /usr/sbin/rtctld in the image"
	[ -f "$destdir/usr/lib/systemd/system/rtctld.service" ] || log "warning: meson install put no /usr/lib/systemd/system/rtctld.service in the image"
}

install_rtctl_host() { # $1 = destdir
	local destdir=$1 prefix
	[ -f "$BUILD_DIR/build.ninja" ] || die "no meson build dir at $BUILD_DIR
  configure one with:  meson setup build --prefix=/usr
  or build the image without rtctl:  $0 --no-rtctl"
	prefix=$(cd "$BUILD_DIR" && meson introspect --buildoptions 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])') ||
		die "cannot read the prefix of $BUILD_DIR (meson introspect failed)"
	[ "$prefix" = /usr ] || die "$BUILD_DIR is configured with --prefix=$prefix; the image needs --prefix=/usr (meson configure $BUILD_DIR --prefix=/usr)"
	log "meson install -C $BUILD_DIR --destdir (rebuilds if needed)"
	# meson install builds first when needed
	if ! meson install -C "$BUILD_DIR" --destdir "$destdir" --quiet >"$WORK/meson-install.log" 2>&1; then
		tail -n 40 "$WORK/meson-install.log" >&2
		die "meson install failed (log: $WORK/meson-install.log)"
	fi
}

install_guest() { # $1 = destdir: the in-VM test runner and its fixtures
	local d=$1
	install -D -m 0755 "$HERE/guest/rtctl-vmtest.py" "$d/usr/lib/rtctl-vmtest/rtctl-vmtest.py"
	# bench/xrun-client (built when libjack was there at meson setup on the host), the JACK client the
	# pipewire-jack tests run under pw-jack, on either suite (a Debian 12 binary runs on 13); not part of
	# the product's install
	if [ -x "${BUILD_DIR:-}/bench/xrun-client" ]; then
		install -D -m 0755 "$BUILD_DIR/bench/xrun-client" "$d/usr/lib/rtctl-vmtest/xrun-client"
	else
		log "warning: no ${BUILD_DIR:-(build dir)}/bench/xrun-client (libjack-jackd2-dev missing at meson setup?): the pipewire-jack tests fail"
	fi
	# bench/bench-syscall-loop (built by default): tracepoint-toggle's system call loop and its cost
	if [ -x "${BUILD_DIR:-}/bench/bench-syscall-loop" ]; then
		install -D -m 0755 "$BUILD_DIR/bench/bench-syscall-loop" "$d/usr/lib/rtctl-vmtest/bench-syscall-loop"
	else
		log "warning: no ${BUILD_DIR:-(build dir)}/bench/bench-syscall-loop: tracepoint-toggle fails"
	fi
	# the runner's modules (common helpers, one per feature), imported from beside it
	local m
	for m in "$HERE"/guest/vmtest_*.py; do
		install -D -m 0644 "$m" "$d/usr/lib/rtctl-vmtest/$(basename "$m")"
	done
	install -D -m 0644 "$HERE/guest/rtctl-vmtest.service" "$d/etc/systemd/system/rtctl-vmtest.service"
	mkdir -p "$d/etc/systemd/system/multi-user.target.wants"
	ln -sf ../rtctl-vmtest.service "$d/etc/systemd/system/multi-user.target.wants/rtctl-vmtest.service"
	install -D -m 0644 "$HERE/guest/udev/60-rtctl-vmtest.rules" "$d/etc/udev/rules.d/60-rtctl-vmtest.rules"
	# the session user's autologin on tty1, started by the tests that need it, and
	# the login shell that hands her session to the runner (README: the session user)
	install -D -m 0644 "$HERE/guest/session/getty@tty1-autologin.conf" \
		"$d/etc/systemd/system/getty@tty1.service.d/rtctl-vmtest-autologin.conf"
	install -D -m 0644 "$HERE/guest/session/rtctl-vmtest-session.sh" "$d/etc/profile.d/rtctl-vmtest-session.sh"
	install -D -m 0644 "$HERE/guest/pipewire/rtctl-vmtest-sink.conf" \
		"$d/etc/pipewire/pipewire.conf.d/rtctl-vmtest-sink.conf"
	# docs/fleet (the playbook and its template), for fleet-ansible
	mkdir -p "$d/usr/local/share/rtctl-vmtest"
	cp -r "$REPO/docs/fleet" "$d/usr/local/share/rtctl-vmtest/fleet"
	local p
	for p in "$HERE"/guest/profiles/*.conf; do
		install -D -m 0644 "$p" "$d/etc/rtctl/profiles/$(basename "$p")"
	done
}

# ------------------------------------------------------------------------------
ensure_host_tools
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # one build at a time per cache

MIRROR=$(detect_mirror)
SECURITY_MIRROR=$(detect_security_mirror)
export MIRROR SECURITY_MIRROR # build-chroot.sh uses the same
KEY=$(base_key)
# The generic kernel's base keeps its old name; another flavour's has its own prefix, so that each keeps
# its one cached base (tools/test builds both).
if [ "$KERNEL" = generic ]; then BASE_PREFIX=base-; else BASE_PREFIX=base-$KERNEL-; fi
BASE=$CACHE/$BASE_PREFIX$KEY
t0=$SECONDS
if [ "$rebuild_base" = 1 ] || [ ! -f "$BASE/complete" ]; then
	log "building base $KEY (not cached)"
	rm -rf "$BASE" "$BASE.tmp"
	# one retry: a mirror hiccup should not cost a CI run
	if ! build_base "$BASE.tmp"; then
		log "retrying the base build once"
		rm -rf "$BASE.tmp"
		build_base "$BASE.tmp" || die "building the base failed twice"
	fi
	mv "$BASE.tmp" "$BASE"
	touch "$BASE/complete"
	log "base $KEY built in $((SECONDS - t0)) s"
else
	log "base $KEY cached ($BASE)"
fi
# keep only the base in use of this kernel flavour: each is ~500 MB
for old in "$CACHE/$BASE_PREFIX"*; do
	[ -e "$old" ] || continue
	[ "$KERNEL" != generic ] || [[ "$(basename "$old")" =~ ^base-[0-9a-f]+(\.tmp)?$ ]] || continue
	[ "$old" = "$BASE" ] || { log "removing stale $old"; rm -rf "$old"; }
done

WORK=$CACHE/work
rm -rf "$WORK"
mkdir -p "$WORK/layer" "$OUT"
t1=$SECONDS
if [ -n "$DEB" ]; then
	[ -f "$DEB" ] || die "no package at $DEB"
	install -D -m 0644 "$DEB" "$WORK/layer/var/cache/rtctl-vmtest/$(basename "$DEB")"
elif [ "$with_rtctl" = 1 ]; then
	install_rtctl "$WORK/layer"
else
	log "--no-rtctl: image without rtctl"
fi
install_guest "$WORK/layer"

# stage = hard links to the base + the layer. tar unlinks a file before it
# writes one in its place, so the cached base is never written through a link.
if [ -n "$DEB" ]; then
	cp -a "$BASE/rootfs" "$WORK/stage"
else
	cp -al "$BASE/rootfs" "$WORK/stage"
fi
tar -C "$WORK/layer" -cf - . | tar -C "$WORK/stage" -xf - --keep-directory-symlink --no-overwrite-dir
if [ -n "$DEB" ]; then
	log "dpkg -i $(basename "$DEB") in the image (log: $OUT/dpkg-install.log)"
	printf '#!/bin/sh\nexit 101\n' >"$WORK/stage/usr/sbin/policy-rc.d"
	chmod 755 "$WORK/stage/usr/sbin/policy-rc.d"
	# shellcheck disable=SC2016 # $1, $2 expand in the inner shell
	if ! unshare --mount --propagation private /bin/sh -euc '
		mount -t proc proc "$1/proc"
		exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin dpkg -i "$2"' \
		sh "$WORK/stage" "/var/cache/rtctl-vmtest/$(basename "$DEB")" >"$OUT/dpkg-install.log" 2>&1; then
		tail -n 30 "$OUT/dpkg-install.log" >&2
		die "dpkg -i in the image failed (log: $OUT/dpkg-install.log)"
	fi
	rm -f "$WORK/stage/usr/sbin/policy-rc.d"
fi
# record what is in the image (the guest prints it)
{
	echo "BASE_KEY=$KEY"
	echo "SUITE=$SUITE"
	echo "KERNEL=$(cat "$BASE/kernel-version")"
	echo "WITH_RTCTL=$with_rtctl"
	echo "RTCTL_DEB=$(basename "${DEB:-none}")"
	echo "RTCTL_GIT=$(git -C "$REPO" describe --always --dirty 2>/dev/null || echo none)"
	echo "BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$WORK/stage/etc/rtctl-vmtest-image"

size_mb=$(($(du -sm "$WORK/stage" | cut -f1) + 768))
log "mkfs.ext4 -d (${size_mb} MiB)"
rm -f "$OUT/rootfs.ext4.tmp"
truncate -s "${size_mb}M" "$OUT/rootfs.ext4.tmp"
mkfs.ext4 -q -F -L rtctl-root -m 0 -E lazy_itable_init=1,lazy_journal_init=1 \
	-d "$WORK/stage" "$OUT/rootfs.ext4.tmp"
mv "$OUT/rootfs.ext4.tmp" "$OUT/rootfs.ext4"
cp "$BASE/vmlinuz" "$OUT/vmlinuz"
cp "$BASE/initrd.img" "$OUT/initrd.img"
cp "$WORK/stage/etc/rtctl-vmtest-image" "$OUT/image.env"
rm -rf "$WORK"
log "image ready in $OUT (top layer $((SECONDS - t1)) s, total $((SECONDS - t0)) s)"
echo "$OUT"
