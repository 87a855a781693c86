package data

import (
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// trained is every id the ranks of seg train on in its first steps,
// in rank order then their order, checked against each rank's chunk.
func trained(t *testing.T, seg *Segment, size, batch, steps int) []int {
	t.Helper()
	var all []int
	for r := range size {
		read, order := seg.Rank(r)
		if len(order) != seg.Steps*batch {
			t.Fatalf("rank %d trains on %d, want %d steps of %d", r, len(order), seg.Steps, batch)
		}
		for _, id := range order[:steps*batch] {
			if !slices.Contains(read, id) {
				t.Fatalf("rank %d trains on %d, which it does not read", r, id)
			}
		}
		all = append(all, order[:steps*batch]...)
	}
	return all
}

// onceEach fails unless ids holds each of [0, n) once, less `missing`
// of them.
func onceEach(t *testing.T, what string, ids []int, n, missing int) {
	t.Helper()
	seen := map[int]int{}
	for _, id := range ids {
		if id < 0 || id >= n {
			t.Fatalf("%s: id %d out of [0, %d)", what, id, n)
		}
		seen[id]++
		if seen[id] > 1 {
			t.Fatalf("%s: id %d twice", what, id)
		}
	}
	if len(seen) != n-missing {
		t.Fatalf("%s: %d distinct ids, want %d of %d", what, len(seen), n-missing, n)
	}
}

// TestStreamOnce: at np 1, 2 and 3 the ranks together train on every
// sample once per epoch, each rank on samples of its own chunk only;
// the same steps on every rank; the epoch's leftover is N mod np x batch.
func TestStreamOnce(t *testing.T) {
	counts := []int{10, 7, 13, 9, 11, 8, 14} // 72
	for _, n := range []int{72, 71} {
		c := counts
		if n == 71 {
			c = append(slices.Clone(counts[:6]), 13)
		}
		for size := 1; size <= 3; size++ {
			s := Stream{Counts: c, Seed: 5, Shuffle: true, Buffer: 6, Batch: 4, Size: size}
			for epoch := range 2 {
				seg := s.Segment(epoch, 0, nil)
				if seg.Steps != n/(4*size) {
					t.Fatalf("N=%d np=%d: %d steps, want %d", n, size, seg.Steps, n/(4*size))
				}
				onceEach(t, fmt.Sprintf("N=%d np=%d epoch %d", n, size, epoch), trained(t, seg, size, 4, seg.Steps), n, n%(4*size))
			}
		}
	}
}

// TestStreamResume: stopped after 3 of its 9 steps at np=2 and resumed at
// np=3, and then again at np=1, the epoch still trains on every sample
// once; resumed at the same np and batch it is the same order.
func TestStreamResume(t *testing.T) {
	s2 := Stream{Counts: []int{10, 7, 13, 9, 11, 8, 14}, Seed: 9, Shuffle: true, Buffer: 5, Batch: 4, Size: 2}
	seg := s2.Segment(1, 0, nil)
	first := trained(t, seg, 2, 4, 3)
	pos := seg.Position(3)

	s3 := s2
	s3.Size = 3
	seg3, err := s3.Resume(pos, 2) // 24 samples consumed: step 2 at 12 a step
	if err != nil {
		t.Fatal(err)
	}
	if seg3.Steps != 4 || seg3.Start != 2 {
		t.Fatalf("resumed at np=3: %d steps from step %d, want 4 from 2", seg3.Steps, seg3.Start)
	}
	second := trained(t, seg3, 3, 4, 2)
	onceEach(t, "np=2 then np=3", append(slices.Clone(first), second...), 72, 72-48)
	s1 := s2
	s1.Size = 1
	seg1, err := s1.Resume(seg3.Position(4), 12) // 48 consumed: step 12 at 4 a step
	if err != nil {
		t.Fatal(err)
	}
	third := trained(t, seg1, 1, 4, seg1.Steps)
	onceEach(t, "np=2, np=3, np=1", append(append(first, second...), third...), 72, 0)

	same, err := s2.Resume(pos, 3)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		_, a := seg.Rank(r)
		_, b := same.Rank(r)
		if !slices.Equal(a, b) {
			t.Errorf("rank %d resumed at the same np: another order", r)
		}
	}
	if _, err := (Stream{Counts: []int{71}, Batch: 4, Size: 2}).Resume(pos, 3); err == nil || !strings.Contains(err.Error(), "72 samples") {
		t.Errorf("resuming on other shards: %v, want an error naming 72 samples", err)
	}
}

