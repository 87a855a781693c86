package optim

import (
	"runtime"
	"sync"
)

// The updates are element-wise and memory-bound: AdamW's on 30M
// parameters is a few percent of a GPT step on one thread, and it would
// stay serial while the model's passes use every thread (--threads). Step
// cuts the whole parameter vector, across the runs with and without
// weight decay, into equal parts of at least parGrain values, one per
// worker (goroutines: such an update is milliseconds long, so waking
// them costs nothing that matters); the result does not depend on the
// thread count, each value's update being its own. The cut used to be per
// run, and the GPT's runs are a tensor each, most under 2*parGrain: its
// update at 2 threads took 0.75 to 0.8 of one thread's time where one run
// of the same size took 0.5 (BenchmarkAdamWGPT).
//
// Smaller updates stay on the caller: ResNet-20's SGD (272,186 values,
// 0.36 ms a step) would be cut while the model's pool threads still spin
// after the backward's last pass.
const parGrain = 1 << 20

// ranger is an update that runs on any range [lo, hi) of the parameter
// vector alone and returns its sum of g-g (0 unless some g is not
// finite).
type ranger interface{ applyRange(lo, hi int) float32 }

// job is one worker's share of an update, sent by value (no allocation:
// r holds a pointer).
type job struct {
	r      ranger
	lo, hi int
	bad    *float32
	done   *sync.WaitGroup
}

var (
	poolMu  sync.Mutex
	workers []chan job
)

// SetThreads sizes the workers an update is cut across (n-1 besides the
// caller).
func SetThreads(n int) {
	poolMu.Lock()
	defer poolMu.Unlock()
	for len(workers) < n-1 {
		ch := make(chan job)
		workers = append(workers, ch)
		go func() {
			for j := range ch {
				*j.bad = j.r.applyRange(j.lo, j.hi)
				j.done.Done()
			}
		}()
	}
	workers = workers[:max(n-1, 0)]
	if runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}

// applyPar runs r over [0, n) cut into len(workers)+1 equal parts (fewer
// where that leaves a part under parGrain), the caller taking the first,
// and returns the sum of the parts' g-g. bads holds one sum a part.
func applyPar(r ranger, n int, wg *sync.WaitGroup, bads []float32) float32 {
	T := min(len(workers)+1, max(n/parGrain, 1), len(bads))
	if T <= 1 {
		return r.applyRange(0, n)
	}
	wg.Add(T - 1)
	for w := 1; w < T; w++ {
		workers[w-1] <- job{r, n * w / T, n * (w + 1) / T, &bads[w], wg}
	}
	bad := r.applyRange(0, n/T)
	wg.Wait()
	for _, b := range bads[1:T] {
		bad += b
	}
	return bad
}

// runsIn calls f for each part of [lo, hi) that lies in one run of segs
// (nil: one decaying run), with that run's decay.
func runsIn(segs []segment, lo, hi int, f func(a, b int, decay bool)) {
	if segs == nil {
		f(lo, hi, true)
		return
	}
	start := 0
	for _, sg := range segs {
		if a, b := max(start, lo), min(sg.End, hi); a < b {
			f(a, b, sg.Decay)
		}
		if start = sg.End; start >= hi {
			return
		}
	}
}
