package mpitest

import "testing"

// TestOutcomes: a rank counts as passed only on its own "--- PASS:" line
// for exactly this test (not a test whose name it prefixes, not the
// parent of a subtest); skips are counted with their reason.
func TestOutcomes(t *testing.T) {
	out := `=== RUN   TestRing
=== RUN   TestRing/np=2
--- PASS: TestRing (0.10s)
    --- PASS: TestRing/np=2 (0.10s)
--- PASS: TestRingCompressed (0.01s)
=== RUN   TestRing/np=2
    --- SKIP: TestRing/np=2 (0.00s)
        ring_test.go:12: no GPU here
PASS
testing: warning: no tests to run
PASS
`
	for _, tc := range []struct {
		name          string
		passed, skips int
		why           string
	}{
		{"TestRing", 1, 0, ""},
		{"TestRing/np=2", 1, 1, "ring_test.go:12: no GPU here"},
		{"TestRingCompressed", 1, 0, ""},
		{"TestRin", 0, 0, ""},
		{"TestAbsent", 0, 0, ""},
	} {
		p, s, why := outcomes(out, tc.name)
		if p != tc.passed || s != tc.skips || why != tc.why {
			t.Errorf("%s: %d passed, %d skipped (%q); want %d, %d (%q)", tc.name, p, s, why, tc.passed, tc.skips, tc.why)
		}
	}
}
