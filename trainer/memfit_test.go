package trainer

import (
	"strings"
	"testing"
)

// TestFitsMemory: a model part whose buffers the machine cannot hold is
// refused with both sizes. The limit is RAM and swap (CommitLimit under
// strict overcommit); the need 4 bytes a parameter for its value, its
// gradient and each optimizer state float, ZeRO's stages sharding them
// over the replicas, with one whole buffer mapped under stages 2 and 3
// unless the kernel maps anything. Sizes worked by hand: 1e9 parameters
// with SGD's momentum, 12e9 bytes = 11.18 GiB.
func TestFitsMemory(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct {
		name string
		mm   modelMemory
		m    memInfo
		want string // "" fits
	}{
		{"sgd with momentum", modelMemory{n: 1e9, state: 1}, memInfo{ram: 8 * g},
			"1000000000 parameters on this rank, and their float32 values, gradients and optimizer state take 11.2 GiB, more than this machine's 8.0 GiB"},
		{"swap counts", modelMemory{n: 1e9, state: 1}, memInfo{ram: 8 * g, swap: 4 * g}, ""},
		{"sgd without momentum", modelMemory{n: 1e9}, memInfo{ram: 8 * g}, ""},                                                                                              // 7.45 GiB
		{"adam, zero 1 over 4", modelMemory{n: 1e9, state: 2, zero: 1, replicas: 4}, memInfo{ram: 8 * g}, "(--zero 1 shards over 4 replicas) take 9.3 GiB"},                 // 4+4+8/4 = 10e9
		{"adam, zero 2 over 4", modelMemory{n: 1e9, state: 2, zero: 2, replicas: 4}, memInfo{ram: 8 * g}, ""},                                                               // 4+1+2 = 7e9 = 6.5 GiB
		{"adam, zero 3 over 4", modelMemory{n: 1e9, state: 2, zero: 3, replicas: 4}, memInfo{ram: 4 * g}, ""},                                                               // 16e9/4, one buffer 4e9 = 3.7 GiB
		{"zero 3, one buffer too big", modelMemory{n: 3e9, state: 2, zero: 3, replicas: 8}, memInfo{ram: 8 * g}, "buffer, mapped whole under --zero 2 and 3 take 11.2 GiB"}, // 12e9 against 6e9 sharded
		{"zero 3, the kernel maps anything", modelMemory{n: 3e9, state: 2, zero: 3, replicas: 8}, memInfo{ram: 8 * g, overcommit: 1}, ""},                                   // 5.6 GiB sharded
		{"zero 0, the kernel maps anything", modelMemory{n: 1e9, state: 1}, memInfo{ram: 8 * g, overcommit: 1}, "take 11.2 GiB"},
		{"strict overcommit", modelMemory{n: 3e8}, memInfo{ram: 8 * g, commitLimit: 2 * g, overcommit: 2}, "take 2.2 GiB, more than this machine's 2.0 GiB"}, // 2.4e9
		{"strict overcommit, fits", modelMemory{n: 2e8}, memInfo{ram: 8 * g, commitLimit: 2 * g, overcommit: 2}, ""},                                         // 1.6e9
	} {
		err := fitsMemory(tc.mm, "mlp", tc.m)
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
