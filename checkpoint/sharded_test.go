package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"train/model"
)

// gptParts builds a small GPT whole (Init'ed) and as T = 2 tensor shards
// of one stage, with an optimizer buffer filled from the parameters.
func gptParts(t *testing.T) (whole *model.Model, parts []*model.Model) {
	t.Helper()
	cfg := model.Config{Kind: "gpt", Classes: 11, GPT: &model.GPTConfig{Layers: 2, Heads: 2, Dim: 8, Context: 4, Vocab: 11, VocabPadded: 11}}
	whole, err := model.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	whole.Init(3)
	for k := range 2 {
		p, err := model.BuildPart(cfg, model.Part{Shard: k, Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		p.Init(3) // every part draws the whole network's values
		parts = append(parts, p)
	}
	return whole, parts
}

// writeSharded writes parts as a sharded checkpoint of step 7 in dir.
func writeSharded(t *testing.T, dir string, parts []*model.Model) string {
	t.Helper()
	d := ShardedPath(dir, 7)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	x := &Index{Metadata: map[string]string{"step": "7", "epoch": "1", "step_in_epoch": "2", "samples": "56"}, Files: map[string]FileInfo{}}
	for k, p := range parts {
		st := &State{Params: p.Params.Data, Buffers: p.Params.Buffers, Optim: map[string][]float32{"m": slices.Clone(p.Params.Data)}, Step: 7}
		name := ShardName(k, len(parts))
		fi, err := WriteShard(filepath.Join(d, name), p.Params, st, k == 0)
		if err != nil {
			t.Fatal(err)
		}
		x.Files[name] = fi
		x.Add(name, p.Params, []string{"m"}, k == 0)
	}
	if err := WriteIndex(d, x); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestShardedRoundTrip: two tensor-parallel shards written apart load
// into the whole model as the whole model's own values (the parts drew
// them from the same seed), and into each shard again; List sees the
// directory only once its index is there; a flipped byte is named.
func TestShardedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	whole, parts := gptParts(t)
	d := writeSharded(t, dir, parts)
	got := State{Params: make([]float32, whole.Params.Len()), Buffers: make([]float32, len(whole.Params.Buffers)),
		Optim: map[string][]float32{"m": make([]float32, whole.Params.Len())}}
	if err := LoadShards(d, whole.Params, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Params, whole.Params.Data) || !slices.Equal(got.Optim["m"], whole.Params.Data) {
		t.Errorf("the shards, loaded whole, differ from the whole model's values")
	}
	if got.Step != 7 || got.Epoch != 1 || got.StepInEpoch != 2 || got.Samples != 56 {
		t.Errorf("position %d %d %d %d, want 7 1 2 56", got.Step, got.Epoch, got.StepInEpoch, got.Samples)
	}
	for k, p := range parts {
		back := State{Params: make([]float32, p.Params.Len()), Optim: map[string][]float32{"m": make([]float32, p.Params.Len())}}
		if err := LoadShards(d, p.Params, &back); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back.Params, p.Params.Data) {
			t.Errorf("shard %d loaded back differs", k)
		}
	}
	if paths, _ := List(dir); len(paths) != 1 || paths[0] != d {
		t.Errorf("List = %v, want [%s]", paths, d)
	}
	os.Remove(filepath.Join(d, IndexName))
	if paths, _ := List(dir); len(paths) != 0 {
		t.Errorf("List = %v without the index, want none", paths)
	}
	d = writeSharded(t, dir, parts)
	f := filepath.Join(d, ShardName(1, 2))
	b, _ := os.ReadFile(f)
	b[len(b)-3] ^= 1
	os.WriteFile(f, b, 0o644)
	err := LoadShards(d, whole.Params, &got)
	if err == nil || !strings.Contains(err.Error(), ShardName(1, 2)+": checksum mismatch") {
		t.Errorf("a flipped byte: %v", err)
	}
	// Another model: named.
	x, _ := ReadIndex(d)
	if x.Metadata["samples"] != strconv.Itoa(56) {
		t.Errorf("index metadata %v", x.Metadata)
	}
	small := testModel(t, 4)
	err = LoadShards(d, small.Params, &State{Params: make([]float32, small.Params.Len())})
	if err == nil || !strings.Contains(err.Error(), "not in the checkpoint") {
		t.Errorf("another model: %v", err)
	}
}
