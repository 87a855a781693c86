package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"train/checkpoint"
	"train/model"
	"train/openblas"
	"train/tokenizer"
)

// generateCommand samples text from a trained GPT.
var generateCommand = &cli.Command{
	Name:  "generate",
	Usage: "sample text from a GPT checkpoint: temperature and top-k, seeded, one token at a time with a KV cache",
	UsageText: "train generate --checkpoint DIR|FILE --prompt TEXT [--tokens 100] [--temperature 0.8] [--top-k 40] [--seed 1]\n" +
		"DIR takes its newest checkpoint. Generation stops after --tokens tokens or at <|endoftext|>; past the\n" +
		"context, the window slides (the newer half is fed again).",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "checkpoint", Required: true, Usage: "a train checkpoint (or train init file), or a --checkpoint-dir (its newest)"},
		&cli.StringFlag{Name: "prompt", Usage: "text to continue (GPT-2's BPE starts from <|endoftext|> as training documents do, so it may be empty)"},
		&cli.IntFlag{Name: "tokens", Value: 100, Usage: "tokens to generate"},
		&cli.Float64Flag{Name: "temperature", Value: 0.8, Usage: "divide the logits by this before the softmax (0: always the likeliest token)"},
		&cli.IntFlag{Name: "top-k", Value: 40, Usage: "draw among the k likeliest tokens only (0: all)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the draws: the same seed gives the same text"},
		&cli.StringFlag{Name: "tokenizer", Usage: "gpt2 or bytes (default: the one the checkpoint names, or its vocabulary's)"},
	},
	Action: func(c *cli.Context) error {
		if c.Int("tokens") < 0 || c.Float64("temperature") < 0 || c.Int("top-k") < 0 {
			return fmt.Errorf("--tokens %d --temperature %v --top-k %d: none may be negative", c.Int("tokens"), c.Float64("temperature"), c.Int("top-k"))
		}
		path, err := newest(c.String("checkpoint"))
		if err != nil {
			return err
		}
		m, meta, err := loadGPT(path)
		if err != nil {
			return err
		}
		name := c.String("tokenizer")
		if name == "" {
			name = tokenizerOf(meta, m.Config.GPT.Vocab)
		}
		tk, err := tokenizer.New(name)
		if err != nil {
			return fmt.Errorf("--tokenizer %q: %v", name, err)
		}
		if tk.Vocab() != m.Config.GPT.Vocab {
			return fmt.Errorf("--tokenizer %s has %d tokens, the model in %s predicts %d: pass the tokenizer it was trained with", name, tk.Vocab(), path, m.Config.GPT.Vocab)
		}
		var ids []int
		if eot := tk.EOT(); eot >= 0 {
			ids = append(ids, eot)
		}
		ids = append(ids, tk.Encode(c.String("prompt"))...)
		if len(ids) == 0 {
			return fmt.Errorf("--prompt is empty and the %s vocabulary has no start token: give some text to continue", name)
		}
		openblas.Load("", 1) // if it does not load, gonum's Go BLAS computes the same, slower
		start := time.Now()
		out, stop, err := sample(m, ids, c.Int("tokens"), c.Float64("temperature"), c.Int("top-k"), c.Uint64("seed"), tk.EOT())
		if err != nil {
			return err
		}
		text := tk.Decode(out)
		fmt.Fprint(c.App.Writer, c.String("prompt")+text)
		if text == "" || text[len(text)-1] != '\n' {
			fmt.Fprintln(c.App.Writer)
		}
		took := time.Since(start)
		fmt.Fprintf(c.App.ErrWriter, "generate: %d tokens in %.2f s (%.1f tokens/s) from %s%s\n", len(out), took.Seconds(), float64(len(out))/took.Seconds(), path, stop)
		return nil
	},
}

// sample continues ids with up to n tokens, stopping at eot (if any).
func sample(m *model.Model, ids []int, n int, temperature float64, topK int, seed uint64, eot int) ([]int, string, error) {
	g, err := m.NewGenerator()
	if err != nil {
		return nil, "", err
	}
	ctx := m.Config.GPT.Context
	if len(ids) > ctx {
		ids = ids[len(ids)-ctx:]
	}
	rng := rand.New(rand.NewPCG(seed, 0x67656e))
	var logits []float32
	feed := func(window []int) {
		g.Reset()
		for _, id := range window {
			logits = g.Next(id)
		}
	}
	feed(ids)
	seq := append([]int{}, ids...)
	var out []int
	for len(out) < n {
		id := model.Sample(logits, temperature, topK, rng)
		if id == eot {
			return out, " (stopped at <|endoftext|>)", nil
		}
		out, seq = append(out, id), append(seq, id)
		if len(out) == n {
			break
		}
		if g.Len() == ctx { // slide: keep the newer half, positions from 0 again
			feed(seq[len(seq)-ctx/2:])
			continue
		}
		logits = g.Next(id)
	}
	return out, "", nil
}

// newest is path, or the newest checkpoint in it when it is a directory.
func newest(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--checkpoint: %v", err)
	}
	if !st.IsDir() {
		return path, nil
	}
	paths, err := checkpoint.List(path)
	if err != nil {
		return "", fmt.Errorf("--checkpoint %s: %v", path, err)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("--checkpoint %s: no step-*.safetensors checkpoint in it", path)
	}
	return paths[len(paths)-1], nil
}

// loadGPT builds the model a checkpoint's metadata describes and reads its
// weights.
func loadGPT(path string) (*model.Model, map[string]string, error) {
	meta, err := checkpoint.Metadata(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--checkpoint %s: %v", path, err)
	}
	var cfg model.Config
	if err := json.Unmarshal([]byte(meta["model"]), &cfg); err != nil || cfg.GPT == nil {
		return nil, nil, fmt.Errorf("--checkpoint %s: not a GPT written by train (its metadata names model %q)", path, meta["model"])
	}
	m, err := model.Build(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--checkpoint %s: %v", path, err)
	}
	p := m.Params
	if err := checkpoint.LoadWeights(path, p, p.Data, p.Buffers, nil, nil); err != nil {
		return nil, nil, fmt.Errorf("--checkpoint %w", err)
	}
	return m, meta, nil
}

// tokenizerOf is the tokenizer a checkpoint names, or the one its
// vocabulary implies (files from before the name was saved).
func tokenizerOf(meta map[string]string, vocab int) string {
	if t := meta["tokenizer"]; t != "" {
		return t
	}
	if vocab == 256 {
		return "bytes"
	}
	return "gpt2"
}
