#!/usr/bin/env bash
# build-hostimage.sh — build the "host under test" guests for the live
# host-network suite (lib/hostnet TestHostUnderTest): Debian 12 roots with
# systemd as PID 1, QEMU and qemu-bridge-helper, in which the real barn-net
# runs against the real NetworkManager, firewalld and systemd-networkd.
#
# Why: this machine has no systemd as PID 1, so the backends that follow
# NetworkManager or systemd-networkd can only meet the real services inside
# a guest. The sibling of build-image.sh, built the same way (debootstrap,
# Debian's packages, cached by the hash of this recipe), but laid out for a
# test rather than a lab: one bare ext4 root filesystem per guest kind
# (root=/dev/vda, no partition table, no boot loader) booted with QEMU's
# direct kernel boot, the kernel and initramfs stored beside it.
#   nm.qcow2        NetworkManager 1.42 and firewalld 1.3 (its default zone)
#                   active; no systemd-networkd unit enabled.
#   networkd.qcow2  systemd 252's networkd, NetworkManager absent. Whether
#                   networkd is active, and which .network units exist, is
#                   chosen per boot by the test's script (variants 2 and 3 of
#                   issue 23 share this image).
# Both have qemu-system-x86 and qemu-bridge-helper (qemu-system-common). No
# Barn binary is baked in: the test shares a directory over 9p (tag "hut")
# holding barn-net and the script, and the image's hut.service mounts it at
# /hut and runs /hut/run as root, its output on the serial console and in the
# share, then powers the guest off.
#
# Output (stdout, one line): the directory holding vmlinuz, initrd.img,
# nm.qcow2, networkd.qcow2 and versions.txt (the versions of the services,
# as installed). Progress goes to stderr.
# Cache: $BARN_IMAGE_CACHE (default /var/cache/barn/images as root, else
# ~/.cache/barn/images)/hut-<recipe hash>. Needs root and the Debian mirror
# apt is configured with. Usage: build-hostimage.sh [--force]
set -euo pipefail

# recipe: begin
SUITE=bookworm
# netbase: /etc/protocols (minbase lacks it; without it firewalld 1.3 exits at
# start with "INVALID_PROTOCOL: esp" loading its stock ipsec service).
# iputils-ping: the kernel fault tests (the networkd guest's "faults" part) ping.
COMMON=(linux-image-amd64 systemd-sysv dbus udev kmod iproute2 procps
  qemu-system-x86 qemu-system-common nftables ca-certificates netbase iputils-ping)
NM_PACKAGES=(network-manager firewalld)
ROOT_MIB=3072
# recipe: end

log() { printf 'build-hostimage: %s\n' "$*" >&2; }
die() { printf 'build-hostimage: error: %s\n' "$*" >&2; exit 1; }

force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  *) die "unknown argument ${1}; usage: build-hostimage.sh [--force]" ;;
esac

if [ "$(id -u)" -eq 0 ]; then default_cache=/var/cache/barn/images
else default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/barn/images; fi
cache=${BARN_IMAGE_CACHE:-$default_cache}
key=$(sed -n '/^# recipe: begin/,/^# recipe: end/p' "$0" | sha256sum | cut -c1-16)
out=$cache/hut-$key

if [ $force -eq 0 ] && [ -f "$out/.published" ]; then
  echo "$out"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "building the host-under-test images needs root (debootstrap, loop devices); run: sudo $0"
for t in debootstrap qemu-img mkfs.ext4 losetup; do
  command -v "$t" >/dev/null || die "$t is missing; run: sudo scripts/install-deps.sh"
done
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1 || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "no Debian mirror found in apt's sources"

mkdir -p "$cache"
exec 9>"$cache/.lock-hut"
flock 9
[ $force -eq 0 ] && [ -f "$out/.published" ] && { echo "$out"; exit 0; }

