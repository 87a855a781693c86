package data

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the fixtures in testdata/")

// fixtureDir holds small CIFAR-10-format files: data_batch_1.bin (20
// records), data_batch_2.bin (10) and test_batch.bin (10). Record i has
// label i%10 and pixel bytes (i + 7*channel + position) % 251, so tests can
// tell records, channels and positions apart.
const fixtureDir = "../testdata/cifar10-mini"

func fixtureRecords(first, n int) []byte {
	var b []byte
	for i := first; i < first+n; i++ {
		b = append(b, byte(i%10))
		for ch := range 3 {
			for p := range 1024 {
				b = append(b, byte((i+7*ch+p)%251))
			}
		}
	}
	return b
}

// TestCIFARFixture checks the committed fixture is what fixtureRecords
// makes (go test ./data -run TestCIFARFixture -update rewrites it) and
// that LoadCIFAR reads it.
func TestCIFARFixture(t *testing.T) {
	files := map[string][]byte{
		"data_batch_1.bin": fixtureRecords(0, 20),
		"data_batch_2.bin": fixtureRecords(20, 10),
		"test_batch.bin":   fixtureRecords(100, 10),
	}
	for name, want := range files {
		p := filepath.Join(fixtureDir, name)
		if *update {
			os.MkdirAll(fixtureDir, 0o755)
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s differs from its generator (%v); run with -update", p, err)
		}
	}
	train, test, err := LoadCIFAR(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 30 || test.N != 10 || train.C != 3 || train.H != 32 || train.W != 32 {
		t.Fatalf("train %d test %d shape %dx%dx%d", train.N, test.N, train.C, train.H, train.W)
	}
	// Record 23 is the 4th of data_batch_2: label 3; green plane, pixel 5.
	if train.Labels[23] != 3 || train.Images[23*3072+1024+5] != byte((23+7+5)%251) {
		t.Errorf("record 23: label %d, green[5] %d", train.Labels[23], train.Images[23*3072+1024+5])
	}
	if !IsCIFAR(fixtureDir) {
		t.Error("IsCIFAR false on the fixture")
	}
}

func TestCIFARRejects(t *testing.T) {
	dir := t.TempDir()
	good := fixtureRecords(0, 2)
	badLabel := fixtureRecords(0, 2)
	badLabel[3073] = 12
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"truncated", good[:len(good)-100], "not a whole number of 3073-byte"},
		{"bad label", badLabel, "record 1 has label 12"},
	} {
		p := filepath.Join(dir, tc.name+".bin")
		os.WriteFile(p, tc.b, 0o644)
		_, _, err := ReadCIFARFile(p)
		if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s with %q", tc.name, err, p, tc.want)
		}
	}
	// A directory with training batches but no test batch.
	os.WriteFile(filepath.Join(dir, "data_batch_1.bin"), good, 0o644)
	if _, _, err := LoadCIFAR(dir); err == nil || !strings.Contains(err.Error(), "no test_batch.bin") {
		t.Errorf("missing test batch: %v", err)
	}
}

