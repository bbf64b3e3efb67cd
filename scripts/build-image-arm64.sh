#!/usr/bin/env bash
# build-image-arm64.sh — build the arm64 (aarch64) variant of Barn's d12 lab
# image from Debian's packages, on an amd64 host.
#
# Why: the arm64 guest (issue 25) needs a UEFI image for qemu-system-aarch64's
# virt machine with AAVMF firmware, and no cloud image can be downloaded
# here. The root is made the way build-image.sh makes the amd64 one, but
# foreign:
#   1. debootstrap --arch arm64 --foreign (unpacks only);
#   2. binfmt_misc runs the arm64 binaries of the second stage and of apt
#      through qemu-user-static: binfmt_misc is mounted when it is not, and
#      Debian's qemu-aarch64 entry registered with the F flag (the
#      interpreter is opened at registration, so it works inside the chroot)
#      when it is not registered; both are undone on exit, so the host is
#      left as it was;
#   3. apt installs linux-image-arm64, cloud-init, OpenSSH and GRUB's
#      arm64-efi modules; grub-mkstandalone (run inside the chroot) writes
#      EFI/BOOT/BOOTAA64.EFI, the removable path AAVMF boots from an empty
#      NVRAM;
#   4. GPT: ESP (FAT32) then the ext4 root, converted to compressed qcow2.
# The console is ttyAMA0 (the virt machine's PL011 UART).
#
# Output (stdout, one line): the path of the qcow2 image,
#   <cache>/<recipe>/d12-<version>-arm64.qcow2
# build-image.sh --arm64 publishes it in the local repository as the arm64
# variant of d12. Progress goes to stderr. The cache ($BARN_IMAGE_CACHE,
# default as build-image.sh) is keyed by this recipe's inputs (the lines
# between the "recipe:" markers); the recipe directory carries the same
# manifest format as build-image.sh's, so build-image.sh --remove-cache
# removes it with the same proofs. Needs root. Usage: build-image-arm64.sh [--force]
set -euo pipefail

# recipe: begin
VERSION=12.4          # must equal build-image.sh's VERSION: one d12 version, two variants
SUITE=bookworm
PACKAGES=(linux-image-arm64 grub-efi-arm64-bin systemd-sysv cloud-init cloud-guest-utils
  openssh-server sudo iproute2 ifupdown netbase xfsprogs e2fsprogs udev kmod
  isc-dhcp-client dbus iputils-ping python3 ca-certificates locales)
DISK_MIB=4096
ESP_MIB=64
# recipe: end

log() { printf 'build-image-arm64: %s\n' "$*" >&2; }
die() { printf 'build-image-arm64: error: %s\n' "$*" >&2; exit 1; }

force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  *) die "unknown argument ${1}; usage: build-image-arm64.sh [--force]" ;;
esac

if [ "$(id -u)" -eq 0 ]; then default_cache=/var/cache/barn/images
else default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/barn/images; fi
cache=${BARN_IMAGE_CACHE:-$default_cache}
key=$(sed -n '/^# recipe: begin/,/^# recipe: end/p' "$0" | sha256sum | cut -c1-16)
out=$cache/$key
image=$out/d12-$VERSION-arm64.qcow2
manifest_head="# build-image.sh manifest v1: what this script wrote in this recipe directory"

if [ $force -eq 0 ] && [ -f "$image" ] && [ -f "$out/.manifest" ]; then
  echo "$image"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building the arm64 image needs root (debootstrap, binfmt_misc, loop devices); run: sudo $0"
for t in debootstrap sfdisk qemu-img mkfs.ext4 mkfs.fat mcopy losetup; do
  command -v "$t" >/dev/null || die "$t is missing; run: sudo scripts/install-deps.sh"
done
qemu_user=/usr/libexec/qemu-binfmt/aarch64-binfmt-P
[ -x "$qemu_user" ] || die "$qemu_user is missing (package qemu-user-static); run: sudo scripts/install-deps.sh"

mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1 || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "no Debian mirror found in apt's sources"

