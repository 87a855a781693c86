package trainer

import (
	"fmt"
	"math"
	"time"

	"train/model"
	"train/mpi"
	"train/optim"
)

// pipeExecutor runs one stage of a pipeline (--pipeline P): its part of
// the model's layers, on the host. Each rank's batch is cut into M
// micro-batches as the single-stage micro executor cuts it (exec_micro.go:
// sample i, i+M, ...), so a pipeline equals np=1 --micro-batches M. A
// stage receives its input activations from the stage before and sends
// its output to the one after; backward sends the gradient of its input
// back. Sends and receives are non-blocking: receives are posted as soon
// as the buffer they fill is free, sends complete while the next
// micro-batch computes, and the stage waits only for what its next
// operation reads.
//
// A micro-batch in flight keeps its activations in a slot: a replica of
// the stage's layers over the same parameters (model.Replica). GPipe runs
// every forward before any backward and needs M slots; 1F1B needs at most
// P - stage, whatever M is.
type pipeExecutor struct {
	s      *Session
	pipe   *mpi.World // the stages of this replica, by stage
	stage  int
	stages int
	m      int // micro-batches per step
	sched  Schedule
	slots  []*model.Model
	in     [][]float32 // per slot: the input received (stages after the first)
	lab    [][]int32   // per slot: labels (the last stage)
	opt    optim.Optimizer
	blas   string
	ops    []pipeOp

	x     []float32
	y     []int32
	pos   int // labels per sample
	nan   bool
	loss  float64
	right int

	// requests in flight, per micro-batch
	recvF, recvB, sendF, sendB []*mpi.Request
	tied                       []float32     // the other stage's gradient of the tied table
	idle                       time.Duration // time this stage waited on its neighbours in the last step's schedule
	// The step's span runs from the schedule's start to the moment every
	// stage has finished its backward (the pipe-wide allreduce in Update
	// returns); work is this stage's own forward and backward in it.
	began      time.Time
	work       time.Duration
	steps      int           // schedules run
	span, busy time.Duration // summed over the steps after the first (which allocates)

	watch []pipeWatcher // hooks told of each operation (none: nothing is timed)
	jobOf []int         // the job rank of each stage of this replica and shard
}

// pipeOp is one forward or backward of a micro-batch.
type pipeOp struct {
	fwd bool
	i   int
}

// Tags of the pipeline's messages: the micro-batch and the direction, so
// that receives posted early match whatever arrives first.
const (
	tagAct  = 0x1000 // + micro-batch: activations forward
	tagGrad = 0x5000 // + micro-batch: gradients back
	tagEval = 0x7ff0 // evaluation's activations
)

// pipeSchedule is the order stage runs a step's operations in.
func pipeSchedule(kind Schedule, stage, stages, m int) []pipeOp {
	ops := make([]pipeOp, 0, 2*m)
	if kind == GPipe {
		for i := range m {
			ops = append(ops, pipeOp{true, i})
		}
		for i := range m {
			ops = append(ops, pipeOp{false, i})
		}
		return ops
	}
	// 1F1B: fill the pipeline (the stages after this one each hold one
	// micro-batch), then one forward and one backward in turn, then drain.
	warm := min(stages-stage-1, m)
	f, b := 0, 0
	for ; f < warm; f++ {
		ops = append(ops, pipeOp{true, f})
	}
	for ; f < m; f, b = f+1, b+1 {
		ops = append(ops, pipeOp{true, f}, pipeOp{false, b})
	}
	for ; b < m; b++ {
		ops = append(ops, pipeOp{false, b})
	}
	return ops
}

// pipeSlots is how many micro-batches a stage holds at once under kind:
// GPipe all M, 1F1B at most the stages from this one to the last.
func pipeSlots(kind Schedule, stage, stages, m int) int {
	if kind == GPipe {
		return m
	}
	return min(stages-stage, m)
}

func newPipeExecutor(s *Session) (Executor, error) {
	c := &s.Cfg
	m := max(c.Data.MicroBatches, 1)
	g := s.grid
	e := &pipeExecutor{s: s, pipe: g.Pipe, stage: g.At.P, stages: g.P, m: m, sched: c.Dist.Schedule,
		opt: s.Opt, blas: s.blas, pos: s.Model.Positions()}
	e.ops = pipeSchedule(e.sched, e.stage, e.stages, m)
	k := pipeSlots(e.sched, e.stage, e.stages, m)
	e.slots = []*model.Model{s.Model}
	for len(e.slots) < k {
		e.slots = append(e.slots, s.Model.Replica())
	}
	e.in, e.lab = make([][]float32, k), make([][]int32, k)
	e.recvF, e.recvB = make([]*mpi.Request, m), make([]*mpi.Request, m)
	e.sendF, e.sendB = make([]*mpi.Request, m), make([]*mpi.Request, m)
	for p := range g.P {
		e.jobOf = append(e.jobOf, g.Rank(mpi.Coord{D: g.At.D, P: p, T: g.At.T}))
	}
	return e, nil
}

