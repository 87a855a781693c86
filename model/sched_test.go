package model

import (
	"runtime"
	"testing"
)

// TestSetThreadsSpares: SetThreads leaves sparePs beyond the pool, so
// that sysmon finds an idle P while the training goroutine is in a cgo
// call (sched.go). GOMAXPROCS starts at 1 here, as under mpirun's binding
// to one core.
func TestSetThreadsSpares(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer SetThreads(1)
	for _, n := range []int{1, 3} {
		got := SetThreads(n)
		if p := runtime.GOMAXPROCS(0); p < got+2 {
			t.Errorf("SetThreads(%d): GOMAXPROCS %d, want at least %d (the pool's %d threads and 2 spare)", n, p, got+2, got)
		}
	}
}
