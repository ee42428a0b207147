#!/usr/bin/env bash
# Build the upstream oracle (oracle/, a Go module pinning kube-scheduler) into the checkout's
# .cache/oracle/bin. Go's module and build caches live in kubeberth's own per-machine cache
# folder (KUBEBERTH_GO_CACHE, default ~/.cache/kubeberth/go), never in the machine's Go setup,
# so a fresh clone on a machine that built once before (CI's) links in seconds instead of
# compiling Kubernetes again. Prints the binary and module versions.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
CACHE="${KUBEBERTH_ORACLE_CACHE:-$ROOT/.cache/oracle}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
if [ ! -x "$GO" ]; then
  echo "oracle/build.sh: no Go toolchain (looked for \$GO, go on PATH, /usr/local/go/bin/go)." >&2
  echo "Install Go >= $(sed -n 's/^go //p' "$HERE/go.mod") (Debian: apt-get install golang-go, if new enough), or set GO=/path/to/go." >&2
  exit 3
fi
GOCACHES="${KUBEBERTH_GO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeberth/go}"
mkdir -p "$CACHE/bin" "$GOCACHES"
export GOPATH="$GOCACHES/gopath" GOMODCACHE="$GOCACHES/gopath/pkg/mod" GOCACHE="$GOCACHES/gocache"
export GOFLAGS="-modcacherw -mod=readonly" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0
cd "$HERE"
# Stamp the pinned Kubernetes version where a release build stamps it (kube-apiserver reports
# it at /version, clients parse it); it changes only the link, never a compiled package.
KUBE="$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9][^ ]*\)$/\1/p' go.mod)"
MINOR="$(echo "$KUBE" | cut -d. -f2)"
LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS="$LDFLAGS -X $pkg.gitVersion=$KUBE -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR"
  LDFLAGS="$LDFLAGS -X $pkg.gitTreeState=clean"
done
start=$(date +%s)
nice -n 10 "$GO" build -p "${ORACLE_BUILD_JOBS:-2}" -trimpath -ldflags "$LDFLAGS" \
  -o "$CACHE/bin/oracle.new" .
mv "$CACHE/bin/oracle.new" "$CACHE/bin/oracle"
echo "oracle: built $CACHE/bin/oracle in $(( $(date +%s) - start ))s with $("$GO" version | cut -d' ' -f3)"
# Kueue lives in its own module and binary (kueue/main.go says why); `oracle admit` execs it.
start=$(date +%s)
(cd kueue && nice -n 10 "$GO" build -p "${ORACLE_BUILD_JOBS:-2}" -trimpath -o "$CACHE/bin/oracle-kueue.new" .)
mv "$CACHE/bin/oracle-kueue.new" "$CACHE/bin/oracle-kueue"
echo "oracle: built $CACHE/bin/oracle-kueue in $(( $(date +%s) - start ))s"
"$CACHE/bin/oracle" version
