package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"train/checkpoint"
	"train/model"
)

// checkpointCommand holds the checkpoint tools.
var checkpointCommand = &cli.Command{
	Name:  "checkpoint",
	Usage: "checkpoint tools",
	Subcommands: []*cli.Command{{
		Name:      "consolidate",
		Usage:     "join a sharded checkpoint (--checkpoint-format sharded) into one safetensors file, as --checkpoint-format single writes it (PyTorch loads it; --resume reads it)",
		UsageText: "train checkpoint consolidate ck/step-00001000 -o model.safetensors",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "safetensors file to write"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("train checkpoint consolidate: name one sharded checkpoint directory (DIR/step-NNNNNNNN)")
			}
			return consolidate(c.Args().First(), c.String("output"))
		},
	}},
}

// consolidate reads the sharded checkpoint dir whole (the model its index
// names, built with storage here) and writes it as one file.
func consolidate(dir, out string) error {
	if !checkpoint.IsSharded(dir) {
		return fmt.Errorf("%s: not a sharded checkpoint directory (DIR/step-NNNNNNNN with an %s)", dir, checkpoint.IndexName)
	}
	x, err := checkpoint.ReadIndex(dir)
	if err != nil {
		return err
	}
	var cfg model.Config
	if err := json.Unmarshal([]byte(x.Metadata["model"]), &cfg); err != nil {
		return fmt.Errorf("checkpoint %s: the index's model %q: %v", dir, x.Metadata["model"], err)
	}
	m, err := model.Build(cfg)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %v", dir, err)
	}
	p := m.Params
	st := checkpoint.State{Params: p.Data, Buffers: p.Buffers, Optim: map[string][]float32{}}
	for name := range x.Tensors { // optimizer.<buffer>.<tensor>
		if rest, ok := strings.CutPrefix(name, "optimizer."); ok {
			if buf, _, ok := strings.Cut(rest, "."); ok && st.Optim[buf] == nil {
				st.Optim[buf] = make([]float32, p.Len())
			}
		}
	}
	if err := checkpoint.LoadShards(dir, p, &st); err != nil {
		return err
	}
	return checkpoint.Write(out, p, &st)
}
