package trainer

import (
	"strings"
	"testing"
)

// TestFitsMemory: parameters whose buffers the machine cannot hold are
// refused with both sizes; the limit is RAM and swap (CommitLimit under
// strict overcommit), the need 8 bytes a parameter (value and gradient),
// 4 under ZeRO stages 2 and 3, none where the kernel maps anything.
// The sizes in the messages are worked by hand: 1e9 parameters x 8 bytes
// = 7.45 GiB.
func TestFitsMemory(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct {
		name string
		n    int64
		zero int
		m    memInfo
		want string // "" fits
	}{
		{"too big", 1e9, 0, memInfo{ram: 4 * g}, "1000000000 parameters on this rank, and their float32 values and gradients take 7.5 GiB, more than this machine's 4.0 GiB"},
		{"swap counts", 1e9, 0, memInfo{ram: 4 * g, swap: 4 * g}, ""},
		{"fits", 4e8, 1, memInfo{ram: 4 * g}, ""},
		{"zero 3, one buffer fits", 1e9, 3, memInfo{ram: 4 * g}, ""},
		{"zero 2, one buffer too big", 2e9, 2, memInfo{ram: 4 * g}, "take 7.5 GiB, more than this machine's 4.0 GiB"},
		{"zero 3, the kernel maps anything", 2e9, 3, memInfo{ram: 4 * g, overcommit: 1}, ""},
		{"zero 0, the kernel maps anything", 1e9, 0, memInfo{ram: 4 * g, overcommit: 1}, "take 7.5 GiB"},
		{"strict overcommit", 4e8, 0, memInfo{ram: 4 * g, commitLimit: 2 * g, overcommit: 2}, "take 3.0 GiB, more than this machine's 2.0 GiB"},
	} {
		err := fitsMemory(tc.n, tc.zero, "mlp", tc.m)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if m, ok := readMemInfo(); !ok || m.ram < 1<<20 {
		t.Errorf("readMemInfo on this machine: %+v, %v", m, ok)
	}
}
