// Package flightrec is a flight recorder of one rank's communication: the
// last N calls this rank made on each communicator (collectives and
// point-to-point messages), with their sequence numbers, sizes, what they
// carried, the training step and phase, and when they were enqueued,
// started and ended. A dump is one JSON file per rank; Diagnose reads the
// dumps of a job and says which rank is behind, which ranks diverged into
// different calls, and which rank was slow (train doctor).
//
// Why sequence numbers: every rank makes the same collectives on a
// communicator in the same order, so the k-th collective on "world" is
// the same call on every rank. Comparing the ranks' k-th calls finds the
// rank that never arrived (its count stops short), the rank that skipped
// one (its k-th call is another operation), and the rank that called with
// another size. Point-to-point messages are counted per peer and
// direction: rank a's k-th send to b is b's k-th receive from a.
//
// Recording costs two clock readings and two uncontended locks per call,
// and allocates nothing: an event is a fixed-size slot in a ring of
// slots, its strings are headers pointing at constants or at labels made
// once (BenchmarkRecord).
package flightrec

import (
	"sync"
	"sync/atomic"
	"time"
)

// Peer values of collective events and of receives from any rank.
const (
	All = -1 // a collective: every rank of the communicator
	Any = -2 // a receive or probe from any rank
)

// Event is one call, as it is recorded and dumped.
type Event struct {
	ID    uint64 `json:"id"`   // this rank's count of events, from 0
	Comm  string `json:"comm"` // the communicator's name, the same on every rank
	Seq   uint64 `json:"seq"`  // per communicator for collectives, per (communicator, peer, direction) for messages; from 1
	Op    string `json:"op"`   // allreduce, bcast, barrier, reduce_scatter, allgather, send, recv, probe
	Algo  string `json:"algo,omitempty"`
	Peer  int    `json:"peer"`          // All for a collective, Any, or the peer's rank in the communicator
	Tag   int    `json:"tag,omitempty"` // a message's MPI tag
	Bytes int64  `json:"bytes"`
	Dtype string `json:"dtype,omitempty"`
	Label string `json:"label,omitempty"` // what it carries: "bucket 2 of 5: fc.W..fc.B", "the stop check"
	Step  int64  `json:"step"`            // the training step the rank was at
	Phase string `json:"phase"`           // what the training loop was doing
	Enq   int64  `json:"enqueued_ns"`     // unix nanoseconds
	Start int64  `json:"started_ns"`
	End   int64  `json:"ended_ns"` // 0: still in flight when dumped
	Err   bool   `json:"error,omitempty"`
}

// Collective reports whether e is a collective call.
func (e *Event) Collective() bool { return e.Peer == All }

// Recorder is one rank's ring of the last events. Its methods are safe
// for concurrent use (the training goroutine, the communication goroutine
// and the parameter-server threads record into one ring); a nil Recorder
// records nothing.
type Recorder struct {
	mu     sync.Mutex
	ev     []Event
	n      uint64 // events recorded; the newest is ev[(n-1)%len]
	comms  []*Comm
	phases []string // names of the phase codes SetPhase takes
	tags   func(comm string, tag int) string

	step  atomic.Int64
	phase atomic.Int64
	since atomic.Int64 // unix ns of the last SetPhase
}

// New returns a recorder of the last n events (nil for n <= 0: off).
// phases names the phase codes SetPhase will be given.
func New(n int, phases []string) *Recorder {
	if n <= 0 {
		return nil
	}
	r := &Recorder{ev: make([]Event, n), phases: phases}
	r.since.Store(time.Now().UnixNano())
	return r
}

// NameTags sets what a message's tag on a communicator says it carries
// ("" for nothing),
// read when a dump is taken, so a message's event is labelled by its kind
// ("the parameter-server header") at no cost per message.
func (r *Recorder) NameTags(f func(comm string, tag int) string) {
	if r != nil {
		r.mu.Lock()
		r.tags = f
		r.mu.Unlock()
	}
}

// SetStep records the training step the rank is at.
func (r *Recorder) SetStep(step int64) {
	if r != nil {
		r.step.Store(step)
	}
}

// SetPhase records what the training loop is doing, as an index into the
// phase names New was given.
func (r *Recorder) SetPhase(p int64) {
	if r != nil {
		r.phase.Store(p)
		r.since.Store(time.Now().UnixNano())
	}
}

func (r *Recorder) phaseName(p int64) string {
	if p >= 0 && p < int64(len(r.phases)) {
		return r.phases[p]
	}
	return "computing"
}

