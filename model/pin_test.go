package model

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPin: with one thread per CPU of this process's affinity, Pin pins
// thread w to the w-th of those CPUs (the calling thread to the first)
// and says so; with fewer threads, or with the CPUs shared among ranks
// (SetCPUs below their count), it unpins them and says not.
func TestPin(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	n := len(cpus)
	if n < 2 || n > MaxThreads {
		t.Skipf("this process may run on %d CPUs: nothing to pin one thread to each of (needs 2 to %d)", n, MaxThreads)
	}
	prev := Threads()
	defer func() {
		SetThreads(1)
		SetCPUs(0)
		Pin()
		SetThreads(prev)
	}()
	if got := SetThreads(n); got != n {
		t.Fatalf("SetThreads(%d) gave %d", n, got)
	}
	SetCPUs(0)
	if !Pin() {
		t.Fatalf("%d threads on %d CPUs: not pinned", n, n)
	}
	for w, c := range cpus {
		if got := pinnedCPU(w); got != c {
			t.Errorf("thread %d pinned to CPU %d, want %d", w, got, c)
		}
	}
	unpinned := func(what string) {
		t.Helper()
		if Pin() {
			t.Errorf("%s: pinned", what)
		}
		for w := range n {
			if got := pinnedCPU(w); got >= 0 {
				t.Errorf("%s: thread %d still pinned to CPU %d", what, w, got)
			}
		}
	}
	SetThreads(n - 1)
	unpinned(fmt.Sprintf("%d threads on %d CPUs", n-1, n))
	SetThreads(n)
	if !Pin() {
		t.Fatalf("%d threads on %d CPUs again: not pinned", n, n)
	}
	SetCPUs(n - 1)
	unpinned(fmt.Sprintf("the CPUs shared (SetCPUs(%d))", n-1))
}
