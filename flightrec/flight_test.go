package flightrec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSequenceNumbers(t *testing.T) {
	r := New(64, []string{"computing", "the gradient allreduce"})
	c := r.Comm("world", 1, 3)
	other := r.Comm("bn", 1, 3)
	l := NewLabel("bucket 1 of 2: fc.W")
	c.Label(l)
	r.SetStep(7)
	r.SetPhase(1)
	a := c.Begin("allreduce", "ring", All, 400, "float32")
	c.End(a, nil)
	c.Begin("allreduce", "ring", All, 400, "float32") // in flight
	other.Begin("allreduce", "mpi", All, 16, "float64")
	c.Begin("send", "", 2, 8, "int64")
	c.Begin("send", "", 2, 8, "int64")
	c.Begin("send", "", 0, 8, "int64")
	c.Begin("probe", "", 0, 0, "")
	c.Begin("recv", "", 0, 8, "int64")
	c.Begin("recv", "", Any, 8, "int64")
	d := r.Snapshot(1, 3, "test")
	want := []struct {
		comm, op, label string
		seq             uint64
		ended           bool
	}{
		{"world", "allreduce", "bucket 1 of 2: fc.W", 1, true},
		{"world", "allreduce", "", 2, false}, // a label is used once
		{"bn", "allreduce", "", 1, false},
		{"world", "send", "", 1, false},
		{"world", "send", "", 2, false},
		{"world", "send", "", 1, false}, // to another peer: its own count
		{"world", "probe", "", 1, false},
		{"world", "recv", "", 1, false}, // the probe waited for this one
		{"world", "recv", "", 0, false}, // any source: no count
	}
	if len(d.Events) != len(want) {
		t.Fatalf("%d events, want %d", len(d.Events), len(want))
	}
	for i, w := range want {
		e := d.Events[i]
		if e.Comm != w.comm || e.Op != w.op || e.Label != w.label || e.Seq != w.seq || (e.End != 0) != w.ended {
			t.Errorf("event %d: %+v, want %+v", i, e, w)
		}
		if e.Step != 7 || e.Phase != "the gradient allreduce" || e.Start == 0 || e.Enq != e.Start {
			t.Errorf("event %d: step %d phase %q start %d enqueued %d", i, e.Step, e.Phase, e.Start, e.Enq)
		}
	}
	if d.Comms[0].Seq != 2 || d.Comms[0].Sent[2] != 2 || d.Comms[0].Sent[0] != 1 || d.Comms[0].Recvd[0] != 1 || d.Comms[0].Rank != 1 {
		t.Errorf("world's counters %+v", d.Comms[0])
	}
	if r.Seqs()["world"] != 2 || r.Seqs()["bn"] != 1 {
		t.Errorf("Seqs %v", r.Seqs())
	}
}

func TestLabelEnqueued(t *testing.T) {
	r := New(8, nil)
	c := r.Comm("world", 0, 2)
	l := NewLabel("bucket 1 of 1: w")
	at := time.Now().Add(-time.Second)
	l.Enqueued(at)
	c.Label(l)
	c.Begin("allreduce", "mpi", All, 4, "float32")
	c.Label(l)
	c.Label(nil) // the call was not made after all
	c.Begin("allreduce", "mpi", All, 4, "float32")
	d := r.Snapshot(0, 2, "test")
	if e := d.Events[0]; e.Enq != at.UnixNano() || e.Start-e.Enq < int64(time.Second) {
		t.Errorf("enqueued %d, started %d: want the label's time, a second before", e.Enq, e.Start)
	}
	if d.Events[1].Label != "" {
		t.Errorf("a withdrawn label was used: %q", d.Events[1].Label)
	}
}

