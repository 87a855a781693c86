package model

import (
	"runtime"
	"time"
)

// Go's scheduler and a goroutine that computes in cgo calls.
//
// A goroutine in a cgo call keeps its P in the syscall state, and Go's
// sysmon thread takes such a P back (retake, runtime/proc.go) when no
// other P is idle, or when the goroutine has not been through the
// scheduler for 10 ms (forcePreemptNS): a training step is one goroutine
// making cgo calls back to back, which never blocks. Each retake wakes a
// thread to run the P, and sets sysmon polling every 20 us again for the
// next millisecond or more. Under mpirun, bound to one core, GOMAXPROCS
// is 1, so every call longer than two of sysmon's ticks was retaken:
// ResNet-20 at np=2 counted 36 retakes a step and 3,400 context switches
// a second per rank, sysmon's thread taking 1.5% of the rank's core (perf
// stat and uprobes on runtime.handoffp; the figures are in docs/cpu-speed.md).
//
// So a rank keeps spare Ps (sparePs: an idle one stops the first kind of
// retake), and the training goroutine passes through the scheduler at
// least every yieldEvery (yield: the second kind). Then sysmon backs off
// to sleeping 10 ms at a time.

// sparePs is the Ps SetThreads keeps beyond the compute threads: one for
// the gradient allreduce's goroutine, in MPI calls during backward, and
// one idle.
const sparePs = 2

// yieldEvery is how often yield lets the goroutine through the
// scheduler: under forcePreemptNS, and rare enough that the thread it
// wakes each time (runtime.Gosched starts a spinning M where a P is
// idle) costs nothing measurable.
const yieldEvery = 5 * time.Millisecond

// yielder remembers when its goroutine last went through the scheduler.
type yielder struct{ last time.Time }

// yield calls runtime.Gosched if yieldEvery has passed since the last.
func (y *yielder) yield() {
	if now := time.Now(); now.Sub(y.last) >= yieldEvery {
		runtime.Gosched()
		y.last = now
	}
}
