#!/bin/bash
# Installs what rtctl needs to build and test from Debian 12's own packages (only what is missing).
set -eu
pkgs=(
  # build
  gcc meson ninja-build pkg-config
  libsystemd-dev libglib2.0-dev libjson-c-dev libnl-3-dev zlib1g-dev
  # rtctl xruns: PipeWire's and JACK's headers (the libraries are opened at run time)
  libpipewire-0.3-dev libspa-0.2-dev libjack-jackd2-dev
  # tests
  python3 python3-pytest python3-dbus python3-dbusmock dbus util-linux clang-format kmod
  jackd2 procps
  # tests/integration/test_vm_mirrors.py: apt-get update of the VM tier's sources with the clock ahead
  faketime
  # test_lifecycle.py slows the stop's restore with strace's fault injection
  strace
  # tests/integration/test_completions.py: each shell runs its own completion
  bash-completion zsh fish
  # tests/integration/test_fleet.py runs docs/fleet/rtctl.yml
  ansible-core
  # the flood client (tests/integration/flood_client.py): GLib main loop for calls under way at once
  python3-gi
  # bench/xruns.py (and its smoke run in tools/test, bench/smoke): the JACK client library, load, a rival
  libjack-jackd2-dev stress-ng tuned
  # bench/compare.py: the rivals it runs itself beside rtctld (irqbalance, and udevd for uevent timing)
  irqbalance udev
  # bench/xruns.py --servers pipewire: a headless pipewire of its own per cell, the client under pw-jack
  pipewire pipewire-bin pipewire-jack
  # bench/bench.py storms: rtctld's memory beside the real polkitd, which maps the libraries it maps
  polkitd
  # bench/latency.py and bench/latency-check.py: cyclictest
  rt-tests
  # tests/fuzz (meson -Dfuzz=true): clang and its libFuzzer runtime (libclang_rt.fuzzer)
  clang libclang-rt-14-dev
  # tests/integration/test_power_profiles.py: the real powerprofilesctl against rtctld (the package's
  # daemon is never started: no systemd here, and the test's bus is its own)
  power-profiles-daemon
  # the VM tier boots its guests with bookworm-backports' QEMU, which runs on the libraries Debian 12's
  # brings (tests/vm/qemu.sh; tests/integration/test_vm_qemu.py fetches it)
  qemu-system-x86
  # the Debian package (tools/build-deb, tools/quickstart on systemd, tests/integration/test_package.py)
  git dpkg-dev debhelper lintian build-essential
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # No daemon a package brings starts on install (irqbalance, udevd, tuned would retune the machine under
  # every test; the benchmarks start them themselves): policy-rc.d refuses every start while apt runs.
  guard=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT  # also when apt-get is interrupted
  fi
  rc=0
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
  [ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || exit "$rc"
fi
# tuned is only benchmarked against (it runs in the foreground under bench/): on a host with systemd its
# package starts and enables tuned.service, which would retune the machine under every test.
for unit in tuned irqbalance; do
  if [[ " ${missing[*]:-} " == *" $unit "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
  fi
done
