package fuzz

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"train/checkpoint"
)

// FuzzLoadCheckpoint: any bytes either load into the model's buffers (and
// then passed every check: format, checksum, names, shapes) or give an
// error naming the file; never a panic, and never an allocation beyond a
// small multiple of the file (safetensors' header is inside the file, its
// size checked against it). Seeds: a real checkpoint, torn and flipped, and
// testdata/fuzz/FuzzLoadCheckpoint (a checkpoint written by Save).
//
// The model is a 23-parameter MLP with optimizer state: the fuzzer
// minimises every input that finds new coverage, and a ResNet's 300 KB
// checkpoint took it minutes per input. BatchNorm buffers and int64
// tensors are covered by checkpoint's unit tests.
func FuzzLoadCheckpoint(f *testing.F) {
	p := MLP()
	for i := range p.Data {
		p.Data[i] = float32(i)/7 - 1
	}
	dir := f.TempDir()
	path, err := checkpoint.Save(dir, p, fuzzState(p.Data, p.Len()))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f.Add(good)
	f.Add(good[:len(good)/2])
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-9] ^= 4
	f.Add(flipped)
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "step-00000001.safetensors")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := fuzzState(make([]float32, p.Len()), p.Len())
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := checkpoint.Load(path, p, s)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*len(b)+1<<20) {
			t.Fatalf("loading %d bytes allocated %d", len(b), got)
		}
		if err == nil && checkpoint.Checksum(s.Params, s.Buffers) == 0 && len(b) < 100 {
			t.Fatalf("a %d-byte file loaded", len(b))
		}
	})
}

func fuzzState(data []float32, n int) *checkpoint.State {
	mom := make([]float32, n)
	for i := range mom {
		mom[i] = float32(i) / 3
	}
	return &checkpoint.State{Params: data, Optim: map[string][]float32{"momentum_buffer": mom}, Step: 1,
		Meta: map[string]string{"model": MLPConfig}}
}
