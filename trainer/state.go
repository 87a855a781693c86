package trainer

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"train/checkpoint"
	"train/data"
	"train/model"
	"train/mpi"
	"train/runlog"
)

// initialState, on rank 0, draws fresh parameters, or loads the newest
// checkpoint when --resume asks for it (not for benchmarks).
func (s *Session) initialState(bench bool) error {
	c := &s.Cfg
	s.describeModel()
	if c.Checkpoint.Resume && !bench {
		paths, err := checkpoint.List(c.Checkpoint.Dir)
		if err != nil {
			return fmt.Errorf("--checkpoint-dir %s: %v", c.Checkpoint.Dir, err)
		}
		// Newest first; a checkpoint that fails its checks (torn, flipped
		// bits, another model) is skipped with a warning naming it.
		var bad []string
		for i := len(paths) - 1; i >= 0; i-- {
			err := s.resume(paths[i])
			if err == nil {
				s.recordStart()
				return nil
			}
			fmt.Fprintf(s.errw, "train: warning: %v; trying an older checkpoint\n", err)
			bad = append(bad, paths[i])
		}
		if len(bad) > 0 {
			return fmt.Errorf("--resume: none of the %d checkpoints in %s is valid (newest: %s); move them away to start afresh", len(bad), c.Checkpoint.Dir, bad[0])
		}
		s.rep.say("resume: no checkpoint in %s, starting from step 0\n", c.Checkpoint.Dir)
	}
	s.Model.Init(c.Optim.Seed)
	if f := c.Model.InitFrom; f != "" {
		p := s.Model.Params
		if err := checkpoint.LoadWeights(f, p, p.Data, p.Buffers, s.Model.FitWeights, model.IgnoreWeight); err != nil {
			return fmt.Errorf("--init-from %w", err)
		}
		s.rep.say("init: weights from %s\n", f)
	}
	s.State.Samples = 0
	s.recordStart()
	return nil
}

// recordStart writes the log's start record, at the step training starts
// from.
func (s *Session) recordStart() {
	c := &s.Cfg
	d := c.trainers(s.W.Size())
	s.rep.record(runlog.Record{Type: "start", Step: s.State.Step, Model: c.ModelName(), Params: s.Model.Params.Total(), WorldSize: d,
		Batch: d * c.Data.BatchSize, SlurmJob: c.Observe.Job.SlurmJob, Restart: c.Observe.Job.SlurmRestart})
}

// resume loads path and checks it was written for this model. A run with
// another global batch (other ranks or batch size) continues at the same
// sample position, in the epoch and on the learning-rate curve.
func (s *Session) resume(path string) error {
	load := checkpoint.Load
	if checkpoint.IsSharded(path) {
		load = checkpoint.LoadShards
	}
	if err := load(path, s.Model.Params, &s.State); err != nil {
		return err
	}
	return s.resumed(path)
}

// resumed checks the checkpoint loaded into s.State (its metadata) was
// written for this model and places the run: the same sample position
// whatever the global batch is now, and the learning-rate plan.
func (s *Session) resumed(path string) error {
	st := &s.State
	if got, want := st.Meta["model"], s.Model.Config.String(); got != want {
		return fmt.Errorf("checkpoint %s was written for model %s, this run builds %s: use the same --model, --hidden and --depth", path, got, want)
	}
	oldSize, _ := strconv.Atoi(st.Meta["world_size"])
	oldBatch, _ := strconv.Atoi(st.Meta["batch_size"])
	old := int64(oldSize * oldBatch)
	if st.Samples < 0 { // written before the position was: its steps were all of its batch
		st.Samples = int64(st.Step) * old
	}
	g := int64(s.Sampler.Batch * s.Sampler.Size)
	if old != g && old > 0 {
		samples := int64(st.StepInEpoch) * old
		st.StepInEpoch = int(samples / g)
		s.rep.say("resume: global batch was %d x %d, now %d x %d: continuing epoch %d at sample %d of it, %d in all\n",
			oldSize, oldBatch, s.Sampler.Size, s.Sampler.Batch, st.Epoch+1, int64(st.StepInEpoch)*g, st.Samples)
	}
	if p, ok := s.plan.(positioned); ok {
		done, err := p.resume(st.Meta["data_position"], st.Epoch, st.StepInEpoch)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %v", path, err)
		}
		if done {
			st.StepInEpoch = s.Sampler.StepsPerEpoch()
		}
	}
	if st.StepInEpoch >= s.Sampler.StepsPerEpoch() {
		st.Epoch, st.StepInEpoch = st.Epoch+1, 0
	}
	s.resumeSchedule(st.Meta, oldSize, oldBatch)
	s.lastSaved = st.Step
	s.rep.say("resume: %s (step %d, epoch %d)\n", path, st.Step, st.Epoch+1)
	return nil
}

