#!/usr/bin/env bash
# Make the image's base, localhost/arena-base:bookworm, without an image registry: Debian 12
# bootstrapped from its package mirror (debootstrap --variant=minbase) with python3 and
# python3-venv, imported into podman (or docker) as one layer. Skipped when the image exists,
# so `make image` and the tests pay for it once per machine (about a minute cold).
#
#   deploy/image/make-base.sh [IMAGE]         (default: localhost/arena-base:bookworm)
#
# Environment: ARENA_DEBIAN_MIRROR (default: the deb.debian.org mirror), ARENA_ENGINE
# (podman or docker; default: podman when present, else docker), ARENA_BASE_REBUILD=1 to
# make it again. Needs root (debootstrap) and debootstrap (apt-get install debootstrap).
set -euo pipefail

image="${1:-localhost/arena-base:bookworm}"
mirror="${ARENA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
engine="${ARENA_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}"

exists() {
    if [ "$engine" = podman ]; then podman image exists "$image"
    else docker image inspect "$image" >/dev/null 2>&1; fi
}

if [ "${ARENA_BASE_REBUILD:-0}" != 1 ] && exists; then
    echo "make-base: $image exists (ARENA_BASE_REBUILD=1 makes it again)"
    exit 0
fi
command -v debootstrap >/dev/null || {
    echo "make-base: debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make-base: debootstrap needs root" >&2; exit 1; }

root="$(mktemp -d /var/tmp/arena-base.XXXXXX)"
trap 'rm -rf "$root"' EXIT
began=$(date +%s)
echo "make-base: debootstrap bookworm from $mirror into $root"
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root" "$mirror" \
    > "$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# What a container never needs: downloaded packages, package lists, docs, man pages.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
echo "make-base: importing as $image"
tar --numeric-owner -C "$root" -c . | "$engine" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "make-base: $image made in $(( $(date +%s) - began )) s"
