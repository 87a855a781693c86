package trainer

import (
	"fmt"
	"strings"
	"time"

	"train/mpi"
)

// bucketTuner is --bucket-mb auto, Horovod's autotune done simply: the
// first steps of the run try a few bucket sizes, steps each, and the run
// keeps the one whose steps were fastest on the slowest rank. Every rank
// times the same steps and the times are agreed with one allreduce (max),
// so every rank picks the same size. It is a hook the allreduce strategy
// registers; it leaves the hooks once it has chosen.
type bucketTuner struct {
	hookBase
	a     *allreduce
	sizes []int // candidate caps in bytes (0: one bucket)
	steps int   // steps per candidate; the first is not timed
	cur   int   // candidate being timed
	n     int   // its steps so far
	spent []time.Duration
	done  bool
}

// tuneSteps is how many steps each candidate gets (one untimed).
const tuneSteps = 6

// newBucketTuner lists the candidate sizes, 1/4 to 64 MiB, that give this
// model different bucket counts, and starts with the first.
func newBucketTuner(a *allreduce) (*bucketTuner, error) {
	t := &bucketTuner{a: a, steps: tuneSteps}
	seen := map[int]bool{}
	for _, mb := range []float64{0.25, 1, 4, 16, 64} {
		n := len(makeBuckets(a.s.Model.Params, int(mb*(1<<20))))
		if !seen[n] {
			seen[n] = true
			t.sizes = append(t.sizes, int(mb*(1<<20)))
		}
	}
	t.spent = make([]time.Duration, len(t.sizes))
	return t, a.useBuckets(t.sizes[0])
}

// Step records one step; once every candidate has had its steps the ranks
// agree on the fastest and switch to it, and the tuner is done.
func (t *bucketTuner) Step(e *StepEvent) error {
	if t.done {
		return nil
	}
	if t.n > 0 {
		t.spent[t.cur] += e.Took
	}
	t.n++
	if t.n < t.steps {
		return nil
	}
	t.cur, t.n = t.cur+1, 0
	if t.cur < len(t.sizes) {
		return t.a.useBuckets(t.sizes[t.cur])
	}
	secs := make([]float64, len(t.sizes))
	for i, d := range t.spent {
		secs[i] = d.Seconds() / float64(t.steps-1)
	}
	s := t.a.s
	if err := s.W.AllreduceFloat64(secs, mpi.Max); err != nil {
		return err
	}
	best := 0
	var b strings.Builder
	for i, sec := range secs {
		if sec < secs[best] {
			best = i
		}
		fmt.Fprintf(&b, ", %s %.2f ms", mib(t.sizes[i]), sec*1e3)
	}
	if err := t.a.useBuckets(t.sizes[best]); err != nil {
		return err
	}
	t.a.kept, t.done = t.sizes[best], true
	s.rep.say("bucket autotune: ms per step on the slowest rank%s: keeping %s (%d bucket(s))\n",
		b.String(), mib(t.sizes[best]), len(t.a.sync.buckets))
	return nil
}

func mib(b int) string { return fmt.Sprintf("%g MiB", float64(b)/(1<<20)) }