// resumeSchedule keeps the learning-rate plan of the run resumed (its
// steps and the global batch they were counted in) when this run asks for
// the same schedule, so the rate follows the same curve over samples
// whatever the global batch is now; a run that asks for another schedule
// (--epochs, --warmup-steps, --lr-schedule, --lr-step-epochs) plans anew.
func (s *Session) resumeSchedule(meta map[string]string, oldSize, oldBatch int) {
	c := &s.Cfg.Optim
	same := meta["lr_schedule"] == c.Schedule && meta["warmup_steps"] == strconv.Itoa(c.WarmupSteps) &&
		(meta["epochs"] == "" || meta["epochs"] == strconv.Itoa(c.Epochs)) &&
		(meta["lr_step_epochs"] == "" || meta["lr_step_epochs"] == strconv.Itoa(c.StepEpochs)) &&
		(meta["lr_decay_steps"] == "" || meta["lr_decay_steps"] == strconv.Itoa(c.DecaySteps))
	if !same {
		s.rep.say("resume: the learning-rate schedule differs from the checkpoint's (%s schedule, %s warm-up steps, %s epochs): planned anew\n",
			meta["lr_schedule"], meta["warmup_steps"], meta["epochs"])
		return
	}
	var plan [4]int64
	if _, err := fmt.Sscanf(meta["lr_plan"], "%d,%d,%d,%d", &plan[0], &plan[1], &plan[2], &plan[3]); err != nil {
		// Written before plans were recorded: its plan was its own batch's.
		if oldSize <= 0 || oldBatch <= 0 {
			return
		}
		spe := data.Sampler{N: s.trainSet.Len(), Batch: oldBatch, Size: oldSize}.StepsPerEpoch()
		plan = [4]int64{int64(c.WarmupSteps), int64(c.Epochs * spe), int64(c.StepEpochs * spe), int64(oldSize * oldBatch)}
	}
	s.Sched.Warmup, s.Sched.Total, s.Sched.StepSize, s.Sched.Batch = int(plan[0]), int(plan[1]), int(plan[2]), plan[3]
}

// broadcastState gives every rank rank 0's parameters, buffers, optimizer
// state, position and learning-rate plan (a ZeRO run did its own in
// zeroInitialState: each rank holds another part of the state).
func (s *Session) broadcastState() error {
	if s.zero != nil {
		return nil
	}
	if err := s.broadcastModel(); err != nil {
		return err
	}
	s.prog.enter(opBroadcast)
	defer s.prog.leave()
	st := &s.State
	// In name order: map order differs between ranks, collectives may not.
	for _, name := range slices.Sorted(maps.Keys(st.Optim)) {
		if err := s.W.BcastFloat32(st.Optim[name], 0); err != nil {
			return err
		}
	}
	return nil
}

// broadcastModel gives every rank rank 0's parameters, buffers, position
// and learning-rate plan.
func (s *Session) broadcastModel() error {
	s.prog.enter(opBroadcast)
	defer s.prog.leave()
	st := &s.State
	w := s.W
	if err := w.BcastFloat32(st.Params, 0); err != nil {
		return err
	}
	if err := w.BcastFloat32(st.Buffers, 0); err != nil {
		return err
	}
	return s.bcastPosition(w)
}

// bcastPosition gives w's ranks its rank 0's position and learning-rate
// plan.
func (s *Session) bcastPosition(w *mpi.World) error {
	st, sc := &s.State, &s.Sched
	pos := []int64{int64(st.Step), int64(st.Epoch), int64(st.StepInEpoch), int64(s.lastSaved), st.Samples,
		int64(sc.Warmup), int64(sc.Total), int64(sc.StepSize), sc.Batch}
	if err := w.BcastInt64(pos, 0); err != nil {
		return err
	}
	st.Step, st.Epoch, st.StepInEpoch, s.lastSaved, st.Samples = int(pos[0]), int(pos[1]), int(pos[2]), int(pos[3]), pos[4]
	sc.Warmup, sc.Total, sc.StepSize, sc.Batch = int(pos[5]), int(pos[6]), int(pos[7]), pos[8]
	if p, ok := s.plan.(positioned); ok {
		// What a resumed epoch of tar shards consumed: rank 0 read it.
		var text []byte
		if w.Rank() == 0 {
			text = []byte(p.pending(st.StepInEpoch))
		}
		n := []int64{int64(len(text))}
		if err := w.BcastInt64(n, 0); err != nil {
			return err
		}
		text = append(text, make([]byte, int(n[0])-len(text))...)
		if err := w.BcastBytes(text, 0); err != nil {
			return err
		}
		if w.Rank() != 0 && len(text) > 0 {
			if _, err := p.resume(string(text), st.Epoch, st.StepInEpoch); err != nil {
				return err
			}
		}
	}
	return nil
}

