#!/bin/sh
# Start Prometheus on deploy/prometheus.yml and its alert rules (mounted read-only at
# /etc/arena/prometheus.yml and /etc/arena/prometheus/alerts.yml), its scrape targets
# rewritten to this region's:
#   ARENA_NODE_TARGETS       the nodes' admin host:port (--admin-port), comma-separated
#                            (default 127.0.0.1:9777)
#   ARENA_DIRECTORY_TARGETS  the directories' host:port, comma-separated (default 127.0.0.1:7700)
#   ARENA_REGION             the nodes' region label (default local)
#   ARENA_PROMETHEUS_ADDRESS where Prometheus listens (default 127.0.0.1:9090)
# Further arguments go to prometheus. Fails, saying so, when deploy/prometheus.yml no longer
# has the targets this replaces.
set -eu
source=/etc/arena/prometheus.yml
rules=/etc/arena/prometheus/alerts.yml
config=/tmp/arena-prometheus
nodes="${ARENA_NODE_TARGETS:-127.0.0.1:9777}"
directories="${ARENA_DIRECTORY_TARGETS:-127.0.0.1:7700}"
region="${ARENA_REGION:-local}"
for file in "$source" "$rules"; do
    [ -r "$file" ] || { echo "prometheus-region: $file is not mounted" >&2; exit 2; }
done
mkdir -p "$config/prometheus"
cp "$rules" "$config/prometheus/alerts.yml"
quote() { printf '%s' "$1" | sed 's/[^,][^,]*/"&"/g; s/,/, /g'; }
quoted=$(quote "$nodes")
quoted_directories=$(quote "$directories")
sed -e "s|\[\"127.0.0.1:9777\"\]|[$quoted]|" \
    -e "s|\[\"127.0.0.1:7700\"\]|[$quoted_directories]|" \
    -e "s|{region: local}|{region: $region}|" "$source" > "$config/prometheus.yml"
first="${nodes%%,*}"
first_directory="${directories%%,*}"
grep -qF "[\"$first\"" "$config/prometheus.yml" \
    && grep -qF "[\"$first_directory\"" "$config/prometheus.yml" \
    && grep -qF "{region: $region}" "$config/prometheus.yml" || {
    echo "prometheus-region: $source no longer lists 127.0.0.1:9777 / 127.0.0.1:7700" \
         "with {region: local}; update this script" >&2
    exit 2
}
exec prometheus --config.file="$config/prometheus.yml" \
    --storage.tsdb.path=/var/lib/prometheus/data \
    --web.listen-address="${ARENA_PROMETHEUS_ADDRESS:-127.0.0.1:9090}" "$@"
