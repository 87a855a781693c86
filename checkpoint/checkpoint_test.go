package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"train/model"
)

func testModel(t *testing.T, hidden ...int) *model.Model {
	t.Helper()
	m, err := model.Build(model.Config{Kind: "mlp", Hidden: hidden, Input: [3]int{1, 2, 2}, Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(5)
	return m
}

func testState(m *model.Model, step int) *State {
	mom := make([]float32, m.Params.Len())
	for i := range mom {
		mom[i] = float32(i) / 7
	}
	return &State{
		Params: m.Params.Data, Optim: map[string][]float32{"momentum_buffer": mom},
		Step: step, Epoch: 2, StepInEpoch: 9,
		Meta: map[string]string{"model": m.Config.String()},
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := testModel(t, 4)
	s := testState(m, 1234)
	path, err := Save(dir, m.Params, s)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "step-00001234.safetensors" {
		t.Errorf("named %s", path)
	}
	m2 := testModel(t, 4)
	clear(m2.Params.Data)
	got := &State{Params: m2.Params.Data, Optim: map[string][]float32{"momentum_buffer": make([]float32, m2.Params.Len())}}
	if err := Load(path, m2.Params, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(got.Params), Bytes(s.Params)) || !bytes.Equal(Bytes(got.Optim["momentum_buffer"]), Bytes(s.Optim["momentum_buffer"])) {
		t.Error("buffers differ after the round trip")
	}
	if got.Step != 1234 || got.Epoch != 2 || got.StepInEpoch != 9 || got.Meta["model"] != m.Config.String() {
		t.Errorf("position %d/%d/%d meta %v", got.Step, got.Epoch, got.StepInEpoch, got.Meta)
	}
	// The same state gives the same bytes.
	again, err := Save(t.TempDir(), m.Params, s)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("saving the same state twice gave different files")
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries", len(entries))
	}
}

func TestCheckpointRejects(t *testing.T) {
	dir := t.TempDir()
	m := testModel(t, 4)
	path, err := Save(dir, m.Params, testState(m, 7))
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	load := func(b []byte, mm *model.Model) error {
		p := filepath.Join(t.TempDir(), "step-00000007.safetensors")
		os.WriteFile(p, b, 0o644)
		s := &State{Params: mm.Params.Data, Optim: map[string][]float32{"momentum_buffer": make([]float32, mm.Params.Len())}}
		before := bytes.Clone(Bytes(mm.Params.Data))
		err := Load(p, mm.Params, s)
		// A refused file leaves the live buffers as they were (--resume
		// then tries an older checkpoint into the same buffers).
		if err != nil && !bytes.Equal(before, Bytes(mm.Params.Data)) {
			t.Errorf("a refused checkpoint (%v) changed the parameters", err)
		}
		return err
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-3] ^= 0x10
	otherClasses, err := model.Build(model.Config{Kind: "mlp", Hidden: []int{4}, Input: [3]int{1, 2, 2}, Classes: 5})
	if err != nil {
		t.Fatal(err)
	}
	otherClasses.Init(3)
	for _, tc := range []struct {
		name string
		b    []byte
		m    *model.Model
		want string
	}{
		{"flipped data byte", flipped, m, "checksum mismatch"},
		{"truncated", good[:len(good)-10], m, "not a valid safetensors file"},
		{"empty", nil, m, "not a valid safetensors file"},
		{"not safetensors", []byte("this is a text file, not a checkpoint"), m, "not a valid safetensors file"},
		{"other model", good, testModel(t, 5), "this model has"},
		{"deeper model", good, testModel(t, 4, 4), "this model and optimizer have"},
		{"other classes", good, otherClasses, "this model has"}, // first layer matches: nothing may be copied
	} {
		err := load(tc.b, tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "checkpoint ") {
			t.Errorf("%s: %v, want an error naming the file with %q", tc.name, err, tc.want)
		}
	}
}

func TestListAndPrune(t *testing.T) {
	dir := t.TempDir()
	m := testModel(t, 4)
	for _, step := range []int{300, 20, 100000000, 100} {
		if _, err := Save(dir, m.Params, testState(m, step)); err != nil {
			t.Fatal(err)
		}
	}
	// Strays a crash or a user may leave: ignored.
	os.WriteFile(filepath.Join(dir, ".step-00000400.safetensors.tmp-123"), []byte("torn"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
	paths, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := "step-00000020.safetensors step-00000100.safetensors step-00000300.safetensors step-100000000.safetensors"
	if strings.Join(names, " ") != want {
		t.Errorf("listed %v", names)
	}
	if err := Prune(dir, 2); err != nil {
		t.Fatal(err)
	}
	paths, _ = List(dir)
	if len(paths) != 2 || filepath.Base(paths[0]) != "step-00000300.safetensors" {
		t.Errorf("after pruning to 2: %v", paths)
	}
	if none, err := List(filepath.Join(dir, "missing")); err != nil || none != nil {
		t.Errorf("missing dir: %v %v", none, err)
	}
}
