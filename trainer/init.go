package trainer

import (
	"fmt"

	"train/checkpoint"
	"train/data"
	"train/model"
)

// WriteInit writes the initial parameters and buffers of the model cfg
// describes (drawn from cfg.Seed, sized for cfg's data) to path as a
// step-0 checkpoint: the weights a run starts from, for PyTorch or for
// reference tests. No MPI is involved.
func WriteInit(cfg Config, path string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	train, _, err := data.Load(data.Source{Dir: cfg.DataDir, SyntheticShape: cfg.SyntheticShape, SyntheticSamples: max(cfg.SyntheticSamples, 1), Seed: cfg.Seed})
	if err != nil {
		return fmt.Errorf("--data %s: %v", cfg.DataDir, err)
	}
	m, err := model.Build(model.Config{Kind: cfg.Model, Hidden: cfg.Hidden, Depth: cfg.Depth,
		Input: [3]int{train.C, train.H, train.W}, Classes: train.Classes})
	if err != nil {
		return err
	}
	if cfg.Model != "resnet" {
		m.Config.Depth = 0
	}
	m.Init(cfg.Seed)
	s := &checkpoint.State{Params: m.Params.Data, Buffers: m.Params.Buffers, Meta: map[string]string{
		"model": m.Config.String(), "seed": fmt.Sprint(cfg.Seed)}}
	return checkpoint.Write(path, m.Params, s)
}
