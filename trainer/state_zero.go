package trainer

import (
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"train/checkpoint"
	"train/model"
	"train/mpi"
)

// The state of a ZeRO run (exec_zero.go) where it meets checkpoints,
// broadcasts and the replica check: each rank holds the optimizer's state
// of its own shard only (and at stage 3 only its shard of the
// parameters), so what the other runs do with rank 0's whole copy is done
// here shard by shard.

// castagnoli is checkpoint.Checksum's CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// tagZero marks the point-to-point messages that bring shards to rank 0.
const tagZero = 0x2e0

// zeroInitialState starts a ZeRO run on every rank: from the newest
// checkpoint when it is sharded, each rank reading its own range from
// whichever files hold it (any np, any stage, any grid wrote them);
// otherwise the data-parallel rank 0 (of each part, on a grid) draws the
// parameters or is handed them from a single file (into whole optimizer
// buffers for the while) and gives every replica its part.
func (s *Session) zeroInitialState(bench bool) error {
	c := &s.Cfg
	var path string
	var err error
	if s.Job.Rank() == 0 && c.Checkpoint.Resume && !bench {
		path, err = s.newestSharded()
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if path, err = s.bcastString(path); err != nil {
		return err
	}
	if path != "" {
		return s.resumeZeroShards(path)
	}
	shard := s.State.Optim
	var whole map[string][]float32
	if s.W.Rank() == 0 && !bench && (c.Checkpoint.Resume || (s.grid != nil && c.Model.InitFrom != "")) {
		// A grid's transfer hands its parts the optimizer's state too.
		whole = map[string][]float32{}
		for name := range shard {
			whole[name] = make([]float32, s.Model.Params.Len())
		}
		s.State.Optim = whole
	}
	if s.grid != nil {
		err = s.gridInitialState(bench)
	} else if s.W.Rank() == 0 {
		err = s.initialState(bench)
	}
	s.State.Optim = shard
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if err := s.broadcastModel(); err != nil {
		return err
	}
	flag := []int64{0}
	if s.W.Rank() == 0 && s.State.Step > 0 {
		flag[0] = 1
	}
	if err := s.W.BcastInt64(flag, 0); err != nil {
		return err
	}
	if flag[0] == 1 {
		return s.scatterOptim(whole)
	}
	return nil
}

// bcastString gives every rank of the job rank 0's s.
func (s *Session) bcastString(v string) (string, error) {
	n := []int64{int64(len(v))}
	if err := s.Job.BcastInt64(n, 0); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	copy(b, v)
	if err := s.Job.BcastBytes(b, 0); err != nil {
		return "", err
	}
	return string(b), nil
}

// scatterOptim sends each rank its shard of rank 0's whole optimizer
// state, buffer by buffer in name order.
func (s *Session) scatterOptim(whole map[string][]float32) error {
	z, w := s.zero, s.W
	s.prog.enter(opBroadcast)
	defer s.prog.leave()
	for _, name := range slices.Sorted(maps.Keys(s.State.Optim)) {
		own := s.State.Optim[name]
		if w.Rank() != 0 {
			if err := w.RecvFloat32(own, 0, tagZero); err != nil {
				return err
			}
			continue
		}
		for r := range w.Size() {
			lo, hi := shardOf(z.n, z.size, r)
			if r == 0 {
				copy(own, whole[name][lo:hi])
			} else if err := w.SendFloat32(whole[name][lo:hi], r, tagZero); err != nil {
				return err
			}
		}
	}
	return nil
}

// resumeZeroShards resumes from the sharded checkpoint at path: every
// rank reads its own range of the parameters and optimizer state and the
// buffers (of its part, on a grid); rank 0 places the run; below stage 3
// the ring then all-gathers the parameters among the replicas.
func (s *Session) resumeZeroShards(path string) error {
	z := s.zero
	err := checkpoint.LoadRange(path, s.Model.Params, &s.State, z.lo, z.hi)
	if err := s.placeResumed(path, err); err != nil {
		return err
	}
	if z.stage == 3 {
		return nil
	}
	return s.W.RingAllgatherFloat32(s.Model.Params.Data, z.owned(0, z.n))
}

// gatherZero brings the optimizer's shards (and at stage 3 the
// parameters') to the data-parallel rank 0 (of each part, on a grid) for
// a single-file checkpoint, which returns the whole state (the others
// nil). That rank holds the whole model (or part) for the while: a model
// too big for that saves --checkpoint-format sharded.
func (s *Session) gatherZero() (*checkpoint.State, error) {
	z, w := s.zero, s.W
	st := s.State
	if w.Rank() == 0 {
		st.Optim = map[string][]float32{}
	}
	s.prog.enter(opCheckpoint)
	defer s.prog.leave()
	bufs := []string{}
	if z.stage == 3 {
		bufs = append(bufs, "") // the parameters
	}
	bufs = append(bufs, slices.Sorted(maps.Keys(s.State.Optim))...)
	for _, name := range bufs {
		own, whole := s.Model.Params.Data[z.lo:z.hi], s.Model.Params.Data
		if name != "" {
			own = s.State.Optim[name]
			if w.Rank() == 0 {
				whole = make([]float32, z.n)
				st.Optim[name] = whole
			}
		}
		if w.Rank() != 0 {
			if err := w.SendFloat32(own, 0, tagZero); err != nil {
				return nil, err
			}
			continue
		}
		for r := range w.Size() {
			lo, hi := shardOf(z.n, z.size, r)
			if r == 0 {
				copy(whole[lo:hi], own)
			} else if err := w.RecvFloat32(whole[lo:hi], r, tagZero); err != nil {
				return nil, err
			}
		}
	}
	if w.Rank() != 0 {
		return nil, nil
	}
	return &st, nil
}

// saveZeroSharded writes --checkpoint-format sharded from a ZeRO run:
// every rank of the job its own range of its part, in parallel (the
// replicas of a tensor-parallel shard other than 0 leave out the tensors
// shard 0 writes, and only the first replica of each such part writes
// the buffers); job rank 0, once all have written, the index.
func (s *Session) saveZeroSharded() error {
	z, j := s.zero, s.Job
	dir := checkpoint.ShardedPath(s.Cfg.Checkpoint.Dir, s.State.Step)
	var meta map[string]string
	var err error
	if j.Rank() == 0 {
		if meta, err = s.checkpointMeta(); err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
	}
	if err := Agree(j, err); err != nil {
		return err
	}
	start := time.Now()
	st := s.State
	if s.fault.is("kill-in-checkpoint", j.Rank(), s.State.Step) {
		st.WrapFile = killHalfWay
	}
	rep, bufs := s.zeroWriter(j.Rank())
	s.prog.enter(opCheckpoint)
	_, err = checkpoint.WriteRange(filepath.Join(dir, checkpoint.ShardName(j.Rank(), j.Size())), s.Model.Params, &st, z.lo, z.hi, rep, bufs)
	s.prog.leave()
	if err := Agree(j, err); err != nil {
		return err
	}
	if j.Rank() != 0 {
		return nil
	}
	x := &checkpoint.Index{Metadata: maps.Clone(meta), Files: map[string]checkpoint.FileInfo{}}
	checkpoint.SetPosition(x.Metadata, &st)
	optim := slices.Sorted(maps.Keys(st.Optim))
	layouts := map[int]*model.Params{}
	for r := range j.Size() {
		name := checkpoint.ShardName(r, j.Size())
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %v", dir, err)
		}
		x.Files[name] = checkpoint.FileInfo{Bytes: fi.Size()}
		lay, d := s.Model.Params, r
		if g := s.grid; g != nil {
			at := g.Coord(r)
			part := at.P*g.T + at.T
			if layouts[part] == nil {
				if layouts[part], err = s.partLayout(part); err != nil {
					return err
				}
			}
			lay, d = layouts[part], at.D
		}
		lo, hi := shardOf(lay.Len(), z.size, d)
		rep, bufs := s.zeroWriter(r)
		x.AddRange(name, lay, optim, lo, hi, rep, bufs)
	}
	if err := checkpoint.WriteIndex(dir, x); err != nil {
		return err
	}
	return s.saved(dir, start)
}

