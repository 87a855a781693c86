package mpi

import "testing"

// TestOversubscribedOf: the shared-memory barriers yield their CPU only
// where the host's ranks share fewer CPUs than there are ranks.
func TestOversubscribedOf(t *testing.T) {
	for _, c := range []struct {
		avail, online, size int
		want                bool
	}{
		{2, 2, 4, true},    // mpirun -np 4 --oversubscribe on 2 CPUs: unbound, 4 ranks
		{2, 2, 3, true},    // 3 ranks
		{2, 2, 2, false},   // one rank a CPU
		{1, 2, 2, false},   // bound to a core each (mpirun's default for np <= 2)
		{1, 2, 4, false},   // bound: the launcher placed it
		{16, 16, 4, false}, // 4 ranks on 16 CPUs
		{4, 0, 8, false},   // online CPUs unknown
	} {
		if got := oversubscribedOf(c.avail, c.online, c.size); got != c.want {
			t.Errorf("oversubscribedOf(avail %d, online %d, size %d) = %v, want %v", c.avail, c.online, c.size, got, c.want)
		}
	}
}
