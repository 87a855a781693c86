package flightrec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Dump is one rank's recorder as written to its file.
type Dump struct {
	Rank       int        `json:"rank"`
	Size       int        `json:"size"`
	Host       string     `json:"host"`
	PID        int        `json:"pid"`
	Reason     string     `json:"reason"`  // stall, SIGUSR2, abort, nan
	Time       int64      `json:"time_ns"` // unix nanoseconds of the dump
	Step       int64      `json:"step"`    // where the training loop was
	Phase      string     `json:"phase"`
	PhaseSince int64      `json:"phase_since_ns"`
	Recorded   uint64     `json:"recorded"` // events ever recorded; the oldest beyond the ring's size are gone
	Comms      []CommInfo `json:"comms"`
	Events     []Event    `json:"events"` // oldest first
}

// CommInfo is a communicator in a dump: this rank's rank in it, its
// collectives begun, and the messages sent to and received from each
// peer (by rank in the communicator).
type CommInfo struct {
	Name  string   `json:"name"`
	Rank  int      `json:"rank"`
	Size  int      `json:"size"`
	Seq   uint64   `json:"seq"`
	Sent  []uint64 `json:"sent"`
	Recvd []uint64 `json:"received"`
}

// Snapshot copies the recorder for a dump by rank of size ranks.
func (r *Recorder) Snapshot(rank, size int, reason string) Dump {
	host, _ := os.Hostname()
	d := Dump{Rank: rank, Size: size, Host: host, PID: os.Getpid(), Reason: reason, Time: time.Now().UnixNano()}
	if r == nil {
		return d
	}
	d.Step, d.Phase, d.PhaseSince = r.step.Load(), r.phaseName(r.phase.Load()), r.since.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	d.Recorded = r.n
	for _, c := range r.comms {
		ci := CommInfo{Name: c.name, Rank: c.rank, Size: c.size, Seq: c.seq.Load(), Sent: make([]uint64, c.size), Recvd: make([]uint64, c.size)}
		for p := range c.size {
			ci.Sent[p], ci.Recvd[p] = c.sent[p].Load(), c.recvd[p].Load()
		}
		d.Comms = append(d.Comms, ci)
	}
	first := uint64(0)
	if r.n > uint64(len(r.ev)) {
		first = r.n - uint64(len(r.ev))
	}
	d.Events = make([]Event, 0, r.n-first)
	for id := first; id < r.n; id++ {
		e := r.ev[id%uint64(len(r.ev))]
		if e.Label == "" && !e.Collective() && r.tags != nil {
			e.Label = r.tags(e.Comm, e.Tag)
		}
		d.Events = append(d.Events, e)
	}
	return d
}

// FileName is rank's dump file in a directory.
func FileName(rank int) string { return fmt.Sprintf("flight-rank%05d.json", rank) }

// Write saves d into dir as FileName(d.Rank), replacing an earlier dump
// of the rank whole (a temporary file renamed over it), and returns the
// path.
func Write(dir string, d Dump) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName(d.Rank))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// Read loads every rank's dump in dir, ordered by rank.
func Read(dir string) ([]Dump, error) {
	names, err := filepath.Glob(filepath.Join(dir, "flight-rank*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("%s: no such directory of flight dumps (train writes them into --flight-dir)", dir)
		}
		return nil, fmt.Errorf("%s: no flight-rank*.json dumps (train writes them into --flight-dir on a stall, SIGUSR2, an abort or a NaN stop)", dir)
	}
	var ds []Dump
	seen := map[int]string{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var d Dump
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: not a flight dump: %v", n, err)
		}
		if d.Size <= 0 || d.Rank < 0 || d.Rank >= d.Size {
			return nil, fmt.Errorf("%s: rank %d of size %d: not a flight dump of train", n, d.Rank, d.Size)
		}
		if o, ok := seen[d.Rank]; ok {
			return nil, fmt.Errorf("%s and %s are both rank %d's dump", o, n, d.Rank)
		}
		seen[d.Rank] = n
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Rank < ds[j].Rank })
	for _, d := range ds[1:] {
		if d.Size != ds[0].Size {
			return nil, fmt.Errorf("%s: rank %d's dump says %d ranks, rank %d's %d: dumps of different jobs (remove the old ones)",
				dir, d.Rank, d.Size, ds[0].Rank, ds[0].Size)
		}
	}
	return ds, nil
}

// Describe is e in a few words: "allreduce (ring) of 4.0 MB float32,
// bucket 1 of 3: fc.W..fc.B, at step 5".
func (e *Event) Describe() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Algo != "" {
		fmt.Fprintf(&b, " (%s)", e.Algo)
	}
	switch {
	case e.Peer >= 0 && e.Op == "send":
		fmt.Fprintf(&b, " to rank %d", e.Peer)
	case e.Peer >= 0:
		fmt.Fprintf(&b, " from rank %d", e.Peer)
	case e.Peer == Any:
		b.WriteString(" from any rank")
	}
	if e.Bytes > 0 || e.Dtype != "" {
		fmt.Fprintf(&b, " of %s", Size(e.Bytes))
		if e.Dtype != "" {
			b.WriteString(" " + e.Dtype)
		}
	}
	if e.Label != "" {
		b.WriteString(", " + e.Label)
	} else if e.Phase != "" && e.Phase != "computing" {
		b.WriteString(", in " + e.Phase)
	}
	fmt.Fprintf(&b, ", at step %d", e.Step)
	return b.String()
}

// Size is a byte count for people: 16 B, 4.0 KB, 1.5 MB.
func Size(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}
