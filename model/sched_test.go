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

// TestBuffersAligned: after a Winograd convolution's forward and
// backward on two threads, every buffer of the pool starts on a cache
// line. glibc's malloc put them 16 bytes past one, where each vector
// store straddled two lines and the two threads' units shared lines
// (ResNet-20 ran 3 to 4% slower).
func TestBuffersAligned(t *testing.T) {
	defer SetThreads(1)
	SetThreads(2)
	defer UseWinograd(winograd)
	UseWinograd(true)
	p := &Params{}
	c := NewConv2D(p, "c", 16, 28, 28, 32, 3, 1, 1, false)
	p.Alloc()
	const n = 8
	x, y := make([]float32, n*c.InSize()), make([]float32, n*c.OutSize())
	c.Forward(y, x, n)
	c.Backward(make([]float32, n*c.InSize()), y, x, nil, n)
	if bad := buffersMisaligned(); bad != 0 {
		t.Errorf("%d of the pool's buffers do not start on a 64-byte line", bad)
	}
}
