#!/usr/bin/env bash
# Build the local stand-in for the pinned python:3.11-slim-bookworm base, for a machine that reaches Debian's
# archive but no container registry (what docs/performance.md, "The images", measured `make docker-smoke` on):
#
#   tools/standin_base.sh [TAG]       default TAG: pinbench-smoke/debian-bookworm-python3.11:local
#   make docker-smoke SMOKE_BASES=python-3.11-slim=pinbench-smoke/debian-bookworm-python3.11:local
#
# A Debian bookworm rootfs made with `debootstrap --variant=minbase`, plus python3.11, python3.11-venv and
# python-is-python3 (what the CPU and dynamic-degree images use of their base), and this host's CA certificates
# (so a build behind a TLS-inspecting proxy trusts what the host trusts), loaded with `docker import`. It is not
# the pinned image: every image built on it records the swap (`container.base_image.differs_from_pinned`).
# Needs root, debootstrap and a running Docker engine; MIRROR overrides the Debian archive.
set -euo pipefail

TAG="${1:-pinbench-smoke/debian-bookworm-python3.11:local}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
# python3-distutils: python3.11-venv depends on the virtual python3.11-distutils, which debootstrap does not resolve.
PACKAGES="python3.11,python3.11-venv,python3-distutils,python-is-python3,ca-certificates"
HOST_CA="/etc/ssl/certs/ca-certificates.crt"

fail() { echo "standin_base.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap makes device nodes and chroots)"
command -v debootstrap >/dev/null || fail "debootstrap not found: apt-get install -y debootstrap"
docker info >/dev/null 2>&1 || fail "no Docker engine answers (start dockerd first)"
[ -f "$HOST_CA" ] || fail "$HOST_CA not found: the host's CA certificates are copied into the image"

work="$(mktemp -d "${TMPDIR:-/tmp}/pinbench-standin.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR"
cp "$HOST_CA" "$rootfs/etc/ssl/certs/ca-certificates.crt"
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
chroot "$rootfs" python --version >/dev/null || fail "python in the rootfs does not run"

tar --numeric-owner -C "$rootfs" -c . \
    | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
        --message "debootstrap --variant=minbase bookworm + $PACKAGES + host CA certificates" - "$TAG" >/dev/null
size="$(docker image inspect --format '{{.Size}}' "$TAG")"
echo "$TAG: $((size / 1000000)) MB, $(docker run --rm --network none "$TAG" python --version)"