func TestSyntheticAndLoad(t *testing.T) {
	tr, te, err := Load(Source{Dir: "synthetic", SyntheticShape: "3x8x6", SyntheticSamples: 50, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 50 || te.N != 5 || tr.C != 3 || tr.H != 8 || tr.W != 6 {
		t.Fatalf("synthetic: %d/%d samples, %dx%dx%d", tr.N, te.N, tr.C, tr.H, tr.W)
	}
	again, _, _ := Load(Source{Dir: "synthetic", SyntheticShape: "3x8x6", SyntheticSamples: 50, Seed: 4})
	if !slices.Equal(tr.Images, again.Images) || !slices.Equal(tr.Labels, again.Labels) {
		t.Error("same seed, different synthetic data")
	}
	for _, bad := range []string{"3x8", "0x8x8", "ax8x8", ""} {
		if _, _, err := Load(Source{Dir: "synthetic", SyntheticShape: bad, SyntheticSamples: 5}); err == nil {
			t.Errorf("shape %q accepted", bad)
		}
	}
	if tr, _, err := Load(Source{Dir: fixtureDir}); err != nil || tr.C != 3 {
		t.Errorf("Load picks CIFAR for the fixture: %v", err)
	}
}

// TestAugment: every augmented image is its source shifted by at most Pad
// pixels each way (zero-filled) and possibly mirrored; the draw depends on
// the sample and epoch only; Pad 0 without flip is Batch.
func TestAugment(t *testing.T) {
	train, _, err := LoadCIFAR(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	a := Augment{Pad: 4, Flip: true, Seed: 9}
	idx := []int{3, 17, 25}
	s := train.SampleSize()
	x := make([]float32, len(idx)*s)
	y := make([]int32, len(idx))
	train.BatchAugmented(x, y, idx, a, 2)
	plain := make([]float32, s)
	var shifts = map[[3]int]bool{}
	for b, i := range idx {
		train.Batch(plain, y[b:b+1], []int{i})
		got := x[b*s : (b+1)*s]
		found := false
		for dy := -4; dy <= 4 && !found; dy++ {
			for dx := -4; dx <= 4 && !found; dx++ {
				for _, flip := range []bool{false, true} {
					if matchesShift(got, plain, train, dy, dx, flip) {
						found = true
						shifts[[3]int{dy, dx, map[bool]int{true: 1}[flip]}] = true
						break
					}
				}
			}
		}
		if !found {
			t.Errorf("sample %d: not a padded shift or mirror of its source", i)
		}
	}
	if len(shifts) < 2 {
		t.Errorf("three samples drew %d distinct crops", len(shifts))
	}
	// The same sample in another batch, same epoch: the same pixels.
	x2 := make([]float32, s)
	train.BatchAugmented(x2, y[:1], []int{17}, a, 2)
	if !slices.Equal(x2, x[s:2*s]) {
		t.Error("sample 17's augmentation depends on its batch")
	}
	train.BatchAugmented(x2, y[:1], []int{17}, a, 3)
	if slices.Equal(x2, x[s:2*s]) {
		t.Error("sample 17 drew the same crop in epoch 3 (possible but unlikely: 1 in 162)")
	}
	train.BatchAugmented(x2, y[:1], []int{17}, Augment{}, 3)
	train.Batch(plain, y[:1], []int{17})
	if !slices.Equal(x2, plain) {
		t.Error("no augmentation is not Batch")
	}
}

// TestCropPlane: every shift, inside the image and wholly outside it
// (more than W or H either way), flipped or not, gives the pixels that
// matchesShift's pixel-by-pixel definition wants.
func TestCropPlane(t *testing.T) {
	train, _, err := LoadCIFAR(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	s, hw := train.SampleSize(), train.H*train.W
	plain := make([]float32, s)
	train.Batch(plain, make([]int32, 1), []int{17})
	img := train.Images[17*s : 18*s]
	got := make([]float32, s)
	bad := 0
	for dy := -train.H - 2; dy <= train.H+2; dy++ {
		for dx := -train.W - 2; dx <= train.W+2; dx++ {
			for _, flip := range []bool{false, true} {
				for i := range got {
					got[i] = float32(math.NaN())
				}
				for ch := range train.C {
					train.cropPlane(got[ch*hw:(ch+1)*hw], img[ch*hw:(ch+1)*hw], &train.lut[ch], dy, dx, flip)
				}
				if !matchesShift(got, plain, train, dy, dx, flip) {
					if bad++; bad <= 5 {
						t.Errorf("shift (%d, %d) flip %v: not the padded crop", dy, dx, flip)
					}
				}
			}
		}
	}
}

func matchesShift(got, plain []float32, d *Dataset, dy, dx int, flip bool) bool {
	hw := d.H * d.W
	zero := d.lut
	for ch := range d.C {
		for r := range d.H {
			for c := range d.W {
				sr, sc := r+dy, c+dx
				if flip {
					sc = d.W - 1 - c + dx
				}
				want := zero[ch][0]
				if sr >= 0 && sr < d.H && sc >= 0 && sc < d.W {
					want = plain[ch*hw+sr*d.W+sc]
				}
				if got[ch*hw+r*d.W+c] != want {
					return false
				}
			}
		}
	}
	return true
}
