package optim

import (
	"runtime"
	"sync"
)

// Adam's update is element-wise and memory-bound: with 30M parameters it
// is a few percent of a GPT step on one thread, and it would stay serial
// while the model's passes use every thread (--threads). Step cuts runs of
// at least parGrain parameters across workers (goroutines: a call is
// milliseconds long, so the cost of waking them does not matter); the
// result does not depend on the thread count.
const parGrain = 1 << 20

// job is one worker's share of an update, sent by value (no allocation).
type job struct {
	k                   adamStep
	params, grads, m, v []float32
	shrink, l2          float32
	bad                 *float32
	done                *sync.WaitGroup
}

var (
	poolMu  sync.Mutex
	workers []chan job
)

// SetThreads sizes the workers Adam's update is cut across (n-1 besides
// the caller).
func SetThreads(n int) {
	poolMu.Lock()
	defer poolMu.Unlock()
	for len(workers) < n-1 {
		ch := make(chan job)
		workers = append(workers, ch)
		go func() {
			for j := range ch {
				*j.bad = j.k.apply(j.params, j.grads, j.m, j.v, j.shrink, j.l2)
				j.done.Done()
			}
		}()
	}
	workers = workers[:max(n-1, 0)]
	if runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}

// applyPar is apply cut into len(workers)+1 parts when n is large.
func (k adamStep) applyPar(params, grads, m, v []float32, shrink, l2 float32, wg *sync.WaitGroup, bads []float32) float32 {
	n := len(params)
	T := min(len(workers)+1, max(n/parGrain, 1), len(bads))
	if T <= 1 {
		return k.apply(params, grads, m, v, shrink, l2)
	}
	wg.Add(T - 1)
	for w := 1; w < T; w++ {
		lo, hi := n*w/T, n*(w+1)/T
		workers[w-1] <- job{k, params[lo:hi], grads[lo:hi], m[lo:hi], v[lo:hi], shrink, l2, &bads[w], wg}
	}
	bad := k.apply(params[:n/T], grads[:n/T], m[:n/T], v[:n/T], shrink, l2)
	wg.Wait()
	for _, b := range bads[1:T] {
		bad += b
	}
	return bad
}
