package trainer

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"train/gpu"
)

// The options that are choices, as types: main parses each flag's value
// with its Parse function, so a misspelt choice fails before MPI starts
// and the code compares types, never strings.

// A choice is an option with a fixed set of spellings; its type's zero
// value is the first of them.
type choice interface {
	~uint8
	names() []string
}

// parseChoice reads flag's value s as one of T's spellings.
func parseChoice[T choice](flag, s string) (T, error) {
	var zero T
	for i, n := range zero.names() {
		if n == s {
			return T(i), nil
		}
	}
	return zero, fmt.Errorf("--%s %q: choose %s", flag, s, orList(zero.names()))
}

func nameOf[T choice](v T) string {
	if n := v.names(); int(v) < len(n) {
		return n[v]
	}
	return fmt.Sprintf("choice(%d)", uint8(v))
}

func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// StrategyKind is --strategy: how replicas stay in step.
type StrategyKind uint8

// The strategies (strategy.go registers their implementations).
const (
	AllreduceStrategy StrategyKind = iota
	LocalSGD
	PSSync
	PSAsync
)

func (StrategyKind) names() []string {
	return []string{"allreduce", "local-sgd", "ps-sync", "ps-async"}
}
func (s StrategyKind) String() string { return nameOf(s) }

// ParseStrategy reads --strategy.
func ParseStrategy(s string) (StrategyKind, error) { return parseChoice[StrategyKind]("strategy", s) }

// servers reports whether the strategy has parameter servers.
func (s StrategyKind) servers() bool { return s == PSSync || s == PSAsync }

// Algorithm is --allreduce: how gradients (or local SGD's replicas) are
// averaged.
type Algorithm uint8

// The allreduce algorithms.
const (
	Ring Algorithm = iota
	MPIAllreduce
	Hier
	NCCL
)

func (Algorithm) names() []string  { return []string{"ring", "mpi", "hier", "nccl"} }
func (a Algorithm) String() string { return nameOf(a) }

// ParseAlgorithm reads --allreduce.
func ParseAlgorithm(s string) (Algorithm, error) { return parseChoice[Algorithm]("allreduce", s) }

// BNMode is --bn: BatchNorm statistics over all ranks or per rank.
type BNMode uint8

// The BatchNorm modes; BNAuto is sync for the strategies that step in
// unison (allreduce, ps-sync) and local for those that do not.
const (
	BNAuto BNMode = iota
	BNSync
	BNLocal
)

func (BNMode) names() []string  { return []string{"auto", "sync", "local"} }
func (b BNMode) String() string { return nameOf(b) }

// ParseBN reads --bn.
func ParseBN(s string) (BNMode, error) { return parseChoice[BNMode]("bn", s) }

// Schedule is --schedule: the order a pipeline stage runs its
// micro-batches' forwards and backwards in (exec_pipe.go).
type Schedule uint8

// The pipeline schedules: GPipe (Huang et al. 2019) runs every forward,
// then every backward; 1F1B (PipeDream-flush, Narayanan et al. 2021)
// alternates once the pipeline is full, holding at most P micro-batches'
// activations instead of M.
const (
	OneFOneB Schedule = iota
	GPipe
)

func (Schedule) names() []string  { return []string{"1f1b", "gpipe"} }
func (s Schedule) String() string { return nameOf(s) }

// ParseSchedule reads --schedule.
func ParseSchedule(s string) (Schedule, error) { return parseChoice[Schedule]("schedule", s) }

// CheckpointFormat is --checkpoint-format: one safetensors file of the
// whole model written by rank 0 (gathered from the parts on a grid), or a
// directory in which every part writes its own file and rank 0 an index
// (checkpoint/sharded.go).
type CheckpointFormat uint8

const (
	SingleFile CheckpointFormat = iota
	Sharded
)

func (CheckpointFormat) names() []string  { return []string{"single", "sharded"} }
func (f CheckpointFormat) String() string { return nameOf(f) }

// ParseCheckpointFormat reads --checkpoint-format.
func ParseCheckpointFormat(s string) (CheckpointFormat, error) {
	return parseChoice[CheckpointFormat]("checkpoint-format", s)
}

// Device is --device.
type Device uint8

// The devices (executor.go registers their executors).
const (
	CPU Device = iota
	CUDA
)

