package optim

import (
	"fmt"
	"math"
	"strings"
)

// Schedule gives the learning rate at each step: a linear warm-up from
// Base/Warmup to Base over the first Warmup steps, then constant, step
// (multiplied by Gamma every StepSize steps, torch's StepLR) or a cosine
// decay to zero at step Total (Loshchilov and Hutter 2017, SGDR, without
// restarts).
//
// The rate depends on the step number alone, so a resumed run continues
// with exactly the rates an uninterrupted one would have used. Total is
// the planned length of the run (its epochs), not where --max-steps stops
// it.
type Schedule struct {
	Kind     string // "constant", "step" or "cosine"
	Base     float64
	Warmup   int
	Total    int
	StepSize int     // steps between decays of "step"
	Gamma    float64 // factor of each decay of "step"
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

// At is the learning rate for step (0-based: the update that makes step+1).
func (s Schedule) At(step int) float64 {
	if step < s.Warmup {
		return s.Base * float64(step+1) / float64(s.Warmup)
	}
	if s.Kind == "step" {
		return s.Base * math.Pow(s.Gamma, float64((step-s.Warmup)/s.StepSize))
	}
	if s.Kind != "cosine" || s.Total <= s.Warmup {
		return s.Base
	}
	t := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	if t > 1 {
		t = 1
	}
	return s.Base * 0.5 * (1 + math.Cos(math.Pi*t))
}
