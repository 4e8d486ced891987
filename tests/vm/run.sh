#!/bin/bash
# The VM test tier in one command: build (or reuse) the image, boot it, report.
#
#   tests/vm/run.sh [--suite bookworm|trixie] [--build-dir DIR] [--no-rtctl] [--rebuild-base] [run-vm.py options]
#
# --suite trixie    the same tier on Debian 13 (default bookworm, Debian 12): its own image and cache
#                   ($RTCTL_VM_CACHE/trixie), rtctl built in a Debian 13 chroot (tests/vm/build-chroot.sh)
#                   from the work tree, and its package built there from HEAD for the package run
# --build-dir DIR   meson build dir to install from (default: $RTCTL_BUILD_DIR,
#                   else <repo>/build); configured with --prefix=/usr
# --no-rtctl        image without rtctl (harness work; the daemon tests FAIL)
# --rebuild-base    rebuild the cached Debian base even if its key matches
# --package         only the package run (below): the package-* tests
# --kernel rt       Debian 12 with its PREEMPT_RT kernel (linux-image-rt-amd64, image in
#                   $RTCTL_VM_CACHE/out-rt): one VM run of the rt-* tests, which need that kernel's
#                   timerlat and osnoise tracers and its forced IRQ threads
# Anything else goes to run-vm.py: --only GLOB,... --timeout SEC --verbose
# --keep --append WORD --console-log FILE (see tests/vm/run-vm.py --help).
#
# Without --only, the main VM run (every test but bootargs-booted, boot-tuning, boot-audio, the
# harness-* and the package-* tests), then runs of their own: bootargs-booted, booted with what
# bootargs-grub computed; boot-tuning and boot-audio, which reboot the guest (boot-audio also on Debian
# 13); harness-survives-hang; the package-* tests, in an image of their own with tools/build-deb's .deb
# installed by dpkg -i instead of meson install (tests/vm/README.md).
#
# Needs root (debootstrap, chroot). Cache: ${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm}.
# Last count line: "N passed, N failed, N skipped" (the totals); exit 1 on any failure.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)

build_dir=${RTCTL_BUILD_DIR:-$REPO/build}
build_args=()
run_args=()
package_only=0
kernel=generic
suite=bookworm
while [ $# -gt 0 ]; do
	case $1 in
	--package) package_only=1 ;;
	--kernel) kernel=$2; shift ;;
	--kernel=*) kernel=${1#*=} ;;
	--suite) suite=$2; shift ;;
	--suite=*) suite=${1#*=} ;;
	--build-dir) build_dir=$2; shift ;;
	--build-dir=*) build_dir=${1#*=} ;;
	--no-rtctl | --rebuild-base) build_args+=("$1") ;;
	-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
	*) run_args+=("$1") ;;
	esac
	shift
done
build_args+=(--suite "$suite")
# Debian 13's guest boots in ~60 s under TCG where Debian 12's takes ~20 s (each boot of the tier pays
# it), so its hard limit for one VM run is higher; --timeout or RTCTL_VM_TIMEOUT still decide.
if [ "$suite" != bookworm ] && [ -z "${RTCTL_VM_TIMEOUT:-}" ]; then
	export RTCTL_VM_TIMEOUT=1500
fi
# unit-security holds the unit to the exposure figure README.md states.
security_max=$(sed -n 's/.*`systemd-analyze security rtctld.service` rates it \*\*\([0-9.]*\)\*\*.*/\1/p' "$REPO/README.md" | head -n1)
[ -n "$security_max" ] && run_args+=(--append "rtctl_vmtest.security_max=$security_max")

# One VM run per machine at a time (another CI's, a developer's): this one rebuilds the image a running
# guest reads (its root disk is the image file itself, under snapshot=on). A second run waits here.
exec 7>/run/rtctl-vm.lock
if ! flock -n 7; then
	echo "[run.sh] another VM run holds /run/rtctl-vm.lock: waiting for it"
	flock 7
