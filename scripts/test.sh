#!/usr/bin/env bash
# Runs the whole test suite on a Debian 12 machine, installing what it needs
# first (scripts/setup.sh --test), so a fresh clone needs nothing else.
# The suite starts real mpirun jobs with up to 4 ranks (--oversubscribe).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's line starts with the seconds since the suite began (the
# budget is 15 minutes).
phase() {
	echo "test: [${SECONDS}s] $*"
}
scripts/setup.sh --test
export PATH="/usr/local/go/bin:$PATH"
phase "go vet ./..."
go vet ./...
unformatted=$(gofmt -l $(git ls-files "*.go"))
if [[ -n "$unformatted" ]]; then
	echo "test: gofmt would change: $unformatted" >&2
	exit 1
fi
phase "go test ./..."
# The package timeout is a backstop: every mpirun a test starts has its own
# deadline (e2e/helpers_test.go). e2e alone took 792 and 802 s on
# 2026-11-27's machine, where 14m (840 s) left no margin.
go test -count=1 -timeout 20m ./...
phase "scripts/k8s (MPIJob manifest against the MPI Operator's types)"
(cd scripts/k8s && go vet . && go test -count=1 .)
# Bounded fuzzing of everything that parses files users hand us: no panic,
# no allocation sized by an unchecked header. Failures land in testdata/fuzz.
# The budget is a count of executions, not a duration: with a duration, Go
# 1.26's fuzz coordinator can report a spurious "context deadline exceeded"
# as the time runs out (golang/go#75804, fixed in Go 1.27). 30000 runs take
# 10 to 15 s per target here. Minimisation is off: it ran the target
# thousands of times per new input and left almost no time to fuzz (a
# crasher is still saved as found).
for target in data:FuzzReadIDX data:FuzzReadCIFARFile data:FuzzReadShard checkpoint:FuzzLoadCheckpoint; do
	phase "fuzz ${target#*:} for ${FUZZRUNS:-30000} executions"
	go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "${FUZZRUNS:-30000}x" -fuzzminimizetime 0 "./${target%%:*}"
done
phase "done"
