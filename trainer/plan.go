package trainer

import (
	"fmt"

	"train/data"
)

// epochPlan decides which samples this rank trains on at each step of an
// epoch: data.Sampler's permutation of every sample (sources read at
// random), or a data.Stream's plan (tar shards, read in order).
type epochPlan interface {
	StepsPerEpoch() int
	// Epoch is this rank's samples for epoch e, Batch a step; its
	// length says the epoch's steps (a resumed epoch may have other
	// than StepsPerEpoch). Steps before the resumed one are not read.
	Epoch(e int) []int
}

// positioned is an epochPlan whose place in an epoch a checkpoint must
// keep beyond the step: a stream's consumed samples.
type positioned interface {
	// position is the epoch's position at step, for the checkpoint.
	position(epoch, step int) string
	// resume places the run from a checkpoint's position; done: the
	// epoch has no steps left.
	resume(text string, epoch, step int) (done bool, err error)
	// pending is the position resume placed the run at, for the other
	// ranks (rank 0 reads the checkpoint), "" when none.
	pending(step int) string
}

// streamPlan plans tar shards' epochs (data.Stream) and tells the
// TarSet the order it reads its samples in.
type streamPlan struct {
	st   data.Stream
	rank int
	set  *data.TarSet
	seg  *data.Segment // the epoch's segment under way
	next *data.Segment // a resumed one, for its epoch's Epoch call
}

func (o *streamPlan) StepsPerEpoch() int { return o.st.StepsPerEpoch() }

func (o *streamPlan) Epoch(e int) []int {
	seg := o.next
	o.next = nil
	if seg == nil || seg.Epoch != e {
		seg = o.st.Segment(e, 0, nil)
	}
	o.seg = seg
	read, mine := seg.Rank(o.rank)
	o.set.Expect(read)
	b := o.st.Batch
	out := make([]int, (seg.Start+seg.Steps)*b)
	for i := range seg.Start * b {
		out[i] = -1
	}
	copy(out[seg.Start*b:], mine)
	return out
}

func (o *streamPlan) position(epoch, step int) string {
	if o.seg == nil || o.seg.Epoch != epoch {
		return ""
	}
	return o.seg.Position(step)
}

func (o *streamPlan) resume(text string, epoch, step int) (bool, error) {
	var seg *data.Segment
	if text == "" {
		// A checkpoint of a run on other data: what the epoch consumed
		// is not known, so its rest reads the shards afresh.
		seg = o.st.Segment(epoch, step, nil)
	} else {
		var err error
		if seg, err = o.st.Resume(text, step); err != nil {
			return false, err
		}
		if seg.Epoch != epoch {
			return false, fmt.Errorf("the checkpoint's data position is in epoch %d, its step in epoch %d", seg.Epoch+1, epoch+1)
		}
	}
	seg.Steps = max(0, min(seg.Steps, o.st.StepsPerEpoch()-seg.Start))
	o.next = seg
	return seg.Start+seg.Steps <= step, nil
}

func (o *streamPlan) pending(step int) string {
	if o.next == nil {
		return ""
	}
	return o.next.Position(step)
}
