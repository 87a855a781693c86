package checkpoint_test

import (
	"fmt"
	"testing"

	"train/checkpoint/fuzz"
	"train/model"
)

// TestFuzzLayout: the layout FuzzLoadCheckpoint loads into, written out
// by hand in package fuzz, is the one model.Build gives its configuration
// (the seed corpus was written by such a model), tensor by tensor.
func TestFuzzLayout(t *testing.T) {
	cfg := model.Config{Kind: "mlp", Hidden: []int{3}, Input: [3]int{1, 2, 2}, Classes: 2}
	m, err := model.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Config.String(); got != fuzz.MLPConfig {
		t.Errorf("model.Config.String() = %s, fuzz.MLPConfig = %s", got, fuzz.MLPConfig)
	}
	want, got := m.Params, fuzz.MLP()
	if fmt.Sprint(got.Tensors) != fmt.Sprint(want.Tensors) || len(got.BufferTensors) != len(want.BufferTensors) {
		t.Errorf("fuzz.MLP():\n%v\nmodel.Build:\n%v", got.Tensors, want.Tensors)
	}
}
