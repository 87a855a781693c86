package runlog

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompare draws two runs into a PNG of the asked size and refuses a
// run with nothing to draw and a path that is not .png.
func TestCompare(t *testing.T) {
	run := func(name string, scale float64) Run {
		var recs []Record
		for s := 1; s <= 5; s++ {
			recs = append(recs, Record{Type: "step", Step: s * 10, Loss: F(scale * 5 / float64(s))})
			recs = append(recs, Record{Type: "eval", Step: s * 10, TestLoss: F(scale * 6 / float64(s))})
		}
		return Run{Name: name, Recs: recs}
	}
	path := filepath.Join(t.TempDir(), "cmp.png")
	if err := Compare([]Run{run("a", 1), run("b", 1.1)}, path, 640, 480); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Errorf("image %v, want 640x480", b)
	}
	if err := Compare([]Run{run("a", 1), {Name: "empty"}}, path, 640, 480); err == nil || !strings.Contains(err.Error(), "empty: no step or evaluation records") {
		t.Errorf("empty run: %v", err)
	}
	if err := Compare([]Run{run("a", 1)}, strings.TrimSuffix(path, ".png")+".svg", 640, 480); err == nil {
		t.Error("an .svg path accepted")
	}
}
