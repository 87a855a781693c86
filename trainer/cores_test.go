package trainer

import (
	"fmt"
	"strings"
	"testing"
)

func TestPerRank(t *testing.T) {
	for _, tc := range []struct{ avail, online, local, want int }{
		{16, 16, 4, 4},  // unbound: the node's cores shared
		{16, 16, 1, 16}, // one rank: all of them
		{16, 16, 3, 5},  // rounded down
		{2, 2, 3, 1},    // more ranks than cores: one each
		{1, 2, 2, 1},    // bound to one core (mpirun's default at np <= 2)
		{8, 16, 1, 8},   // bound to half the machine
		{4, 0, 2, 4},    // online CPUs unknown: the affinity
		{0, 0, 1, 1},    // never zero threads
	} {
		if got := perRank(tc.avail, tc.online, tc.local); got != tc.want {
			t.Errorf("perRank(avail %d, online %d, local %d) = %d, want %d", tc.avail, tc.online, tc.local, got, tc.want)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	for s, want := range map[string]int{"0-3,6": 5, "0": 1, "0-1\n": 2, "0-15,32-47": 32, "": 0, "3-1": 0, "x": 0, "0-": 0} {
		if got := parseCPUList(s); got != want {
			t.Errorf("parseCPUList(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestOversubscribed(t *testing.T) {
	for _, tc := range []struct {
		threads, avail int
		warn           bool
	}{{1, 2, false}, {2, 2, false}, {3, 2, true}, {16, 2, true}, {4, 16, false}} {
		got := oversubscribed(tc.threads, tc.avail)
		if (got != "") != tc.warn {
			t.Errorf("oversubscribed(%d, %d) = %q, want a warning: %v", tc.threads, tc.avail, got, tc.warn)
		}
		if tc.warn && !strings.Contains(got, fmt.Sprintf("--threads %d is more than the %d CPU(s)", tc.threads, tc.avail)) {
			t.Errorf("oversubscribed(%d, %d) = %q: names neither the option nor the CPUs", tc.threads, tc.avail, got)
		}
	}
}