mkdir -p "$cache"
exec 9>>"$cache/.lock-arm64"
flock 9   # one arm64 build at a time; a second caller waits and reuses the result
if [ $force -eq 0 ] && [ -f "$image" ] && [ -f "$out/.manifest" ]; then echo "$image"; exit 0; fi

binfmt=/proc/sys/fs/binfmt_misc mounted_binfmt=0 registered=0
work=$(mktemp -d "$cache/.work.XXXXXX")
echo "build-image.sh scratch directory (arm64 recipe $key, pid $$); --remove-cache deletes it when nothing is mounted under it" > "$work/.build-image-work"
rootfs=$work/rootfs mnt=$work/mnt loopdev=""
cleanup() {
  set +e
  for m in "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$mnt"; do
    mountpoint -q "$m" && umount -l "$m"
  done
  [ -n "$loopdev" ] && losetup -d "$loopdev"
  rm -rf "$work"
  # Leave binfmt_misc as it was found.
  [ $registered -eq 1 ] && echo -1 > "$binfmt/qemu-aarch64" && log "unregistered binfmt_misc entry qemu-aarch64"
  [ $mounted_binfmt -eq 1 ] && umount "$binfmt" && log "unmounted $binfmt"
}
trap cleanup EXIT

# binfmt_misc: mount and register only what is missing, and remember it.
if ! mountpoint -q "$binfmt"; then
  mount -t binfmt_misc binfmt_misc "$binfmt" || die "cannot mount binfmt_misc at $binfmt"
  mounted_binfmt=1; log "mounted binfmt_misc at $binfmt (undone on exit)"
fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  # Debian's entry (/usr/share/binfmts/qemu-aarch64) with flags P (preserve
  # argv[0]) and F (fix binary: open the interpreter now).
  magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  printf ':qemu-aarch64:M::%s:%s:%s:PF\n' "$magic" "$mask" "$qemu_user" > "$binfmt/register" \
    || die "registering qemu-aarch64 in binfmt_misc failed"
  registered=1; log "registered binfmt_misc entry qemu-aarch64 with flags PF (undone on exit)"
fi
grep -q '^enabled' "$binfmt/qemu-aarch64" || die "binfmt_misc entry qemu-aarch64 is disabled; enable it: echo 1 > $binfmt/qemu-aarch64"
start=$(date +%s)

# recipe: begin
log "debootstrap --foreign --arch arm64 $SUITE (minbase)"
debootstrap --arch=arm64 --foreign --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap (first stage) failed"; }
log "debootstrap second stage under qemu-user-static"
chroot "$rootfs" /debootstrap/debootstrap --second-stage >>"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap (second stage) failed"; }

log "installing ${#PACKAGES[@]} packages under qemu-user-static"
mount -t proc proc "$rootfs/proc"; mount -t sysfs sys "$rootfs/sys"
mount --bind /dev "$rootfs/dev"
printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"; chmod 755 "$rootfs/usr/sbin/policy-rc.d"
printf 'deb %s %s main\n' "$mirror" "$SUITE" > "$rootfs/etc/apt/sources.list"
chroot "$rootfs" apt-get update -q >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "apt-get update failed"; }
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${PACKAGES[@]}" >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "package install failed"; }
rm -f "$rootfs/usr/sbin/policy-rc.d"

log "configuring the guest"
echo barn > "$rootfs/etc/hostname"
printf 'LABEL=rootfs / ext4 defaults,errors=remount-ro 0 1\n' > "$rootfs/etc/fstab"
printf 'auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n' > "$rootfs/etc/network/interfaces"
cat > "$rootfs/etc/cloud/cloud.cfg.d/90-barn.cfg" <<'CFG'
datasource_list: [ NoCloud, None ]
locale: C.UTF-8
ssh_genkeytypes: [ed25519]
CFG
sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' "$rootfs/etc/locale.gen"
chroot "$rootfs" locale-gen >/dev/null
printf 'LANG=C.UTF-8\n' > "$rootfs/etc/default/locale"
printf 'MODULES=list\n' > "$rootfs/etc/initramfs-tools/conf.d/barn.conf"
printf '%s\n' virtio_pci virtio_mmio virtio_blk virtio_scsi virtio_net sd_mod sr_mod ext4 crc32c_generic \
  >> "$rootfs/etc/initramfs-tools/modules"
