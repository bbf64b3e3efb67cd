#!/usr/bin/env bash
# build-image.sh — build Barn's lab guest images from Debian's packages and
# publish them as a local, signed Barn image repository.
#
# Why: no cloud image can be downloaded here, so the guest is built the way a
# distribution builds one: debootstrap a Debian 12 (bookworm) root, install
# Debian's generic kernel (the cloud kernel lacks 9p, which vm_shares need),
# cloud-init, OpenSSH, sudo, xfsprogs, dbus (systemd-logind handles the ACPI
# power button, so QMP system_powerdown shuts the guest down cleanly), make
# one ext4 root filesystem and lay it out twice:
#   d12       UEFI only, like every official image but el7: GPT, an EFI
#             system partition (FAT32) holding GRUB at the removable path
#             EFI/BOOT/BOOTX64.EFI (each node's NVRAM starts as the empty
#             OVMF template, so there is no boot entry to rely on), then the
#             root partition. This is the repository's default image.
#   d12-bios  BIOS only: MBR, the same root filesystem, extlinux.
# Both are converted to compressed qcow2.
#
# Output (stdout, one line): the repository directory, which holds
#   repo.yaml                              intent (families d12, d12-bios)
#   images/d12-<version>-amd64.qcow2       the UEFI image
#   images/d12-bios-<version>-amd64.qcow2  the BIOS image
#   catalog.json, catalog.json.minisig     evidence, signed with a lab key
#   keys/catalog.pub                       the key to trust (barn-repo trust add)
# Progress goes to stderr.
#
# The result is cached outside the checkout, keyed by this recipe's inputs
# (the lines between the "recipe:" markers below), in $BARN_IMAGE_CACHE (default /var/cache/barn/images
# as root, else ~/.cache/barn/images); later runs only print the path.
# Needs root (debootstrap, loop devices, mount) and the Debian mirror that
# apt is configured with. Usage: build-image.sh [--force | --remove-cache | --arm64]
#
# --arm64 also publishes the arm64 variant of d12 (images/d12-<version>-arm64.qcow2,
# hard-linked from scripts/build-image-arm64.sh's cached build, which it runs
# when needed: about 20-40 minutes on a 2-core amd64 host), so the selector
# d12 resolves per architecture. Without --arm64 a repository that already
# holds the arm64 variant keeps it.
#
# The cache is this script's, not Barn's state: Barn never reads it except
# through the repository path printed here. Publishing writes a manifest,
# <recipe>/.manifest, naming every file this script wrote in that recipe
# directory (with its sha256) and the directories it made. --remove-cache
# removes exactly those: a listed file only while it is a regular file,
# reached through no symlink, with the recorded sha256; a listed directory
# only when it is empty (rmdir); interrupted builds' .work.* directories
# only when they hold this script's marker and nothing is mounted under
# them; then the lock, the emptied cache directory and its parent when that
# is an empty directory named barn. Nothing is followed through a symlink.
# Every path removed and every path kept (with why) is logged.
# `make uninstall IMAGES=1` runs it.
set -euo pipefail

# recipe: begin
VERSION=12.4          # image version published in repo.yaml; bump with the recipe
SUITE=bookworm
PACKAGES=(linux-image-amd64 systemd-sysv cloud-init cloud-guest-utils
  openssh-server sudo iproute2 ifupdown netbase xfsprogs e2fsprogs udev kmod
  isc-dhcp-client dbus iputils-ping python3 ca-certificates locales)
DISK_MIB=4096         # the UEFI disk; the BIOS disk is the same root without the ESP
ESP_MIB=64            # FAT32 needs at least ~33 MiB
# recipe: end

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
log() { printf 'build-image: %s\n' "$*" >&2; }
die() { printf 'build-image: error: %s\n' "$*" >&2; exit 1; }

