#!/usr/bin/env bash
# Build the upstream oracle (oracle/, a Go module pinning kube-scheduler) into the project's
# cache dir. Everything Go downloads or caches stays under that dir too, so a machine's own Go
# setup is never touched and CI can cache one folder. Prints the binary and module versions.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
CACHE="${KUBEBERTH_ORACLE_CACHE:-$ROOT/.cache/oracle}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [ ! -x "$GO" ]; then
  echo "oracle/build.sh: no Go toolchain (looked for \$GO, go on PATH, /usr/local/go/bin/go)." >&2
  echo "Install Go >= $(sed -n 's/^go //p' "$HERE/go.mod") from https://go.dev/dl/ (or apt-get install golang-go if new enough), or set GO=/path/to/go." >&2
  exit 3
fi
mkdir -p "$CACHE/bin"
export GOPATH="$CACHE/gopath" GOMODCACHE="$CACHE/gopath/pkg/mod" GOCACHE="$CACHE/gocache"
export GOFLAGS="-modcacherw -mod=readonly" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0
cd "$HERE"
start=$(date +%s)
nice -n 10 "$GO" build -p "${ORACLE_BUILD_JOBS:-2}" -trimpath -o "$CACHE/bin/oracle.new" .
mv "$CACHE/bin/oracle.new" "$CACHE/bin/oracle"
echo "oracle: built $CACHE/bin/oracle in $(( $(date +%s) - start ))s with $("$GO" version | cut -d' ' -f3)"
"$CACHE/bin/oracle" version
