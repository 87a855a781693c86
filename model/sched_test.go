package model

import (
	"runtime"
	"testing"
	"time"
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

// TestPoolWakeups runs 3,000 passes on a pool of 3 threads with pauses of
// 0 to 300 us between them, so that each pass finds the workers spinning,
// on their way to sleep or asleep: every unit must run exactly once, and
// a wake-up lost (a worker asleep through its pass, or the caller asleep
// after the last unit) hangs the pass, which fails the test after a
// minute instead of the suite's timeout.
func TestPoolWakeups(t *testing.T) {
	defer SetThreads(1)
	if got := SetThreads(3); got != 3 {
		t.Fatalf("SetThreads(3) gave %d threads", got)
	}
	hang := time.AfterFunc(time.Minute, func() { panic("TestPoolWakeups: a pass hung for a minute: a wake-up was lost") })
	defer hang.Stop()
	if bad := poolCheck(3000, 7, 1); bad != 0 {
		t.Errorf("%d units did not run exactly once", bad)
	}
}

// TestPoolCallerSleeps runs passes whose workers' units outlast the
// caller's by 40 to 840 us, at 2 and 3 threads, so that the caller, its
// own share done, finds the workers finished while it spins, as it goes
// to sleep, or only once asleep (past par.c's SPIN_S of 250 us): a
// worker's finish that does not wake a sleeping caller hangs the pass,
// which fails the test after a minute instead of the suite's timeout.
func TestPoolCallerSleeps(t *testing.T) {
	defer SetThreads(1)
	hang := time.AfterFunc(time.Minute, func() { panic("TestPoolCallerSleeps: a pass hung for a minute: a wake-up was lost") })
	defer hang.Stop()
	seed := uint32(1)
	for _, T := range []int{2, 3} {
		if got := SetThreads(T); got != T {
			t.Fatalf("SetThreads(%d) gave %d threads", T, got)
		}
		for range 300 {
			seed = seed*1103515245 + 12345
			// Unit u spins (1 + u%3) * us: the caller's unit 0 the
			// shortest, the last worker's up to 2*us longer.
			spinPass(T, float64(20+(seed>>8)%400))
		}
	}
}
