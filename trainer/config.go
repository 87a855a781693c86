package trainer

import (
	"fmt"
	"strings"

	"train/optim"
)

// Config is everything a training run is told, filled from flags in main.
type Config struct {
	Model           string
	Hidden          []int
	DataDir         string
	BatchSize       int // per rank
	Epochs          int
	MaxSteps        int // 0: no limit
	LR              float64
	LRSchedule      string
	WarmupSteps     int
	Momentum        float64
	WeightDecay     float64
	Seed            uint64
	Allreduce       string
	BucketMB        float64 // gradient bucket size; 0: one bucket
	Overlap         bool    // allreduce buckets during backward
	CheckpointDir   string
	CheckpointEvery int // steps; 0: only at the end
	Keep            int // checkpoints kept; 0: all
	Resume          bool
	LogEvery        int
	EvalBatch       int
	// Fault, for tests: "RANK:STEP:KIND", see fault.go.
	Fault string
}

// Allreduces lists the gradient allreduce algorithms.
var Allreduces = []string{"ring", "mpi"}

// Validate checks what can be checked without data or MPI.
func (c *Config) Validate() error {
	switch {
	case c.BatchSize <= 0:
		return fmt.Errorf("--batch-size %d: must be positive", c.BatchSize)
	case c.Epochs <= 0:
		return fmt.Errorf("--epochs %d: must be positive", c.Epochs)
	case c.MaxSteps < 0:
		return fmt.Errorf("--max-steps %d: must be 0 (no limit) or positive", c.MaxSteps)
	case !(c.LR > 0):
		return fmt.Errorf("--lr %v: must be positive", c.LR)
	case c.Momentum < 0 || c.Momentum >= 1:
		return fmt.Errorf("--momentum %v: must be in [0, 1)", c.Momentum)
	case c.WeightDecay < 0:
		return fmt.Errorf("--weight-decay %v: must not be negative", c.WeightDecay)
	case c.CheckpointEvery < 0:
		return fmt.Errorf("--checkpoint-every %d: must not be negative", c.CheckpointEvery)
	case c.Keep < 0:
		return fmt.Errorf("--keep %d: must not be negative", c.Keep)
	case c.BucketMB < 0:
		return fmt.Errorf("--bucket-mb %v: must not be negative", c.BucketMB)
	case c.LogEvery <= 0:
		return fmt.Errorf("--log-every %d: must be positive", c.LogEvery)
	case c.Resume && c.CheckpointDir == "":
		return fmt.Errorf("--resume needs --checkpoint-dir")
	}
	if c.EvalBatch <= 0 {
		c.EvalBatch = 1000
	}
	ok := false
	for _, a := range Allreduces {
		ok = ok || a == c.Allreduce
	}
	if !ok {
		return fmt.Errorf("unknown --allreduce %q: choose one of %s", c.Allreduce, strings.Join(Allreduces, ", "))
	}
	if err := (optim.Schedule{Kind: c.LRSchedule, Warmup: c.WarmupSteps}).Validate(); err != nil {
		return err
	}
	if _, err := parseFault(c.Fault); err != nil {
		return err
	}
	return nil
}