func (Device) names() []string  { return []string{"cpu", "cuda"} }
func (d Device) String() string { return nameOf(d) }

// ParseDevice reads --device.
func ParseDevice(s string) (Device, error) { return parseChoice[Device]("device", s) }

// Progress is --progress: rank 0's live progress bar.
type Progress uint8

// The progress-bar modes: auto shows it on a terminal that no launcher
// gave us.
const (
	ProgressAuto Progress = iota
	ProgressAlways
	ProgressNever
)

func (Progress) names() []string  { return []string{"auto", "always", "never"} }
func (p Progress) String() string { return nameOf(p) }

// ParseProgress reads --progress.
func ParseProgress(s string) (Progress, error) { return parseChoice[Progress]("progress", s) }

// ParsePrecision reads --precision.
func ParsePrecision(s string) (gpu.Precision, error) {
	switch s {
	case "fp32", "tf32", "bf16":
		return gpu.Precision(s), nil
	}
	return "", fmt.Errorf("--precision %q: choose fp32, tf32 or bf16", s)
}

// ParseLRScaling reads --lr-scaling: whether the rate is multiplied by the
// number of data-parallel ranks.
func ParseLRScaling(s string) (bool, error) {
	switch s {
	case "none":
		return false, nil
	case "linear":
		return true, nil
	}
	return false, fmt.Errorf("--lr-scaling %q: choose none or linear", s)
}

func (a Augment) String() string {
	switch {
	case a.Auto:
		return "auto"
	case a.Crop && a.Flip:
		return "crop,flip"
	case a.Crop:
		return "crop"
	case a.Flip:
		return "flip"
	}
	return "none"
}

// Augment is --augment: which training augmentations run.
type Augment struct {
	Auto       bool // crop and flip for the convolutional networks, nothing for the MLP
	Crop, Flip bool
}

// ParseAugment reads --augment: auto, none, or crop and/or flip.
func ParseAugment(s string) (Augment, error) {
	switch s {
	case "auto":
		return Augment{Auto: true}, nil
	case "none", "":
		return Augment{}, nil
	}
	var a Augment
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "crop":
			a.Crop = true
		case "flip":
			a.Flip = true
		default:
			return Augment{}, fmt.Errorf("--augment %q: want auto, none, or crop and/or flip (comma-separated)", s)
		}
	}
	return a, nil
}

// Buckets is --bucket-mb: the gradient buckets' size cap, or auto.
type Buckets struct {
	MiB  float64 // 0: one bucket
	Auto bool    // try sizes in the first steps, keep the fastest
}

// ParseBuckets reads --bucket-mb: a size in MiB, or auto.
func ParseBuckets(s string) (Buckets, error) {
	if s == "auto" {
		return Buckets{Auto: true}, nil
	}
	v, err := parseFloat(s)
	if err != nil || v < 0 {
		return Buckets{}, fmt.Errorf("--bucket-mb %q: want a size in MiB (0: one bucket) or auto", s)
	}
	return Buckets{MiB: v}, nil
}

func parseFloat(s string) (float64, error) {
	var v float64
	_, err := fmt.Sscan(s, &v)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = fmt.Errorf("not finite")
	}
	return v, err
}

// Bytes is the cap in bytes.
func (b Buckets) Bytes() int { return int(b.MiB * (1 << 20)) }

// ParseAccumSteps reads --accum-steps: a positive count, or auto
// (AccumAuto).
func ParseAccumSteps(s string) (int, error) {
	if s == "auto" {
		return AccumAuto, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 {
		return 0, fmt.Errorf("--accum-steps %q: a positive number of micro-steps, or auto", s)
	}
	return k, nil
}

// ParseChannels reads a per-channel value of the option named: three
// numbers, comma-separated (R,G,B).
func ParseChannels(option string) func(string) ([3]float32, error) {
	return func(s string) ([3]float32, error) {
		var v [3]float32
		parts := strings.Split(s, ",")
		if len(parts) != 3 {
			return v, fmt.Errorf("%s %q: want three numbers, R,G,B", option, s)
		}
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return v, fmt.Errorf("%s %q: want three numbers, R,G,B", option, s)
			}
			v[i] = float32(f)
		}
		return v, nil
	}
}
