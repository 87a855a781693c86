// Package timeline reads and writes the Chrome trace files of --timeline
// (the Trace Event Format that Perfetto and chrome://tracing read): one
// file per rank, streamed as the run goes, joined by Merge and drawn by
// Plot. The trainer's hook decides what goes in; this package knows only
// the format.
package timeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Event is one trace event: a complete span (ph "X"), an instant ("i"),
// the two ends of a flow arrow ("s", "f") or metadata ("M"). Times are
// microseconds from the run's origin.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   int            `json:"id,omitempty"`
	S    string         `json:"s,omitempty"` // an instant's scope ("t": its track)
	Args map[string]any `json:"args,omitempty"`
}

// Writer streams one rank's events to its own file as a JSON array,
// written as they happen so a long run holds none in memory (a run that
// dies leaves the array unterminated, which the viewers and Read
// accept). Timestamps count from origin, rank 0's start broadcast to
// every rank, so the ranks' tracks line up when merged. Its methods are
// safe for concurrent use, and a nil Writer records nothing.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	pid    int
	origin time.Time
	n      int
	err    error
}

// Path is the file rank writes for --timeline path: path with ".rankR"
// before its extension (trace.json -> trace.rank0.json).
func Path(path string, rank int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.rank%d%s", strings.TrimSuffix(path, ext), rank, ext)
}

// Create starts rank's file at path; tracks names the rank's tracks (the
// tid is the index).
func Create(path string, rank int, origin time.Time, tracks ...string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--timeline: %v", err)
	}
	t := &Writer{f: f, w: bufio.NewWriterSize(f, 1<<16), pid: rank, origin: origin}
	t.w.WriteString("[\n")
	t.emit(Event{Name: "process_name", Ph: "M", Pid: rank, Args: map[string]any{"name": fmt.Sprintf("rank %d", rank)}})
	t.emit(Event{Name: "process_sort_index", Ph: "M", Pid: rank, Args: map[string]any{"sort_index": rank}})
	for tid, name := range tracks {
		t.emit(Event{Name: "thread_name", Ph: "M", Pid: rank, Tid: tid, Args: map[string]any{"name": name}})
	}
	return t, nil
}

func (t *Writer) emit(e Event) {
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

func (t *Writer) us(at time.Time) float64 { return float64(at.Sub(t.origin).Nanoseconds()) / 1e3 }

// Span records a completed span on track tid.
func (t *Writer) Span(name string, tid int, start time.Time, dur time.Duration, args map[string]any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(Event{Name: name, Cat: "train", Ph: "X", Pid: t.pid, Tid: tid, Ts: t.us(start),
		Dur: max(float64(dur.Nanoseconds())/1e3, 0.001), Args: args})
}

// Instant records a moment on track tid.
func (t *Writer) Instant(name string, tid int, at time.Time, args map[string]any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(Event{Name: name, Cat: "train", Ph: "i", S: "t", Pid: t.pid, Tid: tid, Ts: t.us(at), Args: args})
}

// Flow records one end of an arrow between tracks, possibly of two ranks:
// start (ph "s", bound to the span it falls in) on the sender, finish
// ("f", bound to the next span to start: the work that uses what came) on
// the receiver, matched by name and id.
func (t *Writer) Flow(name string, id int, start bool, tid int, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := Event{Name: name, Cat: "flow", Ph: "s", Pid: t.pid, Tid: tid, Ts: t.us(at), ID: id}
	if !start {
		e.Ph = "f"
	}
	t.emit(e)
}

// Close terminates the array and the file.
func (t *Writer) Close() error {
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

// Merge joins ranks' timeline files into one trace ({"traceEvents":
// [...]}), events ordered by time, metadata first. It accepts the array
// or object form and an array a crash left unterminated.
func Merge(out string, inputs []string) error {
	var all []Event
	for _, p := range inputs {
		evs, err := Read(p)
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
		TraceEvents     []Event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}{all, "ms"})
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// Read reads a trace: one rank's file or a merged one.
func Read(path string) ([]Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var evs []Event
	if len(b) > 0 && b[0] == '{' {
		var obj struct {
			TraceEvents []Event `json:"traceEvents"`
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