work=$(mktemp -d "$cache/.work-hut.XXXXXX")
rootfs=$work/rootfs mnt=$work/mnt loopdev=""
cleanup() {
  set +e
  for m in "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$mnt"; do
    mountpoint -q "$m" && umount -l "$m"
  done
  [ -n "$loopdev" ] && losetup -d "$loopdev"
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

# recipe: begin
in_root() { chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive "$@"; }
install_pkgs() {
  in_root apt-get install -y -q --no-install-recommends "$@" >>"$work/apt.log" 2>&1 \
    || { tail -20 "$work/apt.log" >&2; die "package install failed: $*"; }
}

log "debootstrap $SUITE (minbase)"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
mount_api() { mount -t proc proc "$rootfs/proc"; mount -t sysfs sys "$rootfs/sys"; mount --bind /dev "$rootfs/dev"; }
umount_api() { umount "$rootfs/dev" "$rootfs/proc" "$rootfs/sys"; }
mount_api
printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"; chmod 755 "$rootfs/usr/sbin/policy-rc.d"
mkdir -p "$rootfs/etc/initramfs-tools/conf.d"
printf 'MODULES=list\n' > "$rootfs/etc/initramfs-tools/conf.d/hut.conf"
printf '%s\n' virtio_pci virtio_blk virtio_net ext4 crc32c_generic >> "$rootfs/etc/initramfs-tools/modules"
log "installing ${#COMMON[@]} common packages"
install_pkgs "${COMMON[@]}"

log "configuring the guest"
echo hut > "$rootfs/etc/hostname"
printf '127.0.1.1 hut\n' >> "$rootfs/etc/hosts"
printf '/dev/vda / ext4 defaults 0 1\n' > "$rootfs/etc/fstab"
passwd -R "$rootfs" -d root >/dev/null
# The test's entry point: mount the 9p share, run its script, power off.
cat > "$rootfs/etc/systemd/system/hut.service" <<'UNIT'
[Unit]
Description=Barn host-under-test script from the 9p share "hut"
After=multi-user.target
[Service]
Type=oneshot
StandardOutput=journal+console
StandardError=journal+console
ExecStartPre=/sbin/modprobe -a 9p 9pnet_virtio
ExecStartPre=/bin/mkdir -p /hut
ExecStartPre=/bin/mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hut /hut
ExecStart=/bin/sh -c '/hut/run > /hut/run.log 2>&1; echo $? > /hut/run.rc; sync'
ExecStopPost=/bin/systemctl --no-block poweroff
TimeoutStartSec=infinity
[Install]
WantedBy=multi-user.target
UNIT
in_root systemctl enable hut.service >/dev/null 2>&1
# Serial console only: no getty to wait for.
in_root systemctl mask getty@tty1.service serial-getty@ttyS0.service >/dev/null 2>&1
: > "$rootfs/etc/machine-id"; rm -f "$rootfs/var/lib/dbus/machine-id"

# make_image NAME: the current root as a bare ext4 in compressed qcow2,
# without apt's package lists and cache (they stay in $rootfs for the next
# install), checked by e2fsck after the unmount.
make_image() {
  local img=$work/$1.ext4
  umount_api
  truncate -s "${ROOT_MIB}M" "$img"
  mkfs.ext4 -q -L rootfs "$img"
  loopdev=$(losetup --find --show "$img")
  mkdir -p "$mnt"; mount "$loopdev" "$mnt"
  cp -a -x "$rootfs/." "$mnt/"
  rm -f "$mnt/usr/sbin/policy-rc.d"
  rm -rf "$mnt"/var/lib/apt/lists/* "$mnt"/var/cache/apt/archives/*.deb "$mnt"/tmp/*
  sync -f "$mnt"
  umount "$mnt"; losetup -d "$loopdev"; loopdev=""
  e2fsck -fy "$img" >/dev/null 2>&1 || [ $? -eq 1 ] || die "e2fsck of the $1 root failed"
  qemu-img convert -c -O qcow2 "$img" "$work/$1.qcow2"
  rm -f "$img"
  mount_api
}

log "networkd image: systemd-networkd installed, NetworkManager absent"
in_root systemctl disable systemd-networkd.service systemd-networkd.socket >/dev/null 2>&1 || true
make_image networkd
networkd_ver=$(in_root dpkg-query -W -f '${Version}' systemd)

log "nm image: installing ${NM_PACKAGES[*]}"
install_pkgs "${NM_PACKAGES[@]}"
in_root systemctl enable NetworkManager.service firewalld.service >/dev/null 2>&1
make_image nm
nm_ver=$(in_root dpkg-query -W -f '${Version}' network-manager)
fw_ver=$(in_root dpkg-query -W -f '${Version}' firewalld)
qemu_ver=$(in_root dpkg-query -W -f '${Version}' qemu-system-x86)
umount_api
kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | head -n1)
initrd=$(cd "$rootfs/boot" && ls initrd.img-* | head -n1)
[ -n "$kernel" ] && [ -n "$initrd" ] || die "kernel or initrd missing in /boot"
cp "$rootfs/boot/$kernel" "$work/vmlinuz"; cp "$rootfs/boot/$initrd" "$work/initrd.img"
printf 'network-manager %s\nfirewalld %s\nsystemd %s\nqemu-system-x86 %s\nkernel %s\n' \
  "$nm_ver" "$fw_ver" "$networkd_ver" "$qemu_ver" "${kernel#vmlinuz-}" > "$work/versions.txt"
# recipe: end

mkdir -p "$out"
for f in vmlinuz initrd.img nm.qcow2 networkd.qcow2 versions.txt; do
  chmod 0444 "$work/$f"; mv -f "$work/$f" "$out/$f"
done
touch "$out/.published"
log "built in $(( $(date +%s) - start )) s: $out"
echo "$out"
