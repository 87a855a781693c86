package main

import (
	"os"
	"testing"

	"github.com/urfave/cli/v2"

	"train/trainer"
)

// configOf is trainConfig for a command line of training flags.
func configOf(t *testing.T, args ...string) trainer.Config {
	t.Helper()
	var cfg trainer.Config
	app := &cli.App{Flags: trainFlags, Action: func(c *cli.Context) error {
		var err error
		cfg, err = trainConfig(c)
		return err
	}}
	if err := app.Run(append([]string{"train"}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cfg
}

// TestLRDefault: --lr's default follows --optimizer (PyTorch's Adam and
// AdamW default, 1e-3; SGD's 0.05), and a rate given on the command line
// or in TRAIN_LR is kept whatever the optimizer.
func TestLRDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want float64
	}{
		{[]string{"--model", "mlp"}, "", 0.05},
		{[]string{"--optimizer", "sgd"}, "", 0.05},
		{[]string{"--optimizer", "adam"}, "", 1e-3},
		{[]string{"--model", "gpt", "--optimizer", "adamw"}, "", 1e-3},
		{[]string{"--optimizer", "adamw", "--lr", "0.05"}, "", 0.05},
		{[]string{"--optimizer", "adamw"}, "6e-4", 6e-4},
		{[]string{"--optimizer", "sgd", "--lr", "0.2"}, "", 0.2},
	} {
		t.Setenv("TRAIN_LR", c.env) // put back when the test ends
		if c.env == "" {
			os.Unsetenv("TRAIN_LR")
		}
		if got := configOf(t, c.args...).Optim.LR; got != c.want {
			t.Errorf("%v (TRAIN_LR %q): --lr %g, want %g", c.args, c.env, got, c.want)
		}
	}
}
