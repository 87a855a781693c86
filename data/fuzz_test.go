package data

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// allocBound fails the fuzz run if reading an input of n bytes allocated
// more than a generous multiple of it (plus the ceiling on what a header
// may claim, lowered for fuzzing): a lying header must not make the
// reader allocate for data that is not there.
func allocBound(t *testing.T, n int, f func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64*n+4*int(maxIDXBytes)+1<<20); got > limit {
		t.Fatalf("reading %d bytes allocated %d (limit %d)", n, got, limit)
	}
}

// FuzzReadIDX: any bytes, raw or gzipped, give an IDX whose data is
// exactly as long as its dimensions say, or an error; never a panic or an
// allocation the input does not justify. Seeds: testdata/fuzz/FuzzReadIDX
// and the cases below.
func FuzzReadIDX(f *testing.F) {
	f.Add(idxBytes(8, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6}))
	f.Add(gz(idxBytes(8, []uint32{3}, []byte{0, 1, 9})))
	f.Add(gz(idxBytes(8, []uint32{1 << 20, 1 << 20}, nil)))
	f.Add([]byte{0, 0, 8, 3, 0, 0, 0, 1})
	old := maxIDXBytes
	maxIDXBytes = 1 << 20
	defer func() { maxIDXBytes = old }()
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "in")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		allocBound(t, len(b), func() {
			m, err := ReadIDX(p)
			if err != nil {
				return
			}
			n := 1
			for _, d := range m.Dims {
				n *= d
			}
			if len(m.Dims) == 0 || n != len(m.Data) {
				t.Fatalf("dims %v but %d bytes of data", m.Dims, len(m.Data))
			}
		})
	})
}

// FuzzReadCIFARFile: any bytes give whole records with labels below 10,
// or an error.
func FuzzReadCIFARFile(f *testing.F) {
	f.Add(fixtureRecords(0, 1))
	f.Add(fixtureRecords(3, 2)[:5000])
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "in")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		allocBound(t, len(b), func() {
			img, lbl, err := ReadCIFARFile(p)
			if err != nil {
				return
			}
			if len(img) != len(lbl)*3072 || len(lbl)*3073 != len(b) {
				t.Fatalf("%d labels, %d pixels from %d bytes", len(lbl), len(img), len(b))
			}
			for _, l := range lbl {
				if l >= 10 {
					t.Fatalf("label %d accepted", l)
				}
			}
		})
	})
}
