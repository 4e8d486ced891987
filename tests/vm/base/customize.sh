#!/bin/sh
# Runs INSIDE the base root fs (chroot, private mount namespace, policy-rc.d
# denying every service start) after debootstrap. Everything here ends up in
# the cached base image: its content is part of the base cache key, so any
# edit here rebuilds the base on the next build-image.sh run.
#
# Input (environment): CHROOT_PKGS  packages apt installs now (the kernel,
# polkitd: polkitd does not configure inside debootstrap's second stage).
set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin

# --- a small, fast initramfs: only what mounting /dev/vda needs -------------
mkdir -p /etc/initramfs-tools/conf.d
cat >/etc/initramfs-tools/conf.d/rtctl-vm.conf <<'EOF'
MODULES=list
COMPRESS=zstd
EOF
for m in virtio_pci virtio_blk ext4; do
	grep -qx "$m" /etc/initramfs-tools/modules || echo "$m" >>/etc/initramfs-tools/modules
done

# Modules udev would load for qemu's pc machine that no test needs: under TCG
# each load costs boot time (mkinitramfs copies this into the initrd too).
cat >/etc/modprobe.d/rtctl-vm-blacklist.conf <<'EOF'
blacklist floppy
blacklist ata_piix
blacklist ata_generic
blacklist pata_acpi
blacklist kvm
blacklist kvm_amd
blacklist kvm_intel
blacklist ccp
blacklist pcspkr
blacklist i2c_piix4
blacklist serio_raw
blacklist psmouse
blacklist joydev
EOF

# --- packages that must be installed after debootstrap ----------------------
apt-get -o Acquire::Retries=3 update -qq
# what debootstrap installed, at the versions of every suite in sources.list
# (Debian 13's image also has its security and updates suites; a no-op on 12)
apt-get -o Acquire::Retries=3 upgrade -y -q
# shellcheck disable=SC2086
apt-get -o Acquire::Retries=3 install -y -q --no-install-recommends $CHROOT_PKGS
dpkg --audit
ls /boot/vmlinuz-* /boot/initrd.img-* >/dev/null
# irqbalance moves IRQs on its own: only the test that is about it runs it.
systemctl disable irqbalance.service
# power-profiles-daemon owns the power slider's names when it runs: only the test that is about it
# starts it; rtctld answers them otherwise.
systemctl disable power-profiles-daemon.service

# --- system configuration ----------------------------------------------------
echo rtctl-vm >/etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 rtctl-vm\n' >/etc/hosts
# root is given on the kernel command line (root=/dev/vda rw); no fsck pass
echo '/dev/vda / ext4 rw,noatime 0 0' >/etc/fstab
: >/etc/machine-id   # empty: systemd makes a transient one at every boot

# The session user: logged in on tty1 by getty's autologin when a test needs a
# real logind session (guest/getty@tty1.service.d), uid 1000. In group pipewire
# for the real-time limits PipeWire's data loop asks for
# (/etc/security/limits.d/95-pipewire.conf, applied by pam_limits in
# /usr/lib/pam.d/systemd-user). Not in group audio: the sound card is hers through
# logind's ACL while her session is the active one.
getent group pipewire >/dev/null
id alice >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/sh --groups pipewire alice
# an unprivileged user for the authorization tests (never logged in: no session)
id tester >/dev/null 2>&1 || useradd --create-home --shell /bin/sh tester
grep -qs pam_limits /etc/pam.d/systemd-user /usr/lib/pam.d/systemd-user

# journal in memory only: nothing to flush, nothing left behind
mkdir -p /etc/systemd/journald.conf.d /etc/systemd/system.conf.d
printf '[Journal]\nStorage=volatile\nForwardToConsole=no\n' \
	>/etc/systemd/journald.conf.d/rtctl-vm.conf
# a hung unit must not eat the test budget at shutdown
printf '[Manager]\nDefaultTimeoutStopSec=15s\nDefaultTimeoutStartSec=60s\n' \
	>/etc/systemd/system.conf.d/rtctl-vm.conf

systemctl set-default multi-user.target
# Nobody logs in at boot: the tests that need a session start getty@tty1 (with
# its autologin drop-in) themselves. No getty on the serial console, none
# spawned by logind on other VTs.
systemctl disable getty@tty1.service >/dev/null 2>&1 || true
rm -f /etc/systemd/system/getty.target.wants/getty@tty1.service
mkdir -p /etc/systemd/logind.conf.d
printf '[Login]\nNAutoVTs=0\nReserveVT=0\n' >/etc/systemd/logind.conf.d/rtctl-vm.conf
# nothing that would compete with the tests or slow the boot under TCG
systemctl mask \
	serial-getty@.service console-getty.service \
	apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
	e2scrub_all.timer e2scrub_reap.service fstrim.timer \
	systemd-pstore.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount \
	proc-sys-fs-binfmt_misc.mount >/dev/null

# --- make it small: mkfs.ext4 -d time and image size follow the byte count -
# (not apt-get clean: /var/cache/apt/archives is the host's deb cache, bind-
# mounted for this step; the image's own archive dir stays empty under it)
rm -f /var/cache/apt/*.bin
rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/apt/* \
	/usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* \
	/usr/share/lintian /usr/share/linda
kver=$(find /usr/lib/modules -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n1)
kmod=/usr/lib/modules/$kver/kernel
# no network card, no GPU, no radio, no camera in this VM. Keep block (null_blk),
# scsi (scsi_debug), sound/pci (snd_hda_intel), virtio, usb, fs.
rm -rf "$kmod/drivers/gpu" "$kmod/drivers/media" "$kmod/drivers/infiniband" \
	"$kmod/drivers/staging" "$kmod/drivers/iio" "$kmod/drivers/comedi" \
	"$kmod/drivers/isdn" "$kmod/drivers/bluetooth" "$kmod/drivers/net/wireless" \
	"$kmod/drivers/net/ethernet" "$kmod/drivers/net/can" "$kmod/sound/soc" \
	"$kmod/net/mac80211" "$kmod/net/wireless" "$kmod/net/bluetooth"
depmod -a "$kver"
for m in bfq kyber-iosched null_blk scsi_debug snd-hda-intel virtio_console; do
	modinfo -k "$kver" "$m" >/dev/null
done
echo "customize: kernel $kver"