// Comm is one communicator's counters: its collectives' sequence number
// and each peer's messages'. The communicator's owner (mpi.World) records
// through it.
type Comm struct {
	r     *Recorder
	name  string
	rank  int // this rank's in the communicator
	size  int
	seq   atomic.Uint64
	sent  []atomic.Uint64 // per peer
	recvd []atomic.Uint64
	label atomic.Pointer[pending]
}

// pending is the label and enqueue time of the next collective.
type pending struct {
	label string
	enq   int64
}

// Comm registers a communicator of size ranks, this rank being rank in
// it, under name: the same on every member and on no other communicator
// of the job. Nil on a nil Recorder.
func (r *Recorder) Comm(name string, rank, size int) *Comm {
	if r == nil {
		return nil
	}
	c := &Comm{r: r, name: name, rank: rank, size: size, sent: make([]atomic.Uint64, size), recvd: make([]atomic.Uint64, size)}
	r.mu.Lock()
	r.comms = append(r.comms, c)
	r.mu.Unlock()
	return c
}

// Name is the communicator's name ("" for nil).
func (c *Comm) Name() string {
	if c == nil {
		return ""
	}
	return c.name
}

// Seq is the number of collectives begun on the communicator.
func (c *Comm) Seq() uint64 {
	if c == nil {
		return 0
	}
	return c.seq.Load()
}

// Label names what the next collective on c carries (it is used once).
// Labels are made once (NewLabel) and reused, so setting one allocates
// nothing; set it from the goroutine that makes the call.
func (c *Comm) Label(l *Label) {
	switch {
	case c == nil:
	case l == nil:
		c.label.Store(nil) // no label after all: the call was not made
	default:
		c.label.Store(&l.p)
	}
}

// Label is a reusable label for Comm.Label.
type Label struct{ p pending }

// NewLabel returns a label reading s.
func NewLabel(s string) *Label { return &Label{p: pending{label: s}} }

// Enqueued sets the time the labelled work was handed over (zero, the
// default: when its call starts).
func (l *Label) Enqueued(t time.Time) { l.p.enq = t.UnixNano() }

// Begin records the start of a call on c: a collective (peer All), a
// send to peer, or a receive or probe from peer (Any: from any rank). It
// returns the event's id for End.
func (c *Comm) Begin(op, algo string, peer int, bytes int64, dtype string) uint64 {
	return c.BeginMsg(op, algo, peer, 0, bytes, dtype)
}

// BeginMsg is Begin for a message with its MPI tag.
func (c *Comm) BeginMsg(op, algo string, peer, tag int, bytes int64, dtype string) uint64 {
	if c == nil {
		return 0
	}
	now := time.Now().UnixNano()
	var seq uint64
	label, enq := "", now
	switch {
	case peer == All:
		seq = c.seq.Add(1)
		if p := c.label.Swap(nil); p != nil {
			label = p.label
			if p.enq != 0 {
				enq = p.enq
			}
		}
	case peer >= 0 && peer < c.size && op == "send":
		seq = c.sent[peer].Add(1)
	case peer >= 0 && peer < c.size && op == "recv":
		seq = c.recvd[peer].Add(1)
	case peer >= 0 && peer < c.size && op == "probe": // waits for the next receive's message
		seq = c.recvd[peer].Load() + 1
	}
	r := c.r
	r.mu.Lock()
	id := r.n
	r.n++
	e := &r.ev[id%uint64(len(r.ev))]
	*e = Event{ID: id, Comm: c.name, Seq: seq, Op: op, Algo: algo, Peer: peer, Tag: tag, Bytes: bytes, Dtype: dtype,
		Label: label, Step: r.step.Load(), Phase: r.phaseName(r.phase.Load()), Enq: enq, Start: now}
	r.mu.Unlock()
	return id
}

// End records the end of event id (a no-op once the ring has reused its
// slot), failed or not.
func (c *Comm) End(id uint64, err error) {
	if c == nil {
		return
	}
	now := time.Now().UnixNano()
	r := c.r
	r.mu.Lock()
	if e := &r.ev[id%uint64(len(r.ev))]; e.ID == id && e.Comm == c.name {
		e.End, e.Err = now, err != nil
	}
	r.mu.Unlock()
}

// Seqs is each communicator's collective count, for the metrics.
func (r *Recorder) Seqs() map[string]uint64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]uint64, len(r.comms))
	for _, c := range r.comms {
		m[c.name] += c.seq.Load()
	}
	return m
}
