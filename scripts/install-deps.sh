#!/usr/bin/env bash
# Installs what Barn's build and test suites need on a Debian host, when run
# as root; elsewhere it only reports what is missing. Idempotent.
set -euo pipefail
# ovmf: UEFI firmware (qemu-system-x86 only recommends it) for every uefi
# image, the official ones included; grub-efi-amd64-bin, dosfstools and
# mtools: the UEFI layout of the lab image (scripts/build-image.sh).
# qemu-system-arm and qemu-efi-aarch64 (AAVMF): arm64 guests under TCG;
# qemu-user-static and binfmt-support: the arm64 image's foreign debootstrap
# (scripts/build-image-arm64.sh).
PKGS=(qemu-system-x86 qemu-utils ovmf debootstrap ansible iproute2 fdisk extlinux
      qemu-system-arm qemu-efi-aarch64 qemu-user-static binfmt-support
      syslinux-common grub-efi-amd64-bin e2fsprogs xfsprogs openssh-client openssh-server sudo
      dosfstools mtools procps iputils-ping nftables
      bash zsh fish)  # the shells whose real completion the script tests drive
# One dpkg-query for all of them (one read of dpkg's database): when
# everything is installed, `make deps` is a quick no-op.
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' "${PKGS[@]}" 2>/dev/null | awk '$(NF-1) == "ok" && $NF == "installed" {printf "%s ", $1}' || true)"
# /dev/net/tun: udev's default rule makes it 0666, so that the setuid
# qemu-bridge-helper, which opens it as QEMU's user, can. A host without
# udev (a container, a minimal VM) keeps the kernel's root-only 0600 and
# every unprivileged bridge NIC fails (barn-net names it:
# tun_not_accessible); as root, do what udev would.
tun=/dev/net/tun
if [ "$(id -u)" -eq 0 ] && [ -c "$tun" ] && [ "$(stat -c %a "$tun")" != 666 ]; then
  echo "install-deps: $tun is mode $(stat -c %a "$tun") (no udev rule applied); chmod 0666 $tun, as udev's default rule does" >&2
  chmod 0666 "$tun"
fi
missing=()
for p in "${PKGS[@]}"; do
  case "$installed" in *" $p "*) ;; *) missing+=("$p") ;; esac
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "install-deps: missing packages: ${missing[*]} (run as root on Debian to install)" >&2
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
