#!/usr/bin/env bash
# Runs the whole test suite on a Debian 12 machine, installing what it needs
# first (scripts/setup.sh --test), so a fresh clone needs nothing else.
# The suite starts real mpirun jobs with up to 4 ranks (--oversubscribe).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
export PATH="/usr/local/go/bin:$PATH"
echo "test: go vet ./..."
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
	echo "test: gofmt would change: $unformatted" >&2
	exit 1
fi
echo "test: go test ./..."
go test -count=1 -timeout 14m ./...