// zeroWriter says whether job rank r writes the tensors held whole on
// every tensor-parallel shard (shard 0's replicas do) and the buffers
// (the first replica of shard 0 of each stage).
func (s *Session) zeroWriter(r int) (replicated, buffers bool) {
	if s.grid == nil {
		return true, r == 0
	}
	at := s.grid.Coord(r)
	return at.T == 0, at.T == 0 && at.D == 0
}

// zeroChecksum is, at stage 3, the checksum of the whole parameters and
// the buffers, as every other run computes it on its full copy: the
// parameters gathered a few MiB at a time and freed again.
func (s *Session) zeroChecksum() (uint32, error) {
	z := s.zero
	data := s.Model.Params.Data
	var c uint32
	const chunk = 1 << 20
	for a := 0; a < z.n; a += chunk {
		b := min(a+chunk, z.n)
		if err := z.tw.RingAllgatherFloat32(data[a:b], z.owned(a, b)); err != nil {
			return 0, err
		}
		c = crc32.Update(c, castagnoli, checkpoint.Bytes(data[a:b]))
		freeExcept(data, a, b, z.lo, z.hi)
	}
	return crc32.Update(c, castagnoli, checkpoint.Bytes(s.Model.Params.Buffers)), nil
}

// zeroReport ends a run given --zero (0 included) with a line per rank
// on rank 0: the bytes it holds for parameters, gradients and optimizer
// state, counted from its buffers, the bound on ZeRO's working set
// (zeroExecutor.Working), its peak resident memory, and the
// bytes it sent per step and the mean step time (the tables of
// scripts/bench/zero.sh).
func (s *Session) zeroReport(win *window) error {
	n := s.W.Size()
	const k = 7
	v := make([]float64, k*n)
	stage, params := 0, int64(4*s.Model.Params.Len())
	p, g, o, work := params, params, int64(0), int64(0)
	if z := s.zero; z != nil {
		stage = z.stage
		p, g, o = z.Held()
		work = z.Working()
	} else {
		for _, b := range s.Opt.State() {
			o += int64(4 * len(b))
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // Maxrss: the peak, in KiB on Linux
	steps := float64(max(win.ran, 1))
	copy(v[k*s.W.Rank():], []float64{float64(p), float64(g), float64(o), float64(ru.Maxrss * 1024),
		float64(s.stepSent) / steps, win.stepTime.Seconds() / steps, float64(work)})
	s.prog.enter(opLog)
	err := s.W.AllreduceFloat64(v, mpi.Sum)
	s.prog.leave()
	if err != nil {
		return err
	}
	for r := range n {
		x := v[k*r:]
		s.rep.say("zero: rank %d (stage %d of %d ranks): parameters %s, gradients %s, optimizer %s, %s in all; working set at most %s; peak RSS %s; sent %s per step; %.1f ms per step\n",
			r, stage, n, mib1(x[0]), mib1(x[1]), mib1(x[2]), mib1(x[0]+x[1]+x[2]), mib1(x[6]), mib1(x[3]), mib1(x[4]), 1000*x[5])
	}
	return nil
}