func (e *pipeExecutor) ZeroGrad() { model.Zero(e.s.Model.Params.Grad) }

// Forward keeps the batch: the schedule runs in Backward, where the
// strategy's ready hook is at hand for the last micro-batch.
func (e *pipeExecutor) Forward(x []float32, y []int32) error {
	e.x, e.y, e.nan = x, y, false
	return nil
}

// InjectNaN spoils the loss gradient (last stage) or the gradient
// received (the others) of the step's last micro-batch.
func (e *pipeExecutor) InjectNaN() { e.nan = true }

func (e *pipeExecutor) Backward(ready func(lo int)) error {
	n := len(e.y) / e.pos
	if n%e.m != 0 || n == 0 {
		return fmt.Errorf("a batch of %d samples does not split into --micro-batches %d", n, e.m)
	}
	per, k := n/e.m, len(e.slots)
	first, last := e.stage == 0, e.stage == e.stages-1
	e.loss, e.right, e.idle = 0, 0, 0
	for i := range e.m {
		e.recvF[i], e.recvB[i], e.sendF[i], e.sendB[i] = nil, nil, nil, nil
	}
	// post receives into the slot of micro-batch i (free from the start
	// for i < k, then once micro-batch i-k's backward is done).
	post := func(i int) error {
		if i >= e.m {
			return nil
		}
		sl := e.slots[i%k]
		var err error
		if !first {
			e.in[i%k] = grow(e.in[i%k], per*sl.InSize())
			if e.recvF[i], err = e.pipe.IrecvFloat32(e.in[i%k], e.stage-1, tagAct+i); err != nil {
				return err
			}
		}
		if !last {
			if e.recvB[i], err = e.pipe.IrecvFloat32(sl.LossGrad(per), e.stage+1, tagGrad+i); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range k {
		if err := post(i); err != nil {
			return err
		}
	}
	if e.steps == 0 {
		e.watch = e.s.pipeWatchers() // the hooks exist once the first step runs
	}
	e.began = time.Now()
	e.steps++
	defer func() { e.work = time.Since(e.began) - e.idle }()
	for _, op := range e.ops {
		i, sl := op.i, e.slots[op.i%k]
		if op.fwd {
			var in []float32
			if first {
				in = e.gather(i, per, sl)
			} else {
				if err := e.wait(e.recvF[i], "recv F", i); err != nil {
					return err
				}
				in = e.in[i%k]
			}
			if i >= k { // the slot's output is sent again: the last send must be done
				if err := e.wait(e.sendF[i-k], "send F", i-k); err != nil {
					return err
				}
			}
			t0 := time.Now()
			out := sl.Forward(in, per)
			if last {
				lab := e.labels(i, per)
				d := sl.LossGrad(per)
				loss, right := sl.Loss(d, out, lab, len(lab))
				model.Scale(d, 1/float32(e.m))
				e.loss += loss / float64(e.m)
				e.right += right
			}
			e.tell(PipeForward, "", i, e.stage, t0)
			if !last {
				t0 := time.Now()
				var err error
				if e.sendF[i], err = e.pipe.IsendFloat32(out, e.stage+1, tagAct+i); err != nil {
					return err
				}
				e.tell(PipeSend, PipeForward, i, e.stage+1, t0)
			}
			continue
		}
		if !last {
			if err := e.wait(e.recvB[i], "recv B", i); err != nil {
				return err
			}
		}
		if e.nan && i == e.m-1 {
			sl.LossGrad(per)[0] = float32(math.NaN())
		}
		if i >= k && !first {
			if err := e.wait(e.sendB[i-k], "send B", i-k); err != nil {
				return err
			}
		}
		sl.OnGradReady = nil
		if i == e.m-1 {
			sl.OnGradReady = ready
		}
		t0 := time.Now()
		sl.Backward(per)
		sl.OnGradReady = nil
		e.tell(PipeBackward, "", i, e.stage, t0)
		if !first {
			t0 := time.Now()
			var err error
			if e.sendB[i], err = e.pipe.IsendFloat32(sl.InputGrad(per), e.stage-1, tagGrad+i); err != nil {
				return err
			}
			e.tell(PipeSend, PipeBackward, i, e.stage-1, t0)
		}
		if err := post(i + k); err != nil {
			return err
		}
	}
	for i := range e.m {
		if err := e.wait(e.sendF[i], "send F", i); err != nil {
			return err
		}
		if err := e.wait(e.sendB[i], "send B", i); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for r (nil: nothing in flight), counting the time as idle
// and telling the watchdog what this stage waits for.
func (e *pipeExecutor) wait(r *mpi.Request, what string, i int) error {
	if r == nil {
		return nil
	}
	start := time.Now()
	peer := e.stage + 1
	if what == "recv F" || what == "send B" {
		peer = e.stage - 1
	}
	recv := what == "recv F" || what == "recv B"
	dir := PipeForward
	if what == "recv B" || what == "send B" {
		dir = PipeBackward
	}
	if done, err := r.Test(); done || err != nil {
		if recv && err == nil {
			e.tell(PipeRecv, dir, i, peer, start)
		}
		return err
	}
	e.s.prog.enterPipe(what, i, peer)
	err := r.Wait()
	e.s.prog.leave()
	e.idle += time.Since(start)
	if recv && err == nil {
		e.tell(PipeRecv, dir, i, peer, start)
	}
	return err
}

// tell tells the watching hooks of an operation on micro-batch i that
// began at start and ends now; peer is the stage a message goes to or
// comes from (this stage for a forward or backward).
func (e *pipeExecutor) tell(op, dir PipeOp, i, peer int, start time.Time) {
	if len(e.watch) == 0 {
		return
	}
	ev := PipeEvent{Op: op, Dir: dir, Micro: i, Stage: e.stage, Peer: peer, Start: start, Took: time.Since(start)}
	if op == PipeSend || op == PipeRecv {
		from := e.stage
		if op == PipeRecv {
			from = peer
		}
		d := 0
		if dir == PipeBackward {
			d = 1
		}
		ev.Flow = 1 + e.jobOf[from] + e.s.Job.Size()*(i+e.m*(d+2*e.s.State.Step))
	}
	for _, w := range e.watch {
		w.Pipe(&ev)
	}
}

// gather copies micro-batch i's samples (i, i+M, ...) into slot i's
// input (the first stage).
func (e *pipeExecutor) gather(i, per int, sl *model.Model) []float32 {
	k := i % len(e.slots)
	sample := len(e.x) / (per * e.m)
	e.in[k] = grow(e.in[k], per*sample)
	for j := range per {
		s := i + j*e.m
		copy(e.in[k][j*sample:(j+1)*sample], e.x[s*sample:(s+1)*sample])
	}
	return e.in[k]
}

// labels are micro-batch i's labels (the last stage).
func (e *pipeExecutor) labels(i, per int) []int32 {
	k := i % len(e.slots)
	e.lab[k] = grow(e.lab[k], per*e.pos)
	for j := range per {
		s := i + j*e.m
		copy(e.lab[k][j*e.pos:(j+1)*e.pos], e.y[s*e.pos:(s+1)*e.pos])
	}
	return e.lab[k]
}

func (e *pipeExecutor) Reducer(w *mpi.World, algo Algorithm, comp mpi.Compression) (bucketReducer, error) {
	r, err := newHostReducer(w, algo, comp)
	return &cpuBuckets{hostReducer: r, grad: e.s.Model.Params.Grad}, err
}

// Settle sums the tied token table's gradient between the first and the
// last stage, once the replicas have averaged it (the sum of averages is
// the average of the sums), so both copies take the same update.
func (e *pipeExecutor) Settle() error {
	if err := e.s.tensorErr; err != nil {
		return err
	}
	t, ok := e.s.Model.TiedCopy()
	if !ok {
		return nil
	}
	g := t.Of(e.s.Model.Params.Grad)
	other := e.stages - 1
	if e.stage == e.stages-1 {
		other = 0
	}
	e.tied = grow(e.tied, len(g))
	buf := e.tied
	if err := e.pipe.Exchange([]mpi.Msg{{F32: g, Peer: other, Tag: tagEval + 1}}, []mpi.Msg{{F32: buf, Peer: other, Tag: tagEval + 1}}); err != nil {
		return err
	}
	for i, v := range buf {
		g[i] += v
	}
	return nil
}

// Update clips by, and checks, the norm of the whole model's gradient, so
// every stage scales alike and all stop together on a non-finite
// gradient.
func (e *pipeExecutor) Update(lr float64, t int, clip float64) (bool, error) {
	p := e.s.Model.Params
	norm, err := e.gradNorm(nil, 0, p.Len())
	if err != nil || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return false, err
	}
	if c := optim.ClipScale(norm, clip); clip > 0 && c < 1 {
		optim.Scale(p.Grad, float32(c))
	}
	return e.opt.Step(p.Data, p.Grad, float32(lr), t), nil
}

// gradNorm is the norm of the whole model's gradient from the values in
// [lo, hi) of this stage's buffer (ZeRO's shard; all of it otherwise):
// their squares summed over replicas (ZeRO's data-parallel ranks, or nil),
// the tensor shards and the stages, each value counted once (a
// tensor-parallel shard's own slices, the tensors whole on every shard
// from shard 0, the tied table from the first stage). It also closes the
// step's span for the grid report.
func (e *pipeExecutor) gradNorm(replicas *mpi.World, lo, hi int) (float64, error) {
	p := e.s.Model.Params
	g := e.s.grid
	var sq float64
	for _, ts := range p.Tensors {
		a, b := max(ts.Offset, lo), min(ts.Offset+ts.Size, hi)
		if !ts.Absent() && a < b && !ts.Copy && (ts.Full != nil || g.At.T == 0) {
			sq += optim.SumSquares(p.Grad[a:b])
		}
	}
	sum := []float64{sq}
	for _, w := range []*mpi.World{replicas, g.Tensor, e.pipe} {
		if w == nil {
			continue
		}
		if err := w.AllreduceFloat64(sum, mpi.Sum); err != nil {
			return 0, err
		}
	}
	if e.steps > 1 {
		e.span += time.Since(e.began)
		e.busy += e.work
	}
	return math.Sqrt(sum[0]), nil
}

func (e *pipeExecutor) Result() (float64, int, error) { return e.loss, e.right, nil }

// Evaluate passes the batch through the stages whole, with blocking sends
// (evaluation keeps nothing for a backward); the last stage scores it.
func (e *pipeExecutor) Evaluate(x []float32, y []int32, n int) (float64, int, error) {
	m := e.s.Model
	in := x
	if e.stage > 0 {
		e.in[0] = grow(e.in[0], n*m.InSize())
		in = e.in[0]
		if err := e.pipe.RecvFloat32(in, e.stage-1, tagEval); err != nil {
			return 0, 0, err
		}
	}
	out := m.Forward(in, n)
	if e.stage < e.stages-1 {
		return 0, 0, e.pipe.SendFloat32(out, e.stage+1, tagEval)
	}
	rows := n * m.Positions()
	loss, correct := m.Loss(nil, out, y[:rows], rows)
	return loss, correct, nil
}

func (e *pipeExecutor) ToHost() error   { return nil }
func (e *pipeExecutor) ToDevice() error { return nil }
func (e *pipeExecutor) Ahead() bool     { return false }
func (e *pipeExecutor) Describe() string {
	g := e.s.grid
	d := fmt.Sprintf("%s; grid %dx%dx%d (data x pipeline x tensor), this rank %d,%d,%d", e.blas, g.D, g.P, g.T, g.At.D, g.At.P, g.At.T)
	if e.stages > 1 {
		d += fmt.Sprintf("; pipeline stage %d of %d, %d micro-batches, %s, %d held at most", e.stage, e.stages, e.m, e.sched, len(e.slots))
	} else if e.m > 1 {
		d += fmt.Sprintf("; %d micro-batches", e.m)
	}
	return d
}
func (e *pipeExecutor) Close() {}

// replicas are the models this stage computes with: one per micro-batch
// slot, over the same parameters (ZeRO stage 3 hooks its gathers on each).
func (e *pipeExecutor) replicas() []*model.Model { return e.slots }

// usage is this stage's memory and idle time, for the grid report: the
// parameters (with gradients), the optimizer state and the activations
// held (every slot's, and the received inputs), in bytes; the fraction of
// the steps' spans (schedule start to the last stage's backward done,
// over the steps after the first) not spent on this stage's own forward
// and backward: the bubble, as GPipe counts it; and the slots.
func (e *pipeExecutor) usage() (params, optim, acts int, idle float64, slots int) {
	p := e.s.Model.Params
	params = 8 * p.Len()
	for _, b := range e.opt.State() {
		optim += 4 * len(b)
	}
	for k, sl := range e.slots {
		acts += sl.ActivationBytes() + 4*len(e.in[k])
	}
	if e.span > 0 {
		idle = 1 - e.busy.Seconds()/e.span.Seconds()
	}
	return params, optim, acts, idle, len(e.slots)
}
