package runlog

import (
	"path/filepath"
	"testing"
)

// TestCreateResumeAppends: a resumed run appends to the log instead of
// truncating it, and Latest keeps one history: the first run's records up
// to the resumed step, then the second run's.
func TestCreateResumeAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	w, err := Create(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{{Type: "start"}, {Type: "step", Step: 10}, {Type: "epoch", Step: 20}, {Type: "step", Step: 30}} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// Killed after step 30; the newest checkpoint was at step 20.
	w, err = Create(path, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{{Type: "start", Step: 20}, {Type: "step", Step: 30, Loss: F(1)}, {Type: "done", Step: 40}} {
		w.Write(r)
	}
	w.Close()
	recs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 {
		t.Fatalf("%d records after the resume, want all 7 kept", len(recs))
	}
	got := ""
	for _, r := range Latest(recs) {
		got += r.Type + ":" + string(rune('0'+r.Step/10)) + " "
	}
	if want := "start:0 step:1 epoch:2 start:2 step:3 done:4 "; got != want {
		t.Errorf("Latest = %q, want %q", got, want)
	}
	if l := Latest(recs); l[4].Loss == nil {
		t.Error("Latest kept the first run's step 30, not the resumed run's")
	}
	// A fresh run (no resume) starts a new log.
	w, _ = Create(path, false)
	w.Write(Record{Type: "start"})
	w.Close()
	if recs, _ := ReadFile(path); len(recs) != 1 {
		t.Errorf("a fresh run left %d records, want 1", len(recs))
	}
}
