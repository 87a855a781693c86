package trainer

import (
	"fmt"
	"runtime"
	"time"

	"train/flightrec"
	"train/model"
)

// bucket is a contiguous range [lo, hi) of the flat gradient buffer,
// reduced by one allreduce, in place.
type bucket struct{ lo, hi int }

// makeBuckets groups whole tensors into buckets of at least capBytes
// (Horovod's fusion threshold, DDP's bucket_cap_mb), in the order backward
// finishes them: from the end of the buffer to its start. A tensor larger
// than the cap is a bucket of its own; capBytes <= 0 makes one bucket.
func makeBuckets(p *model.Params, capBytes int) []bucket {
	var bs []bucket
	hi := p.Len()
	for i := len(p.Tensors) - 1; i >= 0; i-- {
		t := p.Tensors[i]
		if capBytes > 0 && 4*(hi-t.Offset) >= capBytes {
			bs = append(bs, bucket{t.Offset, hi})
			hi = t.Offset
		}
	}
	if hi > 0 || len(bs) == 0 {
		bs = append(bs, bucket{0, hi})
	}
	return bs
}

// gradSync averages the gradient buffer across ranks bucket by bucket.
//
// With overlap, a communication goroutine (the only one reducing during a
// step) reduces each bucket as soon as backward reports it final (the
// executor's ready hook), while backward computes the layers below; finish
// waits for the rest. Without overlap, finish reduces every bucket after
// backward, in the training goroutine. Either way each bucket is a slice
// of the one gradient buffer (host or device): nothing is copied.
type gradSync struct {
	red     bucketReducer
	buckets []bucket
	overlap bool

	// observe, when set, hears of every bucket reduced: when, for how long,
	// and whether on the communication goroutine (metrics, timeline).
	observe func(b bucket, start time.Time, d time.Duration, overlapped bool)
	closed  bool

	// The flight recorder's label for each bucket's collective, and when
	// it was handed over (by index in buckets); fl nil: no labels.
	fl     *flightrec.Comm
	labels []*flightrec.Label
	enq    []time.Time
	// tamper, when set, may change a bucket before it is reduced, or skip
	// it (false): the skip and size faults (fault.go).
	tamper func(b bucket) (bucket, bool)

	next    int // first bucket not yet handed to the communication goroutine
	work    chan bucket
	done    chan error
	waiting time.Duration // time finish spent blocked, since the last take

	// limit bounds the buckets handed over and not yet reduced (0: no
	// bound), for reducers that free a bucket's memory once it is reduced
	// (boundedReducer): backward then waits rather than running ahead and
	// holding every unreduced gradient at once.
	limit   int
	pending int   // buckets handed over whose result is not yet collected
	err     error // the first failure collected
}

// boundedReducer is a bucketReducer that frees what it has reduced, so
// backward should not run more than inflight buckets ahead of it.
type boundedReducer interface {
	inflight() int
}

// newGradSync reduces buckets with red, during backward with overlap.
func newGradSync(red bucketReducer, buckets []bucket, overlap bool) (*gradSync, error) {
	if err := red.use(buckets); err != nil {
		return nil, err
	}
	g := &gradSync{red: red, buckets: buckets, overlap: overlap, enq: make([]time.Time, len(buckets))}
	if b, ok := red.(boundedReducer); ok {
		g.limit = b.inflight()
	}
	if overlap {
		g.work = make(chan bucket, len(buckets))
		g.done = make(chan error, len(buckets))
		go g.communicate()
	}
	return g, nil
}

// communicate is the communication goroutine. It keeps one OS thread, so
// MPI sees one thread per role; a panic becomes an error for finish, not
// a crash with a trace.
func (g *gradSync) communicate() {
	runtime.LockOSThread()
	for b := range g.work {
		g.done <- g.reduceBucket(b)
	}
}

func (g *gradSync) reduceBucket(b bucket) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error in gradient allreduce: %v", p)
		}
	}()
	if g.fl != nil {
		for i, c := range g.buckets {
			if c == b {
				g.labels[i].Enqueued(g.enq[i])
				g.fl.Label(g.labels[i])
			}
		}
	}
	if g.tamper != nil {
		var ok bool
		if b, ok = g.tamper(b); !ok {
			g.fl.Label(nil)
			return nil
		}
	}
	start := time.Now()
	err = g.red.reduce(b)
	if g.observe != nil {
		g.observe(b, start, time.Since(start), g.overlap)
	}
	return err
}

// label names each bucket's collective in the flight recorder of the
// reducer's World, by the tensors it holds (p's).
func (g *gradSync) label(p *model.Params) {
	r, ok := g.red.(flightComm)
	if !ok || r.flightComm() == nil {
		return
	}
	g.fl = r.flightComm()
	g.labels = make([]*flightrec.Label, len(g.buckets))
	for i, b := range g.buckets {
		first, last := "", ""
		for _, t := range p.Tensors {
			if t.Offset >= b.lo && t.Offset < b.hi {
				if first == "" {
					first = t.Name
				}
				last = t.Name
			}
		}
		what := first
		if last != first {
			what = first + ".." + last
		}
		g.labels[i] = flightrec.NewLabel(fmt.Sprintf("bucket %d of %d: %s", i+1, len(g.buckets), what))
	}
}

// begin starts a step's synchronisation, before backward.
func (g *gradSync) begin() { g.next, g.pending, g.err = 0, 0, nil }

// ready is the backward hook: gradients from lo on are final, so every
// bucket lying there can go (once fewer than limit are in flight).
func (g *gradSync) ready(lo int) {
	if !g.overlap {
		return
	}
	for g.err == nil && g.next < len(g.buckets) && g.buckets[g.next].lo >= lo {
		if g.limit > 0 && g.pending >= g.limit {
			g.collect()
			continue
		}
		g.red.mark(g.buckets[g.next])
		g.enq[g.next] = time.Now()
		g.work <- g.buckets[g.next]
		g.next++
		g.pending++
	}
}

// collect waits for the oldest bucket in flight, keeping the first error.
func (g *gradSync) collect() {
	err := <-g.done
	g.pending--
	if g.err == nil {
		g.err = err
	}
}

// finish reduces what is left and waits until every bucket is done.
func (g *gradSync) finish() error {
	start := time.Now()
	defer func() { g.waiting += time.Since(start) }()
	if !g.overlap {
		for i, b := range g.buckets {
			g.enq[i] = time.Now()
			if err := g.reduceBucket(b); err != nil {
				return err
			}
		}
		return nil
	}
	g.ready(0)
	// On a failure return at once: later buckets may never complete, and
	// the caller aborts the job.
	for g.err == nil && g.pending > 0 {
		g.collect()
	}
	return g.err
}

// takeWaiting returns the time finish spent blocked since the last call.
func (g *gradSync) takeWaiting() time.Duration {
	w := g.waiting
	g.waiting = 0
	return w
}

// close stops the communication goroutine (once; later calls do nothing).
func (g *gradSync) close() {
	if g.overlap && !g.closed {
		close(g.work)
	}
	g.closed = true
}
