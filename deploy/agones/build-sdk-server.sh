#!/bin/sh
# Build Agones' SDK server (the sidecar every GameServer pod runs) from a source tree, to
# run the node against the real thing locally: `sdk-server --local` answers the SDK's REST
# calls without Kubernetes (tests/server/net/test_agones.py, docs/agones.md).
#
#   deploy/agones/build-sdk-server.sh SOURCE_DIR [OUTPUT]
#
# SOURCE_DIR: Agones' repository at a release tag (v1.31.0 is what we built and ran: its
# go.mod says go 1.19, Debian 12's golang-go), with its vendor/ folder, so nothing is
# downloaded. OUTPUT defaults to ./sdk-server. Then:
#
#   ./sdk-server --local --address localhost --http-port 9358 --grpc-port 9357
#   ARENA_AGONES_SDK_SERVER=$PWD/sdk-server .venv/bin/python -m pytest tests/server/net/test_agones.py
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 SOURCE_DIR [OUTPUT]" >&2
    exit 2
fi
source_dir=$1
output=$(realpath -m "${2:-sdk-server}")
if [ ! -f "$source_dir/cmd/sdk-server/main.go" ] || [ ! -d "$source_dir/vendor" ]; then
    echo "$0: $source_dir is not an Agones source tree with vendor/ (cmd/sdk-server/main.go)" >&2
    exit 2
fi
command -v go >/dev/null || { echo "$0: no go on PATH (Debian: apt-get install golang-go)" >&2; exit 2; }

cd "$source_dir"
echo "building $(go version | cut -d' ' -f3-) cmd/sdk-server -> $output" >&2
# Vendored modules only, no network; no cgo, so the binary runs on any glibc or none.
CGO_ENABLED=0 GOFLAGS=-mod=vendor GOPROXY=off go build -trimpath -o "$output" ./cmd/sdk-server
echo "$output"
