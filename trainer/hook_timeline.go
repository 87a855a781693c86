package trainer

import (
	"fmt"
	"io"
	"time"

	"train/timeline"
)

// timelineHook writes --timeline: each rank's Chrome trace, a span per
// step with its phases nested in it, evaluations and checkpoints on the
// same track, and each gradient bucket's allreduce on a second track (the
// communication goroutine's) when overlapped. A pipeline stage's forward
// and backward of each micro-batch, its sends and its receives (the wait
// for them) go on the training track too, with an arrow from each send
// to its receive. A timeline that cannot be written is an error every
// rank agrees on.
type timelineHook struct {
	hookBase
	tl   *timeline.Writer
	errw io.Writer
	rank int
}

func newTimelineHook(s *Session) (Hook, error) {
	path := s.Cfg.Observe.Timeline
	if path == "" {
		return nil, nil
	}
	// One clock origin for every rank's file: rank 0's now.
	origin := []int64{time.Now().UnixNano()}
	if err := s.Job.BcastInt64(origin, 0); err != nil {
		return nil, err
	}
	tl, err := timeline.Create(timeline.Path(path, s.Job.Rank()), s.Job.Rank(), time.Unix(0, origin[0]), "training", "gradient allreduce")
	if err != nil {
		return nil, err
	}
	s.rep.say("timeline: %s (one file per rank; join them with train timeline merge, draw them with train timeline plot)\n", timeline.Path(path, 0))
	return &timelineHook{tl: tl, errw: s.errw, rank: s.Job.Rank()}, nil
}

// Step writes the step's span and its phases nested in it, one after the
// other.
func (h *timelineHook) Step(e *StepEvent) error {
	st := e.Times
	h.tl.Span("step", tidTraining, st.start, e.Took, map[string]any{"step": e.Step - 1})
	t := st.start
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{phaseData, st.data}, {phaseForward, st.forward}, {phaseBackward, st.backward}, {phaseWait, st.wait}, {phaseOptimizer, st.optimize}} {
		h.tl.Span(p.name, tidTraining, t, p.d, nil)
		t = t.Add(p.d)
	}
	return nil
}

func (h *timelineHook) Bucket(b bucket, start time.Time, d time.Duration, overlapped bool) {
	tid := tidTraining
	if overlapped {
		tid = tidComm
	}
	h.tl.Span("allreduce", tid, start, d, map[string]any{"bytes": 4 * (b.hi - b.lo), "offset": b.lo})
}

// Pipe draws a pipeline stage's operation: "F3" and "B3" for micro-batch
// 3's forward and backward, "send F3" (posting it) and "recv F3" (the
// wait for it) for its activations, "send B3" and "recv B3" for its
// gradients; a flow arrow joins each send to its receive.
func (h *timelineHook) Pipe(e *PipeEvent) {
	name := fmt.Sprintf("%s%d", e.Op, e.Micro)
	if e.Op == PipeSend || e.Op == PipeRecv {
		name = fmt.Sprintf("%s %s%d", e.Op, e.Dir, e.Micro)
		at := e.Start // a send's arrow leaves when it is posted, a receive's arrives when it is done
		if e.Op == PipeRecv {
			at = e.Start.Add(e.Took)
		}
		h.tl.Flow("pipeline "+string(e.Dir), e.Flow, e.Op == PipeSend, tidTraining, at)
	}
	h.tl.Span(name, tidTraining, e.Start, e.Took, map[string]any{"micro-batch": e.Micro, "stage": e.Stage, "peer stage": e.Peer})
}

func (h *timelineHook) Epoch(e *EpochEvent) {
	h.tl.Span("evaluate", tidTraining, e.EvalStart, e.EvalTook, nil)
}

func (h *timelineHook) Checkpoint(e *CheckpointEvent) {
	h.tl.Span("checkpoint", tidTraining, e.Start, e.Took, map[string]any{"step": e.Step})
}

func (h *timelineHook) Close() error {
	if err := h.tl.Close(); err != nil {
		fmt.Fprintf(h.errw, "train: rank %d: %v\n", h.rank, err)
	}
	return nil
}

// Timeline tracks: pid is the rank, tid the goroutine's role.
const (
	tidTraining = 0
	tidComm     = 1
)
