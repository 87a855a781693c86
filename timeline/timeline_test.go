package timeline

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteReadPlot: a rank's file written and closed reads back, an
// unterminated one (a crash) too, and Plot draws its one finished step,
// refusing a step that is not there.
func TestWriteReadPlot(t *testing.T) {
	dir := t.TempDir()
	origin := time.Now()
	path := filepath.Join(dir, "tr.json")
	w, err := Create(path, 0, origin, "training")
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Time { return origin.Add(time.Duration(n) * time.Millisecond) }
	w.Span("step", 0, ms(0), 10*time.Millisecond, map[string]any{"step": 0})
	w.Span("F0", 0, ms(1), 3*time.Millisecond, nil)
	w.Flow("pipeline F", 7, true, 0, ms(4))
	w.Span("send F0", 0, ms(4), time.Microsecond, nil)
	w.Span("B0", 0, ms(5), 4*time.Millisecond, nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 8 { // 3 metadata, 4 spans, 1 flow
		t.Fatalf("read %d events, want 8", len(evs))
	}
	b, _ := os.ReadFile(path)
	cut := strings.TrimSuffix(strings.TrimSpace(string(b)), "]")
	os.WriteFile(path, []byte(cut+","), 0o644)
	if again, err := Read(path); err != nil || len(again) != 8 {
		t.Errorf("an unterminated file: %d events, %v", len(again), err)
	}
	out := filepath.Join(dir, "p.png")
	if err := Plot(evs, out, -1, 400, 200); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(out)
	defer f.Close()
	if cfg, err := png.DecodeConfig(f); err != nil || cfg.Width != 400 || cfg.Height != 200 {
		t.Errorf("plot: %+v, %v; want a 400x200 PNG", cfg, err)
	}
	if err := Plot(evs, out, 5, 400, 200); err == nil || !strings.Contains(err.Error(), "--step 5") {
		t.Errorf("step 5, not in the trace: %v", err)
	}
}
