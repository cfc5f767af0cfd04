#!/usr/bin/env bash
# Build the project's images from this checkout: what `make image`, the tests under
# tests/deploy and the compose region (deploy/compose.yaml) use. Makes the local base first
# when it is missing (make-base.sh), then builds with podman (or docker where podman is
# missing). No image registry is needed.
#
#   deploy/image/build.sh [node|etcd|prometheus|region ...]       (default: node)
#
#   node        $ARENA_IMAGE (default arena:latest) from deploy/Containerfile: the node
#   etcd        localhost/arena-etcd:bookworm, Debian's etcd-server (deploy/image/etcd.Containerfile)
#   prometheus  localhost/arena-prometheus:bookworm, Debian's prometheus with a start script
#               that points deploy/prometheus.yml at the region's ports
#   region      all three (what deploy/compose.yaml runs)
#
# Environment:
#   ARENA_ENGINE      podman or docker (default: podman when present, else docker)
#   ARENA_BASE        the base image (default: localhost/arena-base:bookworm, made here)
#   ARENA_CA_BUNDLE   a CA bundle pip in the node's build trusts besides its own, passed as
#                     the build secret `hostca` (default: the host's bundle when there is
#                     one; empty: none)
#   ARENA_OCI_RUNTIME podman's runtime for the builds' RUN steps (default: runc when
#                     installed; crun refuses some hosts' hybrid cgroup layout)
# The RUN steps get ulimits below common hosts' hard limits (podman's defaults are above
# them there and every step fails): nofile 16384, nproc 4096.
set -euo pipefail
cd "$(dirname "$0")/../.."

engine="${ARENA_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}"
base="${ARENA_BASE:-localhost/arena-base:bookworm}"
ca="${ARENA_CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}"
command -v "$engine" >/dev/null || {
    echo "build: neither podman nor docker is installed (apt-get install podman runc)" >&2
    exit 1; }

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(node)
expanded=()
for target in "${targets[@]}"; do
    case "$target" in
        node|etcd|prometheus) expanded+=("$target") ;;
        region) expanded+=(node etcd prometheus) ;;
        *) echo "build: unknown image '$target' (node, etcd, prometheus or region)" >&2; exit 2 ;;
    esac
done

if [ "$base" = localhost/arena-base:bookworm ]; then
    ARENA_ENGINE="$engine" deploy/image/make-base.sh "$base"
fi

common=(build --build-arg "BASE=$base" --ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
if [ "$engine" = podman ]; then
    common+=(--format docker)  # HEALTHCHECK is docker-format only
    runtime="${ARENA_OCI_RUNTIME:-$(command -v runc >/dev/null && echo runc || true)}"
    if [ -n "$runtime" ]; then common+=(--runtime "$runtime"); fi
fi

build() {  # TAG CONTAINERFILE CONTEXT [ARGS...]
    local tag="$1" file="$2" context="$3" began
    shift 3
    began=$(date +%s)
    echo "build: $engine ${common[*]} -f $file -t $tag $* $context"
    "$engine" "${common[@]}" -f "$file" -t "$tag" "$@" "$context"
    echo "build: $tag built in $(( $(date +%s) - began )) s"
}

for target in "${expanded[@]}"; do
    case "$target" in
        node)
            secret=()
            if [ -n "$ca" ] && [ -s "$ca" ]; then secret=(--secret "id=hostca,src=$ca"); fi
            build "${ARENA_IMAGE:-arena:latest}" deploy/Containerfile . "${secret[@]}" ;;
        etcd)
            build localhost/arena-etcd:bookworm deploy/image/etcd.Containerfile deploy/image ;;
        prometheus)
            build localhost/arena-prometheus:bookworm deploy/image/prometheus.Containerfile \
                deploy/image ;;
    esac
done
