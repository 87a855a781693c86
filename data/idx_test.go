package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"train/internal/near"
)

// idxBytes builds an IDX file: magic with type and dims, then data.
func idxBytes(typ byte, dims []uint32, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(data)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadIDX(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6}
	good := idxBytes(8, []uint32{2, 3}, data)
	// Large enough to be mapped rather than read (mapIDXBytes), with a
	// length that is not a whole number of pages.
	big := make([]byte, 3*(mapIDXBytes/3+1001))
	for i := range big {
		big[i] = byte(i*7 + i/251)
	}
	for _, tc := range []struct {
		name string
		file []byte
		dims []int
		data []byte
	}{
		{"raw", good, []int{2, 3}, data},
		{"gzip", gz(good), []int{2, 3}, data},
		{"raw, mapped", idxBytes(8, []uint32{3, uint32(len(big) / 3)}, big), []int{3, len(big) / 3}, big},
		{"gzip, large", gz(idxBytes(8, []uint32{3, uint32(len(big) / 3)}, big)), []int{3, len(big) / 3}, big},
	} {
		m, err := ReadIDX(writeFile(t, "f", tc.file))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(m.Dims, tc.dims) || !bytes.Equal(m.Data, tc.data) {
			t.Errorf("%s: got dims %v and %d bytes, want %v and %d bytes as written", tc.name, m.Dims, len(m.Data), tc.dims, len(tc.data))
		}
	}
	// A large raw file one byte short is refused before anything is mapped.
	short := idxBytes(8, []uint32{3, uint32(len(big) / 3)}, big[1:])
	if _, err := ReadIDX(writeFile(t, "short", short)); err == nil || !strings.Contains(err.Error(), "truncated or not this format") {
		t.Errorf("a large raw file one byte short: %v", err)
	}
}

func TestReadIDXRejects(t *testing.T) {
	huge := idxBytes(8, []uint32{1 << 20, 1 << 20, 1 << 20}, nil)
	lying := idxBytes(8, []uint32{60000, 28, 28}, make([]byte, 100)) // claims 47 MB
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short for the 4-byte magic"},
		{"wrong magic", append([]byte{0x1f, 0x00}, idxBytes(8, []uint32{2}, []byte{1, 2})[2:]...), "does not start with two zero bytes"},
		{"text file", []byte("hello world, not idx"), "does not start with two zero bytes"},
		{"float type", idxBytes(0x0D, []uint32{1}, []byte{0, 0, 0, 0}), "data type 0x0d not supported"},
		{"no dims", idxBytes(8, nil, nil), "0 dimensions"},
		{"zero dim", idxBytes(8, []uint32{0}, nil), "dimension 0 is zero"},
		{"header truncated", idxBytes(8, []uint32{2, 3}, nil)[:6], "header truncated"},
		{"raw data truncated", idxBytes(8, []uint32{2, 3}, []byte{1, 2, 3}), "file holds 3"},
		{"raw trailing data", idxBytes(8, []uint32{2}, []byte{1, 2, 3}), "file holds 3"},
		{"gzip data truncated", gz(idxBytes(8, []uint32{2, 3}, []byte{1, 2, 3})), "stream holds 3"},
		{"gzip trailing data", gz(idxBytes(8, []uint32{2}, []byte{1, 2, 3})), "stream holds 3"},
		{"gzip stream cut", gz(idxBytes(8, []uint32{100}, make([]byte, 100)))[:30], "truncated"},
		{"huge claim", gz(huge), "more than"},
		{"lying header", gz(lying), "stream holds 100"},
	} {
		p := writeFile(t, "bad-idx", tc.file)
		_, err := ReadIDX(p)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, p+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming %s and containing %q", tc.name, msg, p, tc.want)
		}
	}
}

func TestLoadMNISTErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadMNIST(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("missing dir: %v", err)
	}
	if _, _, err := LoadMNIST(dir); err == nil || !strings.Contains(err.Error(), "train-images-idx3-ubyte") {
		t.Errorf("empty dir: %v", err)
	}
	// Two images, three labels.
	os.WriteFile(filepath.Join(dir, "train-images-idx3-ubyte"), idxBytes(8, []uint32{2, 2, 2}, make([]byte, 8)), 0o644)
	os.WriteFile(filepath.Join(dir, "train-labels-idx1-ubyte.gz"), gz(idxBytes(8, []uint32{3}, []byte{0, 1, 2})), 0o644)
	if _, _, err := LoadMNIST(dir); err == nil || !strings.Contains(err.Error(), "has 2 images but") {
		t.Errorf("count mismatch: %v", err)
	}
	// A label of 10 in a 10-class set.
	os.WriteFile(filepath.Join(dir, "train-labels-idx1-ubyte.gz"), gz(idxBytes(8, []uint32{2}, []byte{0, 10})), 0o644)
	if _, _, err := LoadMNIST(dir); err == nil || !strings.Contains(err.Error(), "label 10 of sample 1") {
		t.Errorf("bad label: %v", err)
	}
}

// TestFashionMNIST reads the real dataset as Debian installs it.
func TestFashionMNIST(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	train, test, err := LoadMNIST(dir)
	if err != nil {
		t.Fatalf("%v (install it with scripts/setup.sh)", err)
	}
	if train.N != 60000 || test.N != 10000 || train.H != 28 || train.W != 28 || train.C != 1 {
		t.Fatalf("train %d test %d shape %dx%dx%d", train.N, test.N, train.C, train.H, train.W)
	}
	counts := make([]int, 10)
	var sum float64
	for i, l := range train.Labels {
		counts[l]++
		_ = i
	}
	for _, p := range train.Images {
		sum += float64(p)
	}
	for c, n := range counts {
		if n != 6000 {
			t.Errorf("class %d has %d training samples, want 6000", c, n)
		}
	}
	// The normalisation constants are the training set's own mean.
	if mean := sum / float64(len(train.Images)) / 255; mean < 0.2855 || mean > 0.2865 {
		t.Errorf("pixel mean %.4f, constant says %.4f", mean, fashionMean)
	}
}

func TestBatch(t *testing.T) {
	imgs := []byte{0, 255, 51, 102, 7, 7, 7, 7}
	d, err := NewDataset("t", imgs, []byte{3, 1}, 2, 1, 2, 4, []float32{0, 0.5}, []float32{1, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 8)
	y := make([]int32, 2)
	d.Batch(x, y, []int{1, 0})
	want := []float32{7.0 / 255, 7.0 / 255, (7.0/255 - 0.5) / 0.5, (7.0/255 - 0.5) / 0.5, 0, 1, (0.2 - 0.5) / 0.5, (0.4 - 0.5) / 0.5}
	for i := range want {
		if !near.Close(float64(want[i]), float64(x[i]), 0, 1e-6) {
			t.Errorf("x[%d] = %v, want %v", i, x[i], want[i])
		}
	}
	if y[0] != 1 || y[1] != 3 {
		t.Errorf("y = %v", y)
	}
}
