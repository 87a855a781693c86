package trainer

import (
	"fmt"
	"syscall"

	"train/mpi"
)

// gridReport ends a model-parallel run with a line per rank on rank 0:
// where the rank sits on the grid, the memory its part holds (parameters
// with their gradients, optimizer state, activations of the micro-batches
// held at once, and the process's peak resident memory), and, on a
// pipeline, the fraction of the schedule it spent waiting, beside GPipe's
// bubble (P-1)/(M+P-1).
func (s *Session) gridReport() error {
	e, ok := s.exec.(*pipeExecutor)
	if !ok {
		return nil
	}
	const k = 8
	n := s.Job.Size()
	v := make([]float64, k*n)
	params, opt, acts, idle, slots := e.usage()
	at := s.grid.At
	row := v[k*s.Job.Rank():]
	copy(row, []float64{float64(at.D), float64(at.P), float64(at.T), float64(params), float64(opt), float64(acts), idle, float64(slots)})
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // Maxrss: the peak, in KiB on Linux
	rss := ru.Maxrss * 1024
	s.prog.enter(opLog)
	err := s.Job.AllreduceFloat64(v, mpi.Sum)
	s.prog.leave()
	if err != nil {
		return err
	}
	rssAll := make([]float64, n)
	rssAll[s.Job.Rank()] = float64(rss)
	if err := s.Job.AllreduceFloat64(rssAll, mpi.Sum); err != nil {
		return err
	}
	g := s.grid
	m := max(s.Cfg.Data.MicroBatches, 1)
	bubble := float64(g.P-1) / float64(m+g.P-1)
	for r := range n {
		x := v[k*r : k*r+k]
		line := fmt.Sprintf("grid: rank %d (d %d, stage %d, shard %d): parameters+gradients %s, optimizer %s, activations %s (%d micro-batch(es) held), peak RSS %s",
			r, int(x[0]), int(x[1]), int(x[2]), mib1(x[3]), mib1(x[4]), mib1(x[5]), int(x[7]), mib1(rssAll[r]))
		if g.P > 1 {
			line += fmt.Sprintf("; idle %.1f%% of the schedule (the bubble (P-1)/(M+P-1) = %.1f%%)", 100*x[6], 100*bubble)
		}
		s.rep.say("%s\n", line)
	}
	return nil
}

func mib1(b float64) string { return fmt.Sprintf("%.2f MiB", b/(1<<20)) }