fi
# The emulator: one of 8.1 or later, which locks guest pages while it translates them (Debian 12's 7.2
# runs stale code after the guest kernel patches its own text; tests/vm/qemu.sh), unless --qemu names one.
if [[ " ${run_args[*]:-} " != *" --qemu"* ]]; then
	if ! qemu=$("$HERE/qemu.sh"); then
		echo "[run.sh] FAIL vm-qemu - no QEMU of 8.1 or later to boot the guests with (tests/vm/qemu.sh, above)"
		echo "0 passed, 1 failed, 0 skipped"
		exit 1
	fi
	run_args+=(--qemu "$qemu")
	echo "[run.sh] QEMU: $("$qemu" --version | head -n1) ($qemu)"
fi
t0=$SECONDS
out=$(mktemp)
passed=0 failed=0 skipped=0
image_dir=

# One VM run; its "N passed, N failed, N skipped" line is added to the totals.
run_vm() {
	local rc=0
	/usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" "$@" | tee "$out" || rc=$?
	# A boot that hung, panicked or lost QEMU is followed by another for the rest of the plan inside
	# run-vm.py itself (it names the test it stopped in), so one bad test costs only itself.
	local line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" | tail -n1) || true
	if [ -n "$line" ]; then
		set -- $line
		passed=$((passed + $1)) failed=$((failed + $3)) skipped=$((skipped + $5))
	else
		failed=$((failed + 1)) # a run that reported nothing must not vanish from the totals
	fi
	return "$rc"
}

# The package run: tools/build-deb's .deb (from HEAD, as committed), in an image of its own where dpkg
# installed it; the package-* tests install it over itself (upgrade), remove and purge it.
package_run() {
	local deb deb_image cache=${RTCTL_VM_CACHE:-/var/tmp/rtctl-vm} builder=("$REPO/tools/build-deb") outdir
	# Debian 13's package is built in a Debian 13 chroot (build-chroot.sh, cached per commit)
	if [ "$suite" != bookworm ]; then
		cache=$cache/$suite
		builder=("$HERE/build-chroot.sh" --suite "$suite" --deb)
	fi
	outdir=$cache/deb
	[ "$suite" = bookworm ] || outdir=$cache/deb-out
	mkdir -p "$cache"
	echo "[run.sh] package: building the .deb (${builder[*]##*/})"
	if ! deb=$("${builder[@]}" "$outdir" 2>"$cache/build-deb.log" | tail -n1) || [ ! -f "$deb" ]; then
		tail -n 30 "$cache/build-deb.log"
		echo "[run.sh] package: FAIL: ${builder[*]##*/} built no package (log: $cache/build-deb.log)"
		failed=$((failed + 1))
		return 1
	fi
	deb_image=$(RTCTL_VM_OUT=$cache/out-deb "$HERE/build-image.sh" --suite "$suite" --deb "$deb" "$build_dir" | tail -n1)
	echo "[run.sh] package: $(basename "$deb") in $deb_image"
	run_vm --image-dir "$deb_image" --only 'package-*' "${run_args[@]}" \
		--console-log "$deb_image/console-package.log"
}

# One survival check's count: PASS NAME - WHAT when the test before the call held (status 0), else
# FAIL with the lines of LOG that show where the tier went. Counted once; the inner results are what
# it expects, not added to the totals.
harness_verdict() {
	local ok=$1 name=$2 what=$3 log=$4
	if [ "$ok" = 0 ]; then
		echo "PASS $name - $what"
		passed=$((passed + 1))
	else
		echo "FAIL $name - not so: $what"
		grep -E '^(PASS|FAIL|SKIP) |boot|hung|panic|reboot|runner' "$log" | tail -n 30
		cp "$log" "$image_dir/$name.log" && echo "[run.sh] $name: the whole log in $image_dir/$name.log"
		failed=$((failed + 1))
	fi
	rm -f "$log"
	return "$ok"
}

