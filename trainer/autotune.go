package trainer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"train/mpi"
)

// bucketTuner is --bucket-mb auto, Horovod's autotune done simply: the
// first steps of the run try a few bucket sizes, steps each, and the run
// keeps the one whose steps were fastest on the slowest rank. Every rank
// times the same steps and the times are agreed with one allreduce (max),
// so every rank picks the same size.
type bucketTuner struct {
	sizes []int // candidate caps in bytes (0: one bucket)
	steps int   // steps per candidate; the first is not timed
	cur   int   // candidate being timed
	n     int   // its steps so far
	spent []time.Duration
}

// tuneSteps is how many steps each candidate gets (one untimed).
const tuneSteps = 6

// newBucketTuner lists the candidate sizes, 1/4 to 64 MiB, that give this
// model different bucket counts.
func (r *run) newBucketTuner() *bucketTuner {
	t := &bucketTuner{steps: tuneSteps}
	seen := map[int]bool{}
	for _, mb := range []float64{0.25, 1, 4, 16, 64} {
		n := len(makeBuckets(r.model.Params, int(mb*(1<<20))))
		if !seen[n] {
			seen[n] = true
			t.sizes = append(t.sizes, int(mb*(1<<20)))
		}
	}
	t.spent = make([]time.Duration, len(t.sizes))
	r.useBuckets(t.sizes[0])
	return t
}

// useBuckets rebuilds the gradient buckets with a cap of size bytes.
func (r *run) useBuckets(size int) {
	p := r.model.Params
	if r.sync != nil {
		r.sync.close()
	}
	r.sync = newGradSync(r.gradReduce, p.Grad, makeBuckets(p, size), r.cfg.Overlap)
	r.model.OnGradReady = r.sync.ready
	if r.gpu != nil {
		r.gpu.attach(r.sync)
	}
	r.observeBuckets()
	if r.met != nil {
		r.met.bucketBytes.Set(float64(size))
	}
}

// stepped records one step of took; once every candidate has had its
// steps the ranks agree on the fastest, switch to it, and the tuner is
// done (it returns true).
func (r *run) stepped(took time.Duration) (bool, error) {
	t := r.tune
	if t.n > 0 {
		t.spent[t.cur] += took
	}
	t.n++
	if t.n < t.steps {
		return false, nil
	}
	t.cur, t.n = t.cur+1, 0
	if t.cur < len(t.sizes) {
		r.useBuckets(t.sizes[t.cur])
		return false, nil
	}
	secs := make([]float64, len(t.sizes))
	for i, d := range t.spent {
		secs[i] = d.Seconds() / float64(t.steps-1)
	}
	if err := r.w.AllreduceFloat64(secs, mpi.Max); err != nil {
		return false, err
	}
	best := 0
	var b strings.Builder
	for i, s := range secs {
		if s < secs[best] {
			best = i
		}
		fmt.Fprintf(&b, ", %s %.2f ms", mib(t.sizes[i]), s*1e3)
	}
	r.useBuckets(t.sizes[best])
	r.bucketKept = t.sizes[best]
	r.rep.say("bucket autotune: ms per step on the slowest rank%s: keeping %s (%d bucket(s))\n",
		b.String(), mib(t.sizes[best]), len(r.sync.buckets))
	r.tune = nil
	return true, nil
}

func mib(b int) string { return fmt.Sprintf("%g MiB", float64(b)/(1<<20)) }

// startBucketTuner begins --bucket-mb auto after the initial broadcast.
// A run resumed from a checkpoint written after the tuning keeps the size
// chosen then (saved as bucket_bytes), so the resumed steps are the
// uninterrupted run's, bit for bit.
func (r *run) startBucketTuner() error {
	kept := []int64{0}
	if r.w.Rank() == 0 && r.state.Meta != nil {
		kept[0], _ = strconv.ParseInt(r.state.Meta["bucket_bytes"], 10, 64)
	}
	if err := r.w.BcastInt64(kept, 0); err != nil {
		return err
	}
	if kept[0] > 0 {
		r.bucketKept = int(kept[0])
		r.useBuckets(r.bucketKept)
		r.rep.say("bucket autotune: %s, as chosen before the checkpoint\n", mib(r.bucketKept))
		return nil
	}
	r.tune = r.newBucketTuner()
	if len(r.tune.sizes) == 1 {
		r.rep.say("bucket autotune: every size from 1/4 MiB up gives this model one bucket; nothing to try\n")
		r.bucketKept, r.tune = r.tune.sizes[0], nil
	}
	return nil
}