// TestStreamOrder: no shuffling reads the shards' samples in the
// pattern's order; a shuffle buffer of k never lets a sample out more
// than k-1 places before it is read (what a reader must hold), and a
// different order per epoch.
func TestStreamOrder(t *testing.T) {
	s := Stream{Counts: []int{3, 4, 5}, Batch: 2, Size: 1}
	_, order := s.Segment(0, 0, nil).Rank(0)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(order, want) {
		t.Errorf("no shuffling: %v, want %v", order, want)
	}
	s = Stream{Counts: []int{30, 40, 50}, Seed: 3, Shuffle: true, Buffer: 7, Batch: 2, Size: 1}
	read, order := s.Segment(0, 0, nil).Rank(0)
	for i, id := range order {
		if j := slices.Index(read, id); j > i+6 {
			t.Fatalf("sample %d is out at %d, read at %d: more than a buffer of 7 ahead", id, i, j)
		}
	}
	_, again := s.Segment(1, 0, nil).Rank(0)
	if slices.Equal(order, again) {
		t.Error("epochs 0 and 1 have the same order")
	}
}

// TestPackTarSet: a folder packed into shards of a few images reads back
// as the folder: the same images, labels and order, counted from pack's
// header or by reading shards with none; bad shards are named.
func TestPackTarSet(t *testing.T) {
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 11 {
		img := image.NewRGBA(image.Rect(0, 0, 8+i, 9))
		for p := range img.Pix {
			img.Pix[p] = uint8(rng.Uint32())
		}
		name := filepath.Join(root, []string{"ant", "bee", "cow"}[i%3], fmt.Sprintf("img.%02d.png", i))
		os.MkdirAll(filepath.Dir(name), 0o755)
		f, _ := os.Create(name)
		png.Encode(f, img)
		f.Close()
	}
	f, err := ScanFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	shards, err := Pack(f, out, "train", 1, nil) // one image a shard
	if err != nil || len(shards) != 11 {
		t.Fatalf("Pack: %d shards, %v", len(shards), err)
	}
	ts, err := OpenTarShards(filepath.Join(out, "train-{000000..000010}.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if ts.N() != 11 || ts.Classes != 3 || ts.Scanned != 0 {
		t.Fatalf("N %d classes %d scanned %d, want 11, 3, 0", ts.N(), ts.Classes, ts.Scanned)
	}
	v := View{Size: 8, Resize: 8, Mean: [3]float32{0, 0, 0}, Std: [3]float32{1, 1, 1}, Workers: 2}
	set := &TarSet{TarShards: ts, View: v, Keys: true}
	folder := &ImageSet{Folder: f, View: v}
	ids := []int{3, 0, 10, 4}
	set.Expect([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	x, y := make([]float32, 4*3*64), make([]int32, 4)
	xf, yf := make([]float32, 4*3*64), make([]int32, 4)
	if err := set.Batch(x, y, ids, 0); err != nil {
		t.Fatal(err)
	}
	if err := folder.Batch(xf, yf, ids, 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x, xf) || !slices.Equal(y, yf) {
		t.Errorf("shards' samples %v differ from the folder's (labels %v and %v)", ids, y, yf)
	}
	if k := set.TakeKey(10); k != "cow/img_08" { // the folder's 11th: ant 00 03 06 09, bee 01 04 07 10, cow 02 05 08
		t.Errorf("key of sample 10: %q, want cow/img_08", k)
	}

	// A shard of another tool: no header, counted by reading it.
	os.Rename(shards[0], shards[0]+".orig")
	orig, _ := os.ReadFile(shards[0] + ".orig")
	os.WriteFile(shards[0], orig[1024:], 0o644) // the global header is 2 blocks
	ts2, err := OpenTarShards(filepath.Join(out, "train-{000000..000010}.tar"))
	if err != nil || ts2.Scanned != 1 || ts2.N() != 11 || ts2.Classes != 3 {
		t.Fatalf("a shard without pack's header: %+v, %v", ts2, err)
	}
	os.WriteFile(shards[1], []byte("not a tar file at all, not at all, at all"), 0o644)
	if _, err := OpenTarShards(filepath.Join(out, "train-{000000..000010}.tar")); err == nil || !strings.Contains(err.Error(), shards[1]) {
		t.Errorf("a broken shard: %v, want an error naming %s", err, shards[1])
	}
}
