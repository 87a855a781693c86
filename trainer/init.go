package trainer

import (
	"fmt"

	"train/checkpoint"
)

// WriteInit writes the initial parameters and buffers of the model cfg
// describes (drawn from --seed, sized for cfg's data) to path as a step-0
// checkpoint: the weights a run starts from, for PyTorch or for reference
// tests. It builds the session a run would (NewSession, without MPI or a
// device) and saves its initial state.
//
// Only the data's shape and classes reach the parameters, so synthetic
// data is made no longer than one batch: 50,000 images of 3x64x64 (the
// default count) took 3.5 of `train init`'s 4 s for ResNet-18, and 700
// MB.
func WriteInit(cfg Config, path string) error {
	if cfg.Data.Dir == "synthetic" {
		cfg.Data.SyntheticSamples = min(cfg.Data.SyntheticSamples, max(cfg.Data.BatchSize, 1))
	}
	s, err := NewSession(nil, cfg, Options{Local: true})
	if err != nil {
		return err
	}
	s.Model.Init(s.Cfg.Optim.Seed)
	st := &checkpoint.State{Params: s.Model.Params.Data, Buffers: s.Model.Params.Buffers, Meta: map[string]string{
		"model": s.Model.Config.String(), "seed": fmt.Sprint(s.Cfg.Optim.Seed)}}
	if s.tokenizer != "" {
		st.Meta["tokenizer"] = s.tokenizer
	}
	return checkpoint.Write(path, s.Model.Params, st)
}