chroot "$rootfs" update-initramfs -u -k all >/dev/null 2>&1
rm -f "$rootfs"/etc/ssh/ssh_host_*
mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
cat > "$rootfs/etc/systemd/system/ssh.service.d/10-barn-hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -s /etc/ssh/ssh_host_ed25519_key || { rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub; ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key; }'
ExecStartPre=/usr/sbin/sshd -t
UNIT
kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | head -n1)
initrd=$(cd "$rootfs/boot" && ls initrd.img-* | head -n1)
[ -n "$kernel" ] && [ -n "$initrd" ] || die "kernel or initrd missing in /boot"
cat > "$rootfs/tmp/grub.cfg" <<EOF
set timeout=0
search --no-floppy --label rootfs --set=root
linux /boot/$kernel root=LABEL=rootfs ro console=ttyAMA0,115200 quiet
initrd /boot/$initrd
boot
EOF
chroot "$rootfs" grub-mkstandalone -O arm64-efi -o /tmp/BOOTAA64.EFI \
  --install-modules="linux boot normal search search_label part_gpt ext2 echo" \
  --modules="part_gpt ext2" --locales= --fonts= --themes= \
  "boot/grub/grub.cfg=/tmp/grub.cfg" || die "grub-mkstandalone (arm64-efi) failed"
mv "$rootfs/tmp/BOOTAA64.EFI" "$work/BOOTAA64.EFI"
# The GRUB tools were needed only to make the EFI binary.
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q grub-efi-arm64-bin >>"$work/apt.log" 2>&1 || true
: > "$rootfs/etc/machine-id"; rm -f "$rootfs/var/lib/dbus/machine-id"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
umount "$rootfs/dev" "$rootfs/proc" "$rootfs/sys"

root_mib=$((DISK_MIB - 1 - ESP_MIB - 1))
log "making the $root_mib MiB ext4 root filesystem"
rootimg=$work/root.ext4
truncate -s "${root_mib}M" "$rootimg"
mkfs.ext4 -q -L rootfs "$rootimg"
loopdev=$(losetup --find --show "$rootimg")
mkdir -p "$mnt"; mount "$loopdev" "$mnt"
cp -a "$rootfs/." "$mnt/"
umount "$mnt"; losetup -d "$loopdev"; loopdev=""
esp=$work/esp.fat
truncate -s "${ESP_MIB}M" "$esp"
mkfs.fat -F 32 -n EFI "$esp" >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT
mcopy -i "$esp" "$work/BOOTAA64.EFI" ::/EFI/BOOT/BOOTAA64.EFI
log "laying out the UEFI disk (GPT, ESP, root)"
raw=$work/uefi.raw
truncate -s "${DISK_MIB}M" "$raw"
sfdisk -q "$raw" <<EOF
label: gpt
start=1MiB, size=${ESP_MIB}MiB, type=U, name=EFI
start=$((1 + ESP_MIB))MiB, size=${root_mib}MiB, type=L, name=root
EOF
dd if="$esp" of="$raw" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$rootimg" of="$raw" bs=1M seek=$((1 + ESP_MIB)) conv=notrunc,sparse status=none
rm -f "$rootimg" "$esp"
log "converting to compressed qcow2"
qemu-img convert -c -O qcow2 "$raw" "$work/uefi.qcow2" || die "qemu-img convert failed"
chmod 0444 "$work/uefi.qcow2"
mkdir -p "$out"
mv "$work/uefi.qcow2" "$image"
# recipe: end
{
  echo "$manifest_head (arm64 recipe $key)"
  echo "file $(sha256sum < "$image" | cut -c1-64) ${image#"$out"/}"
} > "$out/.manifest.tmp" && mv -f "$out/.manifest.tmp" "$out/.manifest"
log "arm64 image built in $(( $(date +%s) - start )) s: $image ($(stat -c %s "$image") bytes)"
echo "$image"
