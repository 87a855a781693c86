package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"train/model"
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
// tensors are covered by the unit tests.
func FuzzLoadCheckpoint(f *testing.F) {
	m, err := model.Build(fuzzModel)
	if err != nil {
		f.Fatal(err)
	}
	m.Init(1)
	dir := f.TempDir()
	path, err := Save(dir, m.Params, fuzzState(m.Params.Data, m.Params.Len()))
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
		p := filepath.Join(dir, "step-00000001.safetensors")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := fuzzState(make([]float32, m.Params.Len()), m.Params.Len())
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := Load(p, m.Params, s)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(8*len(b)+1<<20) {
			t.Fatalf("loading %d bytes allocated %d", len(b), got)
		}
		if err == nil && Checksum(s.Params, s.Buffers) == 0 && len(b) < 100 {
			t.Fatalf("a %d-byte file loaded", len(b))
		}
	})
}

// fuzzModel is FuzzLoadCheckpoint's model; its seed corpus was written
// with it.
var fuzzModel = model.Config{Kind: "mlp", Hidden: []int{3}, Input: [3]int{1, 2, 2}, Classes: 2}

func fuzzState(params []float32, n int) *State {
	mom := make([]float32, n)
	for i := range mom {
		mom[i] = float32(i) / 3
	}
	return &State{Params: params, Optim: map[string][]float32{"momentum_buffer": mom}, Step: 1,
		Meta: map[string]string{"model": fuzzModel.String()}}
}