# The tier's own survival. harness-survives-hang: a guest whose kernel panics in one test (harness-panic)
# and one that hangs in a later one (harness-hang: no result ever comes, after rtctld-start) each fail by
# name (under a QEMU before 8.1, the hang after a second boot that ran it again, as that TCG's faults
# are), with where the hung guest's CPUs were, and the tests after them still run, each after a boot of
# their own; a boot after the hang starts rtctld again first (dbus-properties needs it).
# harness-survives-reset: a reboot that never
# comes back (harness-reset: the kernel's last word, then QEMU stopped) runs again once in a fresh boot,
# then is named; a boot that ends before the runner starts with no oops (systemd.unit=reboot.target:
# QEMU exits 0 under -no-reboot) is booted once more, then named.
harness_run() {
	local log early ok retry hang rc=0
	log=$(mktemp)
	RTCTL_VM_HANG_MARGIN=15 /usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" \
		--only 'harness-panic,harness-vmhost,rtctld-start,harness-hang,dbus-properties' "${run_args[@]}" \
		--console-log "$image_dir/console-harness.log" >"$log" 2>&1 || true
	ok=1 retry=0 hang="the hang named"
	# A QEMU before 8.1 (--qemu) runs a hung guest's test once more (run-vm.py says so as it starts).
	if grep -q 'runs its test once more$' "$log"; then
		retry=1 hang="the hang run once more and then named"
	fi
	if grep -q '^FAIL harness-hang - no result within its timeout.*its CPUs: cpu0: ' "$log" &&
		grep -q '^FAIL harness-panic - the guest kernel panicked' "$log" &&
		grep -q '^PASS harness-vmhost' "$log" &&
		if [ "$retry" = 1 ]; then
			grep -q '^RETRIED harness-hang - the guest hung (its CPUs: cpu0: ' "$log" &&
				grep -q 'boot 4 for the 1 tests left and rtctld-start again: dbus-properties' "$log"
		else
			! grep -q '^RETRIED' "$log" &&
				grep -q 'boot 3 for the 1 tests left and rtctld-start again: dbus-properties' "$log"
		fi &&
		grep -q '^PASS dbus-properties' "$log"; then
		ok=0
	fi
	harness_verdict "$ok" harness-survives-hang \
		"$(grep -c 'booting ' "$log") boots: the panic named, $hang, the tests after them run, rtctld started again for them" "$log" || rc=1
	log=$(mktemp)
	early=$(mktemp)
	RTCTL_VM_RESET_GRACE=15 /usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" \
		--only 'harness-reset,harness-vmhost' "${run_args[@]}" \
		--console-log "$image_dir/console-harness-reset.log" >"$log" 2>&1 || true
	/usr/bin/python3 "$HERE/run-vm.py" --image-dir "$image_dir" --append systemd.unit=reboot.target \
		"${run_args[@]}" --console-log "$image_dir/console-harness-early.log" >"$early" 2>&1 || true
	# Each run's own lines: the first run may also have met a boot that ended early by itself (once in CI
	# on d2ea302, its first boot, under QEMU 10.0), booted again as designed; that is not the second's.
	ok=1
	if grep -q "harness-reset: the guest's reboot never came back (status paused; QEMU's RESET event never came" "$log" &&
		grep -q "^FAIL harness-reset - the guest's reboot did not come back in 15 s" "$log" &&
		grep -q '^PASS harness-vmhost' "$log" &&
		[ "$(grep -c 'before the guest runner started, no oops in the console: booting again' "$early")" = 1 ] &&
		grep -q '^FAIL harness - the guest runner did not finish (qemu exited, exit 0)' "$early"; then
		ok=0
	fi
	cat "$early" >>"$log"
	rm -f "$early"
	harness_verdict "$ok" harness-survives-reset "a reboot that never came back run once more, then named; a boot that ended before the runner booted once more, then named" "$log" || rc=1
	return "$rc"
}

# Debian 13 (the second VM run in tools/test): every test of the main run but those that cannot run or
# say nothing new there, then the package run. Left out: CPU hot-add (kernel 6.12 under TCG counts no
# hotpluggable CPU: possible=0-3, device_add ends in "Unable to map lapic"), the Ansible fleet run (the
# same playbook as on Debian 12, ~4 min under TCG), and the two extra boots of bootargs-booted and
# boot-tuning (~7 min). tests/vm/README.md lists them. (QEMU 10.0 still counts no hotpluggable CPU
# there.) The xruns tests run: their panics in __hrtimer_run_queues under QEMU 7.2 were its stale code.
TRIXIE_SKIP="isolation-v2-hotplug,isolation-v2-cpu-unplug,fleet-ansible"

rc=0
first=$(mktemp)
trap 'rm -f "$out" "$first"' EXIT
if [ "$kernel" != generic ] && { [ "$package_only" = 1 ] || [ "$suite" != bookworm ]; }; then
	echo "run.sh: --kernel $kernel is a run of its own on Debian 12: not with --package or --suite $suite" >&2
	exit 2
