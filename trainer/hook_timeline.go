package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// timelineHook writes --timeline: each rank's Chrome trace, a span per
// step with its phases nested in it, evaluations and checkpoints on the
// same track, and each gradient bucket's allreduce on a second track (the
// communication goroutine's) when overlapped. A timeline that cannot be
// written is an error every rank agrees on.
type timelineHook struct {
	hookBase
	tl   *timeline
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
	tl, err := openTimeline(TimelinePath(path, s.Job.Rank()), s.Job.Rank(), time.Unix(0, origin[0]))
	if err != nil {
		return nil, err
	}
	s.rep.say("timeline: %s (one file per rank; join them with train timeline merge)\n", TimelinePath(path, 0))
	return &timelineHook{tl: tl, errw: s.errw, rank: s.Job.Rank()}, nil
}

// Step writes the step's span and its phases nested in it, one after the
// other.
func (h *timelineHook) Step(e *StepEvent) error {
	st := e.Times
	h.tl.span("step", tidTraining, st.start, e.Took, map[string]any{"step": e.Step - 1})
	t := st.start
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{phaseData, st.data}, {phaseForward, st.forward}, {phaseBackward, st.backward}, {phaseWait, st.wait}, {phaseOptimizer, st.optimize}} {
		h.tl.span(p.name, tidTraining, t, p.d, nil)
		t = t.Add(p.d)
	}
	return nil
}

func (h *timelineHook) Bucket(b bucket, start time.Time, d time.Duration, overlapped bool) {
	tid := tidTraining
	if overlapped {
		tid = tidComm
	}
	h.tl.span("allreduce", tid, start, d, map[string]any{"bytes": 4 * (b.hi - b.lo), "offset": b.lo})
}

func (h *timelineHook) Epoch(e *EpochEvent) {
	h.tl.span("evaluate", tidTraining, e.EvalStart, e.EvalTook, nil)
}

func (h *timelineHook) Checkpoint(e *CheckpointEvent) {
	h.tl.span("checkpoint", tidTraining, e.Start, e.Took, map[string]any{"step": e.Step})
}

func (h *timelineHook) Close() error {
	if err := h.tl.close(); err != nil {
		fmt.Fprintf(h.errw, "train: rank %d: %v\n", h.rank, err)
	}
	return nil
}

// Timeline tracks: pid is the rank, tid the goroutine's role.
const (
	tidTraining = 0
	tidComm     = 1
)

// traceEvent is one Chrome trace event (the Trace Event Format that
// Perfetto and chrome://tracing read): a complete span (ph "X") or
// metadata (ph "M"). Times are microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// timeline streams one rank's events to its own file as a JSON array,
// written as they happen so a long run holds none in memory (a run that
// dies leaves the array unterminated, which the viewers and
// MergeTimelines accept). Timestamps count from origin, rank 0's start,
// broadcast to every rank, so the ranks' tracks line up when merged.
type timeline struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	pid    int
	origin time.Time
	n      int
	err    error
}

// TimelinePath is the file rank writes for --timeline path: path with
// ".rankR" before its extension (trace.json -> trace.rank0.json).
func TimelinePath(path string, rank int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(path, ext), rank, ext)
}

func openTimeline(path string, rank int, origin time.Time) (*timeline, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--timeline: %v", err)
	}
	t := &timeline{f: f, w: bufio.NewWriterSize(f, 1<<16), pid: rank, origin: origin}
	t.w.WriteString("[\n")
	t.emit(traceEvent{Name: "process_name", Ph: "M", Pid: rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", rank)}})
	t.emit(traceEvent{Name: "process_sort_index", Ph: "M", Pid: rank, Args: map[string]any{"sort_index": rank}})
	t.emit(traceEvent{Name: "thread_name", Ph: "M", Pid: rank, Tid: tidTraining, Args: map[string]any{"name": "training"}})
	t.emit(traceEvent{Name: "thread_name", Ph: "M", Pid: rank, Tid: tidComm, Args: map[string]any{"name": "gradient allreduce"}})
	return t, nil
}

func (t *timeline) emit(e traceEvent) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	if t.n > 0 {
		t.w.WriteString(",\n")
	}
	t.n++
	if _, err := t.w.Write(b); err != nil && t.err == nil {
		t.err = err
	}
}

// span records a completed span on track tid. Safe for concurrent use; a
// nil timeline records nothing.
func (t *timeline) span(name string, tid int, start time.Time, dur time.Duration, args map[string]any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(traceEvent{Name: name, Cat: "train", Ph: "X", Pid: t.pid, Tid: tid,
		Ts:  float64(start.Sub(t.origin).Nanoseconds()) / 1e3,
		Dur: max(float64(dur.Nanoseconds())/1e3, 0.001), Args: args})
}

// close terminates the array and the file.
func (t *timeline) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.WriteString("\n]\n")
	err := t.w.Flush()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if t.err != nil {
		return fmt.Errorf("--timeline %s: %v", t.f.Name(), t.err)
	}
	return err
}

// MergeTimelines joins ranks' timeline files into one trace
// ({"traceEvents": [...]}), events ordered by time, metadata first. It
// accepts the array or object form and an array a crash left
// unterminated.
func MergeTimelines(out string, inputs []string) error {
	var all []traceEvent
	for _, p := range inputs {
		evs, err := readTrace(p)
		if err != nil {
			return err
		}
		all = append(all, evs...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		mi, mj := all[i].Ph == "M", all[j].Ph == "M"
		if mi != mj {
			return mi
		}
		return all[i].Ts < all[j].Ts
	})
	b, err := json.Marshal(struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{all, "ms"})
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

func readTrace(path string) ([]traceEvent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var evs []traceEvent
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			TraceEvents []traceEvent `json:"traceEvents"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("%s: not a trace: %v", path, err)
		}
		return obj.TraceEvents, nil
	}
	if err := json.Unmarshal(b, &evs); err != nil {
		// An array a crash left open: drop a trailing comma, close it.
		fixed := append(bytes.TrimSuffix(b, []byte(",")), ']')
		if err2 := json.Unmarshal(fixed, &evs); err2 != nil {
			return nil, fmt.Errorf("%s: not a trace: %v", path, err)
		}
	}
	return evs, nil
}
