#!/bin/bash
# The VM test tier in one command: build (or reuse) the image, boot it, report.
#
#   tests/vm/run.sh [--build-dir DIR] [--no-rtctl] [--rebuild-base] [run-vm.py options]
#
# --build-dir DIR   meson build dir to install from (default: $RTCTL_BUILD_DIR,
#                   else <repo>/build); configured with --prefix=/usr
# --no-rtctl        image without rtctl (harness work; the daemon tests FAIL)
# --rebuild-base    rebuild the cached Debian base even if its key matches
# Anything else goes to run-vm.py: --only GLOB,... --timeout SEC --verbose
# --keep --append WORD --console-log FILE (see tests/vm/run-vm.py --help).
#
# Needs root (debootstrap, chroot). Cache: ${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}.
# Last line: "N passed, N failed, N skipped"; exit 1 on any failure.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

build_dir=${RTCTL_BUILD_DIR:-$REPO/build}
build_args=()
run_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--build-dir) build_dir=$2; shift ;;
	--build-dir=*) build_dir=${1#*=} ;;
	--no-rtctl | --rebuild-base) build_args+=("$1") ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) run_args+=("$1") ;;
	esac
	shift
done

t0=$SECONDS
image_dir=$("$HERE/build-image.sh" "${build_args[@]}" "$build_dir" | tail -n1)
echo "[run.sh] image ready in $((SECONDS - t0)) s: $image_dir"
t1=$SECONDS
rc=0
/usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" "${run_args[@]}" || rc=$?
# Exit 3: QEMU went away before the guest runner finished, which QEMU 7.2 under TCG does now and then
# on device hotplug. That is the emulator, not a test: one more run decides (its line is the result),
# and the retry is said here and in the log.
if [ "$rc" = 3 ] && [ "${RTCTL_VM_NO_RETRY:-0}" != 1 ]; then
	echo "[run.sh] QEMU ended before the guest runner finished; running the VM tier once more"
	rc=0
	/usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" "${run_args[@]}" || rc=$?
	[ "$rc" = 3 ] && rc=1
fi
echo "[run.sh] build $((t1 - t0)) s + VM $((SECONDS - t1)) s = $((SECONDS - t0)) s"
exit "$rc"
