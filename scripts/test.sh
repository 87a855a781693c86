#!/usr/bin/env bash
# Runs the whole test suite on a Debian 12 machine, installing what it needs
# first (scripts/setup.sh --test), so a fresh clone needs nothing else.
# The suite starts real mpirun jobs with up to 8 ranks (--oversubscribe).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's line starts with the seconds since the suite began (the
# budget is 15 minutes).
export TEST_START=${TEST_START:-$(date +%s)}
phase() {
	echo "test: [$(($(date +%s) - TEST_START))s] $*"
}
scripts/setup.sh --test
export PATH="/usr/local/go/bin:$PATH"
unformatted=$(gofmt -l $(git ls-files "*.go"))
if [[ -n "$unformatted" ]]; then
	echo "test: gofmt would change: $unformatted" >&2
	exit 1
fi

# fuzz PKG TARGET runs one bounded fuzz target. Go's fuzz worker panics
# when one call of the target takes 10 s of wall time (internal/fuzz's
# "deadlocked!" timer), and the coordinator then saves the input as
# "hung or terminated unexpectedly". Once, in a fresh root, a worker niced
# under the e2e's load stalled like that (0 executions a second for a
# minute) on an input that then passed alone in 0.007 s. So such a failure
# is checked: the saved input runs alone, with a 2-minute limit. If it
# passes, the stall was the machine's: the input is removed and the caller
# fuzzes the target once more (a second failure fails the suite). A real
# crash, or a real hang, fails on that rerun and fails the suite at once.
fuzz() {
	local pkg=$1 target=$2 out saved
	out=$(mktemp)
	if go test -run '^$' -fuzz "^$target\$" -fuzztime "${FUZZRUNS:-30000}x" -fuzzminimizetime 0 -parallel 1 "./$pkg" >"$out" 2>&1; then
		cat "$out"
		rm -f "$out"
		return 0
	fi
	cat "$out"
	saved=
	if grep -q "hung or terminated unexpectedly" "$out"; then
		saved=$(grep -o "go test -run=$target/[0-9a-f]*" "$out" | head -1 | sed 's/.*-run=//')
	fi
	rm -f "$out"
	if [[ -n ${3:-} || -z $saved ]]; then
		exit 1
	fi
	if go test -count=1 -timeout 2m -run "^$target\$/^${saved#*/}\$" "./$pkg"; then
		echo "test: $target's saved input $saved passes alone: the worker stalled, not the target; removed it, fuzzing again"
		rm -f "$pkg/testdata/fuzz/$saved"
		rmdir --ignore-fail-on-non-empty "$pkg/testdata/fuzz/${saved%/*}"
		return 1
	fi
	echo "test: $target fails on its saved input $pkg/testdata/fuzz/$saved" >&2
	exit 1
}

# side runs everything but the packages' tests: go vet, the MPIJob
# manifest's module, and bounded fuzzing of everything that parses files
# users hand us (no panic, no allocation sized by an unchecked header;
# failures land in testdata/fuzz). The fuzz budget is a count of
# executions, not a duration: with a duration, Go 1.26's fuzz coordinator
# can report a spurious "context deadline exceeded" as the time runs out
# (golang/go#75804, fixed in Go 1.27). 30000 runs took 10 to 15 s per
# target here with two workers. Minimisation is off: it ran the target thousands of times
# per new input and left almost no time to fuzz (a crasher is still saved
# as found). One fuzz worker (-parallel 1): the side checks take what
# the end-to-end tests leave of the CPU, and two workers took more.
# An instrumented build (-fuzz) compiles every dependency of the test
# binary again, cgo's C files included: so no fuzz target's package may
# depend on model (winograd.c alone is minutes of gcc). FuzzLoadCheckpoint
# lives in checkpoint/fuzz for that reason; when it was in checkpoint, whose
# tests build models, its build alone took 240 s of one core in a fresh
# root (330c154: go test done at 759 s, that build from 743 to 989 s).
side() {
	set -e
	local targets="checkpoint/fuzz:FuzzLoadCheckpoint data:FuzzReadIDX data:FuzzReadCIFARFile data:FuzzReadShard"
	for target in $targets; do
		if go list -test -deps "./${target%%:*}" | grep -qx train/model; then
			echo "test: ${target%%:*}'s test build depends on train/model: fuzzing it would compile model's C kernels again; move the fuzz target to a package that does not (see checkpoint/fuzz)" >&2
			exit 1
		fi
	done
	for target in $targets; do
		phase "fuzz ${target#*:} for ${FUZZRUNS:-30000} executions"
		fuzz "${target%%:*}" "${target#*:}" || fuzz "${target%%:*}" "${target#*:}" stalled
	done
	phase "scripts/k8s (MPIJob manifest against the MPI Operator's types)"
	(cd scripts/k8s && go vet . && go test -count=1 .)
	# go vet last: it builds each package with its tests, as go test does
	# (the same cached actions), and first it compiled model's test build,
	# cgo and winograd.c included, at the same time as go test: twice the
	# work, 160 to 360 s of vet in a clean clone. By now go test has built
	# them.
	phase "go vet ./..."
	go vet ./...
	phase "side checks done"
}

# The side checks run alongside the packages' tests at nice 19: the
# end-to-end tests wait on mpirun jobs, sleeps and servers for much of
# their time (alone they used 0.9 of this machine's 2 cores). The niced
# work still slows them (e2e 625 s alone, 682 to 804 s with it), but the
# whole ends sooner: from an empty build cache, one phase after another
# took 18 min 15 s (setup's build 114 s, vet 105 s, go test 653 s, k8s
# 54 s, fuzz 169 s, mostly compiling), alongside 13 min 51 s to 15 min
# 57 s (README, Tests).
side_log=$(mktemp)
trap 'rm -f "$side_log"' EXIT
nice -n 19 bash -c "$(declare -f phase fuzz side); side" >"$side_log" 2>&1 &
side_pid=$!
phase "go test ./... (go vet, scripts/k8s and fuzzing alongside, niced)"
# The package timeout is a backstop: every mpirun a test starts has its own
# deadline (e2e/helpers_test.go). -parallel 4: the e2e's tests marked
# alongside (t.Parallel: the bad-input tests, Slurm, PyTorch's reference,
# the CUDA emulator) wait much of their time, and four at once on 2 cores
# ended that phase in 63 s, against about 127 s for the same tests with
# the bad-input ones in sequence; no other package has parallel tests.
rc=0
go test -count=1 -timeout 20m -parallel 4 ./... || rc=$?
phase "go test ./... ended (exit $rc); waiting for the side checks"
side_rc=0
wait "$side_pid" || side_rc=$?
cat "$side_log"
if ((rc != 0 || side_rc != 0)); then
	echo "test: FAILED: go test ./... exit $rc, side checks (vet, k8s, fuzz) exit $side_rc" >&2
	exit 1
fi
phase "done"