// describeModel logs what is trained on what (rank 0).
// On a grid the FLOPs are the whole network's, not this rank's part's.
func (s *Session) describeModel() {
	_, flops := s.Model.FLOPs()
	if s.grid != nil {
		if whole, err := model.Layout(s.Model.Config); err == nil {
			_, flops = whole.FLOPs()
		}
	}
	s.rep.say("train: %s model, %d parameters, %.1f MFLOP per training sample; %s\n",
		s.Cfg.ModelName(), s.Model.Params.Total(), float64(flops)/1e6, s.dataName)
}

// describe logs how the job trains (rank 0 of the trainers).
func (s *Session) describe() {
	c := &s.Cfg
	n := s.W.Size()
	bn := ""
	if len(s.Model.Params.BufferTensors) > 0 {
		bn = ", batchnorm " + c.Dist.BN.String()
	}
	accum := ""
	if k := c.Data.MicroBatches; k > 1 && (c.Data.AccumSteps > 1 || c.Data.AccumSteps == AccumAuto || c.Data.GlobalBatch > 0) {
		accum = fmt.Sprintf(" (%d accumulated micro-steps of %d)", k, c.Data.BatchSize/k)
	}
	s.rep.say("train: %d rank(s) x batch %d%s = global batch %d, %d steps per epoch, %s%s; %s\n",
		n, c.Data.BatchSize, accum, n*c.Data.BatchSize, s.Sampler.StepsPerEpoch(), s.strategy.Describe(), bn, s.exec.Describe())
	if len(s.cuts) > 1 {
		var st []string
		for i, lo := range s.cuts {
			hi := len(s.layerNames)
			if i+1 < len(s.cuts) {
				hi = s.cuts[i+1]
			}
			st = append(st, fmt.Sprintf("stage %d: %s", i, strings.Join(s.layerNames[lo:hi], " ")))
		}
		s.rep.say("pipeline: %s\n", strings.Join(st, "; "))
	}
	if j := c.Observe.Job; j.SlurmJob != "" {
		s.rep.say("train: slurm job %s, restart %s\n", j.SlurmJob, cmpOr(j.SlurmRestart, "0"))
	}
	oc, _ := json.Marshal(c.Optim.optimConfig())
	scaling := "none"
	if c.Optim.LinearScaling {
		scaling = "linear"
	}
	decay := ""
	if len(s.optCfg.NoDecay) > 0 && c.Optim.WeightDecay > 0 {
		decay = " (decay on matrices and embeddings only)"
	}
	length := ""
	if c.Optim.DecaySteps > 0 {
		length = fmt.Sprintf(" to zero at step %d", c.Optim.DecaySteps)
	}
	s.rep.say("train: optimizer %s%s, lr %g (%s schedule%s, %d warm-up steps, scaling %s), augment %s\n",
		oc, decay, s.Sched.Base, c.Optim.Schedule, length, c.Optim.WarmupSteps, scaling, cmpOr(s.augmentDesc, augmentName(s.augment)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func augmentName(a data.Augment) string {
	switch {
	case a.Pad > 0 && a.Flip:
		return fmt.Sprintf("crop (pad %d) and flip", a.Pad)
	case a.Pad > 0:
		return fmt.Sprintf("crop (pad %d)", a.Pad)
	case a.Flip:
		return "flip"
	}
	return "none"
}

// syncBuffers makes the replicas identical before they are evaluated,
// saved or checked: the host copy brought up to date, the strategy's
// replicas made one (local SGD's average, ps-async's fetch), and with
// per-rank BatchNorm statistics their mean taken.
func (s *Session) syncBuffers() error {
	if err := s.exec.ToHost(); err != nil {
		return err
	}
	if err := s.strategy.Sync(); err != nil {
		return err
	}
	if s.Cfg.Dist.BN != BNLocal || !s.stale {
		return nil
	}
	if err := s.averageBuffers(); err != nil {
		return err
	}
	return s.exec.ToDevice()
}

// averageBuffers replaces per-rank BatchNorm running statistics (--bn
// local) by their mean over the ranks, once per change: averaging equal
// replicas again could move their last bits (three ranks' mean of x need
// not be x). The integer batch counters agree by construction and are
// left alone.
func (s *Session) averageBuffers() error {
	if s.Cfg.Dist.BN != BNLocal || !s.stale {
		return nil
	}
	p := s.Model.Params
	for _, t := range p.BufferTensors {
		if !t.Int64 {
			if err := s.W.AllreduceFloat32(t.Of(p.Buffers), mpi.Mean); err != nil {
				return err
			}
		}
	}
	s.stale = false
	return nil
}

// checkpoint writes the current state on rank 0 and prunes old files
// (sharded: every part writes its own, see saveSharded).
func (s *Session) checkpoint() error {
	s.lastSaved = s.State.Step
	if err := s.syncBuffers(); err != nil {
		return err
	}
	if s.Cfg.Checkpoint.Format == Sharded {
		if s.zero != nil {
			return s.saveZeroSharded()
		}
		return s.saveSharded()
	}
	params, state := s.Model.Params, &s.State
	if s.zero != nil {
		var err error
		if state, err = s.gatherZero(); err != nil {
			return err
		}
		if s.zero.stage == 3 {
			defer s.zero.releaseParams()
		}
	}
	if s.grid != nil {
		var err error
		live := s.State
		if s.zero != nil && state != nil { // a part's first replica: its part gathered whole
			s.State = *state
		}
		params, state, err = s.gatherCheckpoint()
		s.State = live
		if err != nil {
			return err
		}
	}
	if s.Job.Rank() != 0 || (s.grid == nil && s.W.Rank() != 0) {
		return nil
	}
	meta, err := s.checkpointMeta()
	if err != nil {
		return err
	}
	state.Meta = meta
	c := &s.Cfg
	start := time.Now()
	if s.fault.is("kill-in-checkpoint", s.Job.Rank(), s.State.Step) {
		state.WrapFile = killHalfWay
	}
	s.prog.enter(opCheckpoint)
	path, err := checkpoint.Save(c.Checkpoint.Dir, params, state)
	s.prog.leave()
	if err != nil {
		return err
	}
	return s.saved(path, start)
}

// saved prunes the old checkpoints and tells the hooks of the new one
// (rank 0).
func (s *Session) saved(path string, start time.Time) error {
	c := &s.Cfg
	if err := checkpoint.Prune(c.Checkpoint.Dir, c.Checkpoint.Keep); err != nil {
		return fmt.Errorf("--keep %d: removing old checkpoints in %s: %v", c.Checkpoint.Keep, c.Checkpoint.Dir, err)
	}
	for _, h := range s.hooks {
		h.Checkpoint(&CheckpointEvent{Step: s.State.Step, Path: path, Start: start, Took: time.Since(start)})
	}
	return nil
}

// checkpointMeta is a checkpoint's metadata: how the run was made and its
// learning-rate plan, with the strategy's additions (rank 0; the strategy
// may bring state kept elsewhere into the host buffers first).
func (s *Session) checkpointMeta() (map[string]string, error) {
	c := &s.Cfg
	oc, _ := json.Marshal(c.Optim.optimConfig())
	sc := &s.Sched
	meta := map[string]string{
		"seed":           strconv.FormatUint(c.Optim.Seed, 10),
		"world_size":     strconv.Itoa(s.W.Size()),
		"batch_size":     strconv.Itoa(c.Data.BatchSize),
		"model":          s.Model.Config.String(),
		"optimizer":      string(oc),
		"lr":             strconv.FormatFloat(sc.Base, 'g', -1, 64),
		"lr_schedule":    c.Optim.Schedule,
		"warmup_steps":   strconv.Itoa(c.Optim.WarmupSteps),
		"epochs":         strconv.Itoa(c.Optim.Epochs),
		"lr_step_epochs": strconv.Itoa(c.Optim.StepEpochs),
		"lr_decay_steps": strconv.Itoa(c.Optim.DecaySteps),
		"decay_all":      strconv.FormatBool(c.Optim.DecayAll),
		"lr_plan":        strings.Join([]string{strconv.Itoa(sc.Warmup), strconv.Itoa(sc.Total), strconv.Itoa(sc.StepSize), strconv.FormatInt(sc.Batch, 10)}, ","),
		"batchnorm":      c.Dist.BN.String(),
	}
	if s.tokenizer != "" {
		meta["tokenizer"] = s.tokenizer // train generate decodes with it
	}
	if p, ok := s.plan.(positioned); ok {
		if pos := p.position(s.State.Epoch, s.State.StepInEpoch); pos != "" {
			meta["data_position"] = pos // what the epoch has consumed
		}
	}
	if err := s.strategy.BeforeSave(meta); err != nil {
		return nil, err
	}
	s.State.Meta = meta
	return meta, nil
}
