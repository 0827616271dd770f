#!/usr/bin/env bash
# Runs sluice's end-to-end benchmark harness (bench/harness): installs the
# comparison and counting tools when missing (HAProxy, wrk and perf, from
# Debian's packages), builds the harness, and runs it from the repository
# root. Arguments are passed to the harness (see `bench/scripts/bench.sh
# -h`); results go to bench/results, logs and configurations to
# out/bench/run-*.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"

missing=()
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v perf >/dev/null 2>&1 || missing+=(linux-perf)
if ((${#missing[@]} > 0)); then
	echo "bench: installing ${missing[*]} with apt-get" >&2
	sudo=()
	if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p out/bench
go build -o out/bench/harness ./bench/harness
# exec: the harness receives Ctrl-C itself and stops every process it started.
exec out/bench/harness "$@"
