package trainer

import (
	"fmt"
	"strconv"
	"strings"
)

// planBatch turns --global-batch and --accum-steps into what a step runs
// on each of d data-parallel replicas: BatchSize becomes the samples one
// optimizer step takes on a rank and MicroBatches the micro-steps they are
// run in (exec_micro.go sums their gradients and lets the strategy
// communicate in the last one only). A step is one optimizer step
// everywhere: the log, --max-steps, checkpoints and the schedule count
// these.
//
//   - --global-batch G: each replica takes G/d samples per step, in the
//     --accum-steps K micro-steps given, or with auto in the fewest whose
//     micro-batch fits in --batch-size;
//   - --accum-steps K alone: K micro-steps of --batch-size.
func (d *DataOptions) planBatch(replicas int) error {
	k := d.AccumSteps
	if d.GlobalBatch == 0 {
		if k > 1 {
			d.BatchSize, d.MicroBatches = k*d.BatchSize, k
		}
		return nil
	}
	g := d.GlobalBatch
	if g%replicas != 0 {
		return fmt.Errorf("--global-batch %d does not split over %d data-parallel replicas: run on a number of replicas that divides it (%s)", g, replicas, divisors(g, 24))
	}
	per := g / replicas
	switch {
	case k == AccumAuto:
		k = 0
		for c := 1; c <= per; c++ {
			if per%c == 0 && per/c <= d.BatchSize {
				k = c
				break
			}
		}
	case per%max(k, 1) != 0:
		return fmt.Errorf("--accum-steps %d does not divide the %d samples each of %d replicas takes of --global-batch %d: use one of %s, or auto", k, per, replicas, g, divisors(per, 24))
	case per/max(k, 1) > d.BatchSize:
		return fmt.Errorf("--accum-steps %d: micro-batches of %d samples (--global-batch %d over %d replicas) exceed --batch-size %d; use more micro-steps, or auto", k, per/k, g, replicas, d.BatchSize)
	}
	d.BatchSize, d.MicroBatches = per, max(k, 1)
	return nil
}

// divisors lists n's divisors, at most max of them.
func divisors(n, most int) string {
	var out []string
	for c := 1; c <= n && len(out) < most; c++ {
		if n%c == 0 {
			out = append(out, strconv.Itoa(c))
		}
	}
	if len(out) == most {
		out = append(out, "...")
	}
	return strings.Join(out, ", ")
}