fi
if [ "$kernel" != generic ]; then
	# The PREEMPT_RT run: its own image (and base), only the tests that need that kernel.
	image_dir=$("$HERE/build-image.sh" "${build_args[@]}" --kernel "$kernel" "$build_dir" | tail -n1)
	echo "[run.sh] image ready in $((SECONDS - t0)) s: $image_dir"
	t1=$SECONDS
	run_vm --only 'harness-boot,rt-*' --no-threadirqs "${run_args[@]}" --console-log "$image_dir/console-rt.log" || rc=1
	echo "[run.sh] build $((t1 - t0)) s + VM $((SECONDS - t1)) s = $((SECONDS - t0)) s"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit "$rc"
fi
if [ "$package_only" = 1 ]; then
	package_run || rc=1
	echo "[run.sh] VM $((SECONDS - t0)) s"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit "$rc"
fi
image_dir=$("$HERE/build-image.sh" "${build_args[@]}" "$build_dir" | tail -n1)
if [ "$suite" != bookworm ] && [[ " ${run_args[*]:-} " != *" --only"* ]]; then
	echo "[run.sh] image ready in $((SECONDS - t0)) s: $image_dir"
	echo "[run.sh] Debian 13: leaving out $TRIXIE_SKIP, bootargs-booted and boot-tuning (see tests/vm/README.md)"
	t1=$SECONDS
	run_vm --skip "$TRIXIE_SKIP" "${run_args[@]}" || rc=1
	echo "[run.sh] boot-audio: a VM run of its own (it reboots the guest)"
	run_vm --only boot-audio "${run_args[@]}" --console-log "$image_dir/console-boot-audio.log" || rc=1
	package_run || rc=1
	echo "[run.sh] build $((t1 - t0)) s + VM $((SECONDS - t1)) s = $((SECONDS - t0)) s"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit "$rc"
fi
echo "[run.sh] image ready in $((SECONDS - t0)) s: $image_dir"
t1=$SECONDS
run_vm "${run_args[@]}" || rc=$?
cp "$out" "$first"
# The default run boots twice more: bootargs-booted, with the boot arguments the first boot's
# bootargs-grub computed (rtctl bootargs for the isolating test profile), shows the kernel took them;
# boot-tuning reboots the guest itself, and QEMU 7.2 (TCG) does not come back from a reset after the
# CPU unplug of the first run, so it gets a fresh image boot of its own. The three lines add up to the
# tier's last count line.
if [[ " ${run_args[*]:-} " != *" --only"* ]]; then
	words=$(sed -n 's/^PASS bootargs-grub - wanted \([^;]*\);.*/\1/p' "$first" | head -n1)
	if [ -z "$words" ]; then
		echo "[run.sh] bootargs-booted: FAIL: bootargs-grub reported no computed arguments to boot with"
		failed=$((failed + 1)) rc=1
	else
		appends=()
		for w in $words; do appends+=(--append "$w"); done
		echo "[run.sh] second boot, with: $words"
		s0=$skipped
		run_vm --only bootargs-booted "${appends[@]}" "${run_args[@]}" \
			--console-log "$image_dir/console-bootargs-booted.log" || rc=1
		[ "$skipped" = "$s0" ] || rc=1
	fi
	echo "[run.sh] boot-tuning: a VM run of its own (it reboots the guest)"
	run_vm --only boot-tuning "${run_args[@]}" --console-log "$image_dir/console-boot-tuning.log" || rc=1
	echo "[run.sh] boot-audio: a VM run of its own (it reboots the guest)"
	run_vm --only boot-audio "${run_args[@]}" --console-log "$image_dir/console-boot-audio.log" || rc=1
	echo "[run.sh] harness: a hung guest and a panicked one cost only their own test"
	harness_run || rc=1
	package_run || rc=1
	echo "[run.sh] build $((t1 - t0)) s + VM $((SECONDS - t1)) s = $((SECONDS - t0)) s"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit "$rc"
fi
echo "[run.sh] build $((t1 - t0)) s + VM $((SECONDS - t1)) s = $((SECONDS - t0)) s"
exit "$rc"
