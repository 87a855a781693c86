package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitRefusesTrainingOptions: train init takes the training flags
// (the model is built as training builds it) but acts only on those that
// shape the model or draw its values; any other given on its command line
// is refused in one line, before anything is written, while TRAIN_*
// variables set for the runs around it are left alone.
func TestInitRefusesTrainingOptions(t *testing.T) {
	// urfave/cli writes a TRAIN_* variable's value into the package's
	// flag itself (a process runs one command line): put it back for the
	// tests after this one.
	saved := *lrFlag
	defer func() { *lrFlag = saved }()
	dir := t.TempDir()
	small := []string{"--model", "cnn", "--data", "synthetic", "--synthetic-shape", "1x12x12", "--seed", "3"}
	for _, c := range []struct {
		extra []string
		flag  string // refused, or "" for a run that writes the file
	}{
		{[]string{"--lr", "0.1"}, "--lr"},
		{[]string{"--epochs=3"}, "--epochs"},
		{[]string{"--threads", "2"}, "--threads"},
		{[]string{"--synthetic-samples", "100"}, "--synthetic-samples"},
		{[]string{"--tensor-parallel", "2"}, "--tensor-parallel"},
		{nil, ""},
		{[]string{"BEFORE", "--log-every", "5"}, "--log-every"}, // train --log-every 5 init ...: the app's flag, read by init
	} {
		out := filepath.Join(dir, "init.safetensors")
		os.Remove(out)
		t.Setenv("TRAIN_LR", "0.3")
		var stdout, stderr bytes.Buffer
		args := append(append([]string{"train", "init"}, small...), c.extra...)
		if len(c.extra) > 0 && c.extra[0] == "BEFORE" {
			args = append(append([]string{"train"}, c.extra[1:]...), append([]string{"init"}, small...)...)
		}
		code := run(append(args, "-o", out), &stdout, &stderr)
		_, statErr := os.Stat(out)
		msg := strings.TrimSpace(stderr.String())
		if c.flag == "" {
			if code != 0 || statErr != nil {
				t.Errorf("%v: exit %d, file: %v, stderr %q", c.extra, code, statErr, msg)
			}
			continue
		}
		if code == 0 || statErr == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.flag+" does nothing for train init") {
			t.Errorf("%v: exit %d, file written: %v, stderr %q; want one line refusing %s and no file", c.extra, code, statErr == nil, msg, c.flag)
		}
	}
}

// TestSubcommandUsageOneLine: a flag a subcommand does not define is one
// line naming that command's help, not the error and the whole help text.
func TestSubcommandUsageOneLine(t *testing.T) {
	for _, cmd := range [][]string{{"init"}, {"bench", "step"}, {"data", "pack"}, {"timeline", "merge"}, {"plot"}} {
		var stdout, stderr bytes.Buffer
		code := run(append(append([]string{"train"}, cmd...), "--no-such-flag"), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		want := "(see train " + strings.Join(cmd, " ") + " --help)"
		if code == 0 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) || stdout.Len() != 0 {
			t.Errorf("%v --no-such-flag: exit %d, stderr %q, stdout %d bytes; want one line ending %s", cmd, code, msg, stdout.Len(), want)
		}
	}
}

// TestBenchRefusesIgnoredOptions: bench step and bench strategies turn
// off what writes, serves and resumes, and run --warmup and --steps; those
// options given on their command line are refused in one line before MPI
// starts (bench strategies also refuses --strategy: each row sets its
// own).
func TestBenchRefusesIgnoredOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"bench", "step", "--timeline", "t.json"}, "--timeline"},
		{[]string{"bench", "step", "--checkpoint-dir=ck"}, "--checkpoint-dir"},
		{[]string{"bench", "step", "--model", "mlp", "--max-steps", "5"}, "--max-steps"},
		{[]string{"bench", "strategies", "--strategy", "local-sgd"}, "--strategy"},
		{[]string{"bench", "strategies", "--resume"}, "--resume"},
		{[]string{"bench", "strategies", "--metrics-addr", ":9999"}, "--metrics-addr"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"train"}, c.args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		want := c.flag + " does nothing for train " + strings.Join(c.args[:2], " ")
		if code == 0 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
			t.Errorf("%v: exit %d, stderr %q; want one line %q...", c.args, code, msg, want)
		}
	}
}