force=0 remove=0 arm64=0
case "${1:-}" in
  --force) force=1 ;;
  --remove-cache) remove=1 ;;
  --arm64) arm64=1 ;;
  "") ;;
  *) die "unknown argument ${1}; usage: build-image.sh [--force | --remove-cache | --arm64]" ;;
esac

if [ "$(id -u)" -eq 0 ]; then default_cache=/var/cache/barn/images
else default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/barn/images; fi
cache=${BARN_IMAGE_CACHE:-$default_cache}
key=$(sed -n '/^# recipe: begin/,/^# recipe: end/p' "$0" | sha256sum | cut -c1-16)
out=$cache/$key
repo=$out/repo
uefi_image=$repo/images/d12-$VERSION-amd64.qcow2
bios_image=$repo/images/d12-bios-$VERSION-amd64.qcow2
arm64_image=$repo/images/d12-$VERSION-arm64.qcow2

manifest_name=.manifest
manifest_head="# build-image.sh manifest v1: what this script wrote in this recipe directory"

# write_manifest records, after publishing, every file this script wrote in
# $out (sha256 and path relative to $out) and the directories it made.
write_manifest() {
  local f tmp=$out/$manifest_name.tmp
  {
    echo "$manifest_head (recipe $key)"
    echo "dir keys"; echo "dir repo"; echo "dir repo/images"
    for f in .published keys/catalog.key keys/catalog.pub repo/repo.yaml repo/catalog.json \
      repo/catalog.json.minisig repo/catalog.pub "${uefi_image#"$out"/}" "${bios_image#"$out"/}" "${arm64_image#"$out"/}"; do
      [ -f "$out/$f" ] && [ ! -L "$out/$f" ] || continue
      echo "file $(sha256sum < "$out/$f" | cut -c1-64) $f"
    done
  } > "$tmp" && mv -f -- "$tmp" "$out/$manifest_name"
}

# no_link_under DIR REL: no component of DIR/REL (below DIR) is a symlink.
no_link_under() {
  local d=$1 rel=$2 p=$1 c
  local IFS=/
  for c in $rel; do
    p=$p/$c
    [ -L "$p" ] && return 1
  done
  return 0
}

# others DIR names what is left in DIR (symlinks not followed).
others() { find -P "$1" -mindepth 1 -maxdepth 1 -printf '%f ' | sed 's/ $//'; }

removed=() kept=()
gone() { removed+=("$1"); log "removed $1"; }
keep() { kept+=("$1 ($2)"); }

# remove_recipe DIR removes what DIR/.manifest lists, as recorded, then
# the listed directories that are empty, then the manifest and DIR when
# nothing else is left. It returns 1 when anything stays.
remove_recipe() {
  local d=$1 m=$1/$manifest_name kind a b p rc=0
  local dirs=()
  if [ -L "$m" ] || [ ! -f "$m" ] || [[ $(head -n 1 "$m") != "$manifest_head"* ]]; then
    keep "$d" "no manifest of build-image.sh in it: not provably written by this script"
    return 1
  fi
  while read -r kind a b; do
    case $kind in
      dir) dirs=("$a" "${dirs[@]}") ;; # innermost last listed, first removed
      file)
        p=$d/$b
        if ! no_link_under "$d" "$b"; then keep "$p" "reached through a symlink"; rc=1
        elif [ ! -e "$p" ]; then :
        elif [ ! -f "$p" ]; then keep "$p" "not a regular file"; rc=1
        elif [ "$(sha256sum < "$p" | cut -c1-64)" != "$a" ]; then keep "$p" "changed since this script wrote it"; rc=1
        else rm -f -- "$p" && gone "$p"
        fi ;;
    esac
  done < <(tail -n +2 "$m")
  for a in "${dirs[@]}"; do
    p=$d/$a
    if ! no_link_under "$d" "$a"; then keep "$p" "a symlink"; rc=1
    elif [ -d "$p" ] && ! rmdir -- "$p" 2>/dev/null; then keep "$p" "holds $(others "$p"), not written by this script"; rc=1
    fi
  done
  [ $rc -eq 0 ] || return 1
  rm -f -- "$m"
  if rmdir -- "$d" 2>/dev/null; then gone "$d"; return 0; fi
  keep "$d" "holds $(others "$d"), not written by this script"
  return 1
}

