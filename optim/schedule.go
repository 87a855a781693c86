package optim

import (
	"fmt"
	"math"
	"strings"
)

// Schedule gives the learning rate along training, by sample position: a
// linear warm-up over the first Warmup steps, then constant, step
// (multiplied by Gamma every StepSize steps, torch's StepLR) or a cosine
// decay to zero at step Total (Loshchilov and Hutter 2017, SGDR, without
// restarts). Its lengths are planned steps of Batch samples each (the
// global batch the run was planned with); positions are samples.
//
// The rate depends on the sample position alone, not on the step number:
// a run resumed with another number of ranks or batch size (another
// number of samples per step) continues on the curve the run it continues
// was on, and a run resumed with the same ones takes exactly the rates an
// uninterrupted one would have. Total is the planned length of the run
// (its epochs), not where --max-steps stops it. With Batch 1 and one
// sample per step, positions are step numbers.
type Schedule struct {
	Kind     string // "constant", "step" or "cosine"
	Base     float64
	Warmup   int     // steps
	Total    int     // steps
	StepSize int     // steps between decays of "step"
	Gamma    float64 // factor of each decay of "step"
	Batch    int64   // samples per step of these lengths (0 counts as 1)
}

// Schedules lists the kinds of Schedule.
var Schedules = []string{"constant", "step", "cosine"}

// Validate checks the kind and the lengths.
func (s Schedule) Validate() error {
	switch s.Kind {
	case "constant", "cosine":
	case "step":
		if s.StepSize <= 0 || !(s.Gamma > 0) {
			return fmt.Errorf("--lr-schedule step needs --lr-step-epochs > 0 and --lr-gamma > 0")
		}
	default:
		return fmt.Errorf("unknown --lr-schedule %q: choose one of %s", s.Kind, strings.Join(Schedules, ", "))
	}
	if s.Warmup < 0 {
		return fmt.Errorf("--warmup-steps %d: must not be negative", s.Warmup)
	}
	return nil
}

// At is the rate of the step that covers samples [p, p+g) (p samples
// were used before it, g is its global batch). In the warm-up that is
// Base (p+g)/(Warmup Batch), reaching Base at the warm-up's last step;
// after it, the decay at p. At Batch samples per step, (p+g)/Batch is the
// step count exactly, so the arithmetic is a per-step schedule's, bit for
// bit.
func (s Schedule) At(p, g int64) float64 {
	b := max(s.Batch, 1)
	w := int64(s.Warmup) * b
	if p < w {
		return s.Base * (float64(p+g) / float64(b)) / float64(s.Warmup)
	}
	if s.Kind == "step" {
		return s.Base * math.Pow(s.Gamma, float64((p-w)/(int64(s.StepSize)*b)))
	}
	total := int64(s.Total) * b
	if s.Kind != "cosine" || total <= w {
		return s.Base
	}
	t := float64(p-w) / float64(total-w)
	if t > 1 {
		t = 1
	}
	return s.Base * 0.5 * (1 + math.Cos(math.Pi*t))
}