func TestRingKeepsTheNewest(t *testing.T) {
	r := New(4, nil)
	c := r.Comm("world", 0, 2)
	var ids []uint64
	for range 10 {
		ids = append(ids, c.Begin("barrier", "mpi", All, 0, ""))
	}
	c.End(ids[2], nil) // overwritten: no effect
	c.End(ids[9], errors.New("failed"))
	d := r.Snapshot(0, 2, "test")
	if d.Recorded != 10 || len(d.Events) != 4 || d.Events[0].ID != 6 || d.Events[0].Seq != 7 || d.Events[3].ID != 9 {
		t.Fatalf("recorded %d, events %+v: want the last 4 of 10", d.Recorded, d.Events)
	}
	for _, e := range d.Events[:3] {
		if e.End != 0 {
			t.Errorf("event %d ended by another's End", e.ID)
		}
	}
	if !d.Events[3].Err || d.Events[3].End == 0 {
		t.Errorf("the failed call: %+v", d.Events[3])
	}
}

func TestOffRecordsNothing(t *testing.T) {
	r := New(0, nil)
	if r != nil {
		t.Fatal("New(0) is not nil")
	}
	c := r.Comm("world", 0, 2)
	c.Label(NewLabel("x"))
	c.End(c.Begin("allreduce", "mpi", All, 4, "float32"), nil)
	r.SetStep(1)
	r.SetPhase(1)
	if c.Seq() != 0 || c.Name() != "" || r.Seqs() != nil {
		t.Error("a nil recorder counted")
	}
}

// The budget: under 1 us per event, nothing allocated.
func TestRecordAllocatesNothing(t *testing.T) {
	r := New(1024, []string{"computing"})
	c := r.Comm("world", 0, 4)
	l := NewLabel("bucket 1 of 3: fc.W..fc.B")
	if n := testing.AllocsPerRun(1000, func() {
		c.Label(l)
		c.End(c.Begin("allreduce", "ring", All, 1<<20, "float32"), nil)
		c.End(c.Begin("send", "", 3, 64, "int64"), nil)
	}); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := New(4096, []string{"computing"})
	c := r.Comm("world", 0, 4)
	l := NewLabel("bucket 1 of 3: fc.W..fc.B")
	b.ReportAllocs()
	for b.Loop() {
		c.Label(l)
		c.End(c.Begin("allreduce", "ring", All, 1<<20, "float32"), nil)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r := New(4096, []string{"computing"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := r.Comm("world", 0, 4)
		for pb.Next() {
			c.End(c.Begin("allreduce", "ring", All, 1<<20, "float32"), nil)
		}
	})
}

func TestWriteRead(t *testing.T) {
	dir := t.TempDir()
	for rank := range 3 {
		r := New(8, nil)
		c := r.Comm("world", rank, 3)
		c.End(c.Begin("allreduce", "mpi", All, 8, "int64"), nil)
		if _, err := Write(dir, r.Snapshot(rank, 3, "SIGUSR2")); err != nil {
			t.Fatal(err)
		}
	}
	// A second dump replaces the first whole.
	if _, err := Write(dir, New(8, nil).Snapshot(1, 3, "abort")); err != nil {
		t.Fatal(err)
	}
	ds, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 || ds[1].Rank != 1 || ds[1].Reason != "abort" || len(ds[1].Events) != 0 || len(ds[2].Events) != 1 || ds[2].Events[0].Dtype != "int64" {
		t.Fatalf("read back %+v", ds)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	bad := func(name, content, want string) {
		t.Helper()
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, name), []byte(content), 0o644)
		if _, err := Read(d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	bad("other.json", "{}", "no flight-rank*.json dumps")
	bad("flight-rank00000.json", "not json", "not a flight dump")
	bad("flight-rank00000.json", `{"rank": 5, "size": 2}`, "rank 5 of size 2")
	if _, err := Read(filepath.Join(dir, "absent")); err == nil {
		t.Error("a missing directory read without error")
	}
	mixed := t.TempDir()
	Write(mixed, Dump{Rank: 0, Size: 2})
	Write(mixed, Dump{Rank: 1, Size: 4})
	if _, err := Read(mixed); err == nil || !strings.Contains(err.Error(), "different jobs") {
		t.Errorf("dumps of 2 and 4 ranks: %v", err)
	}
}