remove_cache() {
  if [ -L "$cache" ] || [ ! -d "$cache" ]; then
    log "no build cache at $cache${cache:+ (or it is a symlink, which is not followed)}"
    return 0
  fi
  exec 9>>"$cache/.lock"
  flock -n 9 || die "a build is running (it holds $cache/.lock); retry when it finishes"
  local e
  shopt -s dotglob nullglob
  for e in "$cache"/*; do
    case $(basename "$e") in
      .lock|.lock-arm64) ;;
      .work.*)
        if [ -L "$e" ] || [ ! -d "$e" ] || [ -L "$e/.build-image-work" ] || [ ! -f "$e/.build-image-work" ]; then
          keep "$e" "no marker of build-image.sh in it"
        elif findmnt -rno TARGET | grep -qF "$e/"; then
          keep "$e" "something is mounted under it"
        else
          rm -rf --one-file-system -- "$e" && gone "$e (an interrupted build's scratch directory)"
        fi ;;
      *)
        if [[ $(basename "$e") =~ ^[0-9a-f]{16}$ ]] && [ -d "$e" ] && [ ! -L "$e" ]; then
          remove_recipe "$e" || :
        else
          keep "$e" "not a recipe directory of build-image.sh"
        fi ;;
    esac
  done
  shopt -u dotglob nullglob
  if [ ${#kept[@]} -gt 0 ]; then
    printf 'build-image: kept %s\n' "${kept[@]}" >&2
    log "removed ${#removed[@]} path(s), kept ${#kept[@]}; kept the build cache $cache"
    return 0
  fi
  rm -f -- "$cache/.lock" "$cache/.lock-arm64"
  rmdir -- "$cache" && log "removed the build cache $cache"
  local parent
  parent=$(dirname "$cache")
  if [ "$(basename "$parent")" = barn ] && [ ! -L "$parent" ] && rmdir -- "$parent" 2>/dev/null; then
    log "removed $parent (empty)"
  fi
  return 0
}

if [ $remove -eq 1 ]; then
  remove_cache
  exit 0
fi

mkdir -p "$cache"

exec 9>"$cache/.lock"
flock 9   # one build at a time; a second caller waits and reuses the result

barn_repo() {
  if [ -x "$top/bin/barn-repo" ]; then "$top/bin/barn-repo" "$@"
  else (cd "$top" && go run ./barn-repo "$@"); fi
}

publish() {
  # repo.yaml is intent: no sizes or digests (barn-repo build derives them).
  local arm64_variant="" arm64_note=""
  if [ -f "$arm64_image" ]; then
    arm64_variant=", arm64: {source_user: debian}"
    arm64_note="; the arm64 variant by scripts/build-image-arm64.sh (ESP with GRUB at EFI/BOOT/BOOTAA64.EFI, console ttyAMA0)"
  fi
  cat > "$repo/repo.yaml" <<EOF
schema: 1
revision: $(date +%s)
defaults: {image: d12, channel: stable, arch: native, boot: uefi}
images:
  d12:
    aliases: [debian12, bookworm]
    boot: uefi
    channels: {stable: "$VERSION"}
    versions:
      "$VERSION":
        status: supported
        provenance: "built locally by scripts/build-image.sh (recipe $key) from Debian $SUITE packages; GPT, ESP with GRUB at EFI/BOOT/BOOTX64.EFI$arm64_note"
        variants: {amd64: {source_user: debian}$arm64_variant}
  d12-bios:
    aliases: [debian12-bios, bookworm-bios]
    boot: bios
    channels: {stable: "$VERSION"}
    versions:
      "$VERSION":
        status: supported
        provenance: "built locally by scripts/build-image.sh (recipe $key) from Debian $SUITE packages; MBR with extlinux, the same root filesystem as d12"
        variants:
          amd64: {source_user: debian}
EOF
  # Each step checks its status: set -e does not apply inside a function
  # whose caller tests it.
  mkdir -p "$out/keys" || return 1
  if [ ! -f "$out/keys/catalog.key" ]; then
    barn_repo keygen --out "$out/keys/catalog" >/dev/null || return 1
  fi
  cp "$out/keys/catalog.pub" "$repo/catalog.pub" || return 1
  barn_repo build --root "$repo" >/dev/null || return 1
  barn_repo sign --key "$out/keys/catalog.key" --root "$repo" >/dev/null || return 1
  barn_repo verify --root "$repo" >/dev/null || return 1
  touch "$out/.published" || return 1
  write_manifest
}

# add_arm64 hard-links the arm64 build (build-image-arm64.sh, its own
# recipe and cache entry) into the repository and marks it for publishing.
add_arm64() {
  local built
  built=$("$here/build-image-arm64.sh") || die "building the arm64 image failed (see above)"
  ln -f -- "$built" "$arm64_image" 2>/dev/null || cp -f -- "$built" "$arm64_image" || die "copying $built into $repo/images failed"
  rm -f "$out/.published"
  log "added the arm64 variant of d12: $arm64_image"
}

if [ $force -eq 0 ] && [ -f "$uefi_image" ] && [ -f "$bios_image" ]; then
  if [ $arm64 -eq 1 ] && [ ! -f "$arm64_image" ]; then add_arm64; fi
  [ -f "$out/.published" ] || publish || die "publishing the repository at $repo failed"
  # A repository published before manifests existed: record it now, but
  # only when its repo.yaml's provenance names this script and this recipe.
  if [ ! -f "$out/$manifest_name" ] && [ ! -L "$out/$manifest_name" ] && [ ! -L "$repo" ] &&
    grep -qF "built locally by scripts/build-image.sh (recipe $key)" "$repo/repo.yaml" 2>/dev/null; then
    write_manifest || die "writing the manifest $out/$manifest_name failed"
    log "recorded $out/$manifest_name for the repository published before manifests existed"
  fi
  echo "$repo"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building the image needs root (debootstrap, loop devices); run: sudo $0"
for t in debootstrap sfdisk extlinux qemu-img mkfs.ext4 mkfs.fat mcopy losetup grub-mkstandalone; do
  command -v "$t" >/dev/null || die "$t is missing; run: sudo scripts/install-deps.sh"
done
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -f "$mbr" ] || die "$mbr is missing (package syslinux-common)"
[ -d /usr/lib/grub/x86_64-efi ] || die "GRUB's x86_64-efi modules are missing (package grub-efi-amd64-bin)"

# The mirror apt already uses (deb822 sources or sources.list).
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1 || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || die "no Debian mirror found in apt's sources"

work=$(mktemp -d "$cache/.work.XXXXXX")
echo "build-image.sh scratch directory (recipe $key, pid $$); --remove-cache deletes it when nothing is mounted under it" > "$work/.build-image-work"
rootfs=$work/rootfs mnt=$work/mnt loopdev=""
cleanup() {
  set +e
  for m in "$rootfs/dev/pts" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$mnt"; do
    mountpoint -q "$m" && umount -l "$m"
  done
  [ -n "$loopdev" ] && losetup -d "$loopdev"
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

# recipe: begin
log "debootstrap $SUITE (minbase)"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }

log "installing ${#PACKAGES[@]} packages"
mount -t proc proc "$rootfs/proc"; mount -t sysfs sys "$rootfs/sys"
mount --bind /dev "$rootfs/dev"
printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"; chmod 755 "$rootfs/usr/sbin/policy-rc.d"
chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${PACKAGES[@]}" >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "package install failed"; }
rm -f "$rootfs/usr/sbin/policy-rc.d"

log "configuring the guest"
echo barn > "$rootfs/etc/hostname"
printf 'LABEL=rootfs / ext4 defaults,errors=remount-ro 0 1\n' > "$rootfs/etc/fstab"
printf 'auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n' > "$rootfs/etc/network/interfaces"
# First boot under TCG is slow, so the image does ahead of time what
# cloud-init would otherwise do at boot: the locale is generated here
# (en_US.UTF-8, with C.UTF-8 the default) and only an Ed25519 host key is
# made per instance (an RSA key takes tens of seconds without KVM).
# Only the cloud-init modules a Barn seed uses, or that Debian's image
# behaviour depends on (apt-configure writes the guest's apt sources),
# are listed: each listed module is imported and checked at every boot,
# and some run commands even with nothing to do (grub-dpkg probes for a
# GRUB the guest does not have: 7 s under TCG).
cat > "$rootfs/etc/cloud/cloud.cfg.d/90-barn.cfg" <<'CFG'
datasource_list: [ NoCloud, None ]
locale: C.UTF-8
ssh_genkeytypes: [ed25519]
cloud_init_modules: [migrator, seed_random, bootcmd, write-files, growpart, resizefs,
  mounts, set_hostname, update_hostname, update_etc_hosts, users-groups, ssh]
cloud_config_modules: [locale, set-passwords, apt-configure, runcmd]
cloud_final_modules: [write-files-deferred, scripts-vendor, scripts-per-once,
  scripts-per-boot, scripts-per-instance, scripts-user, ssh-authkey-fingerprints,
  keys-to-console, install-hotplug, final-message]
CFG
# e2scrub only checks ext4 on LVM, which a Barn guest does not have, yet
# its boot-time reaper took 42 s of the only vCPU under TCG while
# cloud-init ran.
ln -sf /dev/null "$rootfs/etc/systemd/system/e2scrub_reap.service"
ln -sf /dev/null "$rootfs/etc/systemd/system/e2scrub_all.timer"
sed -i 's/^# *en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' "$rootfs/etc/locale.gen"
chroot "$rootfs" locale-gen >/dev/null
printf 'LANG=C.UTF-8\n' > "$rootfs/etc/default/locale"
# Only the modules a virtio guest needs in the initramfs: a smaller image
# loads much faster under TCG than Debian's MODULES=most default.
printf 'MODULES=list\n' > "$rootfs/etc/initramfs-tools/conf.d/barn.conf"
printf '%s\n' virtio_pci virtio_blk virtio_scsi virtio_net sd_mod sr_mod ext4 crc32c_generic \
  >> "$rootfs/etc/initramfs-tools/modules"
chroot "$rootfs" update-initramfs -u -k all >/dev/null 2>&1
# Host keys are per instance: cloud-init (or this drop-in) creates an
# Ed25519 key at first boot; the drop-in also replaces a key a power cut
# left empty, which would otherwise keep sshd from ever starting.
rm -f "$rootfs"/etc/ssh/ssh_host_*
mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
cat > "$rootfs/etc/systemd/system/ssh.service.d/10-barn-hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -s /etc/ssh/ssh_host_ed25519_key || { rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub; ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key; }'
ExecStartPre=/usr/sbin/sshd -t
UNIT
: > "$rootfs/etc/machine-id"; rm -f "$rootfs/var/lib/dbus/machine-id"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
umount "$rootfs/dev" "$rootfs/proc" "$rootfs/sys"
kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | head -n1)
initrd=$(cd "$rootfs/boot" && ls initrd.img-* | head -n1)
[ -n "$kernel" ] && [ -n "$initrd" ] || die "kernel or initrd missing in /boot"

# One root filesystem, made once and copied into both layouts. It is
# sized to end where the UEFI disk's backup GPT begins.
root_mib=$((DISK_MIB - 1 - ESP_MIB - 1))
log "making the $root_mib MiB ext4 root filesystem"
rootimg=$work/root.ext4
truncate -s "${root_mib}M" "$rootimg"
mkfs.ext4 -q -L rootfs "$rootimg"
loopdev=$(losetup --find --show "$rootimg")
mkdir -p "$mnt"; mount "$loopdev" "$mnt"
cp -a "$rootfs/." "$mnt/"
# BIOS: extlinux on the root filesystem (its boot sector is told where the
# partition starts by the MBR, so the same bytes boot at any offset).
mkdir -p "$mnt/boot/extlinux"
cat > "$mnt/boot/extlinux/extlinux.conf" <<EOF
DEFAULT barn
TIMEOUT 1
LABEL barn
  LINUX /boot/$kernel
  INITRD /boot/$initrd
  APPEND root=LABEL=rootfs ro console=ttyS0,115200 quiet
EOF
extlinux --install "$mnt/boot/extlinux" >/dev/null 2>&1
umount "$mnt"; losetup -d "$loopdev"; loopdev=""

# UEFI: a standalone GRUB (the modules it needs and this configuration in
# one EFI binary) that loads the kernel from the root filesystem by label.
cat > "$work/grub.cfg" <<EOF
set timeout=0
search --no-floppy --label rootfs --set=root
linux /boot/$kernel root=LABEL=rootfs ro console=ttyS0,115200 quiet
initrd /boot/$initrd
boot
EOF
grub-mkstandalone -O x86_64-efi -o "$work/BOOTX64.EFI" \
  --install-modules="linux boot normal search search_label part_gpt ext2 echo" \
  --modules="part_gpt ext2" --locales= --fonts= --themes= \
  "boot/grub/grub.cfg=$work/grub.cfg"
esp=$work/esp.fat
truncate -s "${ESP_MIB}M" "$esp"
mkfs.fat -F 32 -n EFI "$esp" >/dev/null
# mtools writes the FAT image directly: no vfat mount (which a container's
# kernel may not offer).
mmd -i "$esp" ::/EFI ::/EFI/BOOT
mcopy -i "$esp" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI

place() { dd if="$1" of="$2" bs=1M seek="$3" conv=notrunc,sparse status=none; }
log "laying out the UEFI disk (GPT, ESP, root) and the BIOS disk (MBR, root)"
uefi_raw=$work/uefi.raw
truncate -s "${DISK_MIB}M" "$uefi_raw"
sfdisk -q "$uefi_raw" <<EOF
label: gpt
start=1MiB, size=${ESP_MIB}MiB, type=U, name=EFI
start=$((1 + ESP_MIB))MiB, size=${root_mib}MiB, type=L, name=root
EOF
place "$esp" "$uefi_raw" 1
place "$rootimg" "$uefi_raw" $((1 + ESP_MIB))
bios_raw=$work/bios.raw
truncate -s "$((1 + root_mib))M" "$bios_raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$bios_raw"
place "$rootimg" "$bios_raw" 1
dd if="$mbr" of="$bios_raw" bs=440 count=1 conv=notrunc status=none
rm -f "$rootimg" "$esp"

log "converting both to compressed qcow2"
mkdir -p "$repo/images"
qemu-img convert -c -O qcow2 "$uefi_raw" "$work/uefi.qcow2" &
uefi_pid=$!
qemu-img convert -c -O qcow2 "$bios_raw" "$work/bios.qcow2" || die "qemu-img convert (bios) failed"
wait "$uefi_pid" || die "qemu-img convert (uefi) failed"
chmod 0444 "$work/uefi.qcow2" "$work/bios.qcow2"
mv "$work/uefi.qcow2" "$uefi_image"
mv "$work/bios.qcow2" "$bios_image"
# recipe: end
log "images built in $(( $(date +%s) - start )) s: $uefi_image ($(stat -c %s "$uefi_image") bytes), $bios_image ($(stat -c %s "$bios_image") bytes)"

rm -f "$out/.published"
if [ $arm64 -eq 1 ]; then add_arm64; fi
publish || die "publishing the repository at $repo failed"
echo "$repo"
