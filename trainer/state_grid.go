package trainer

import (
	"fmt"
	"maps"
	"slices"

	"train/checkpoint"
	"train/model"
	"train/mpi"
	"train/optim"
)

// On a model-parallel grid each rank holds a part of the model. A
// checkpoint is still one file of the whole model, as np=1 writes it (so
// PyTorch loads it, and any grid resumes it): rank 0 gathers the parts
// from the first replica of each (the data-parallel rank 0 of each part),
// and on resume reads the file and hands each part its tensors. A fresh
// run needs no gathering: every part draws its own share of --seed's
// stream (model.Init walks the whole network).

// tagState marks the parts' state on its way to and from rank 0.
const tagState = 0x7fe0

// wholeState is the whole model's state, on rank 0, in np=1's layout.
type wholeState struct {
	model *model.Model // allocated (resume) or layout only (saving)
	state checkpoint.State
}

// newWholeState allocates the whole model's state buffers; with alloc the
// model's own buffers too (initialState draws or loads into them).
func (s *Session) newWholeState(alloc bool) (*wholeState, error) {
	cfg := s.Model.Config
	var m *model.Model
	var err error
	if alloc {
		m, err = model.Build(cfg)
	} else {
		m, err = model.Layout(cfg)
	}
	if err != nil {
		return nil, err
	}
	w := &wholeState{model: m}
	p := m.Params
	if alloc {
		w.state.Params, w.state.Buffers = p.Data, p.Buffers
	} else {
		w.state.Params = make([]float32, p.Len())
		w.state.Buffers = make([]float32, bufferLen(p))
	}
	opt, err := optim.New(s.optCfg, p.Len())
	if err != nil {
		return nil, err
	}
	w.state.Optim = opt.State()
	return w, nil
}

// bufferLen is the length of the buffer storage of a layout p.
func bufferLen(p *model.Params) int {
	n := 0
	for _, t := range p.BufferTensors {
		n = max(n, t.Offset+t.Size)
	}
	return n
}

// span is a run of values a part holds, at off in the part's buffer and
// at whole in the whole model's.
type span struct{ off, whole, n int }

// partSpans maps part's tensors and buffers onto whole's, by name. The
// tied table's copy (the last stage's) is left out when gathering (its
// owner's is saved) and filled from the owner's when handing out.
func partSpans(part, whole *model.Params, gather bool) (params, buffers []span, err error) {
	for _, t := range part.Tensors {
		if t.Copy && gather {
			continue
		}
		w, ok := whole.Lookup(t.Name)
		if !ok || (t.Full == nil && w.Size != t.Size) {
			return nil, nil, fmt.Errorf("model: part tensor %s is not in the whole model", t.Name)
		}
		if part == whole { // this part's own layout: one run per tensor
			params = append(params, span{t.Offset, t.Offset, t.Size})
			continue
		}
		off, at, n := t.Spans() // a tensor-parallel shard's slices
		for i := range off {
			params = append(params, span{t.Offset + off[i], w.Offset + at[i], n[i]})
		}
	}
	for _, t := range part.BufferTensors {
		w, ok := whole.LookupBuffer(t.Name)
		if !ok || w.Size != t.Size {
			return nil, nil, fmt.Errorf("model: part buffer %s is not in the whole model", t.Name)
		}
		buffers = append(buffers, span{t.Offset, w.Offset, t.Size})
	}
	return params, buffers, nil
}

// packLen is the length of a part's message: its parameters, each
// optimizer buffer of their layout, its buffers.
func packLen(params, buffers []span, optBufs int) int {
	n := 0
	for _, s := range params {
		n += s.n * (1 + optBufs)
	}
	for _, s := range buffers {
		n += s.n
	}
	return n
}

// move copies between a part's flat message msg and st, whose buffers
// are laid out as the spans' whole side (rank 0's whole state) or, with
// own, as their off side (the part's live buffers): into st when in is
// true, out of it otherwise. The message is the parameters, each
// optimizer buffer in name order, then the buffers.
func move(msg []float32, st *checkpoint.State, params, buffers []span, own, in bool) {
	at := 0
	run := func(sp []span, buf []float32) {
		for _, s := range sp {
			o := s.whole
			if own {
				o = s.off
			}
			if in {
				copy(buf[o:o+s.n], msg[at:at+s.n])
			} else {
				copy(msg[at:at+s.n], buf[o:o+s.n])
			}
			at += s.n
		}
	}
	run(params, st.Params)
	for _, name := range slices.Sorted(maps.Keys(st.Optim)) {
		run(params, st.Optim[name])
	}
	run(buffers, st.Buffers)
}

// partLeaders lists the job ranks that hold each part for the transfer:
// the data-parallel rank 0 of every stage and shard, with each one's
// stage.
func (s *Session) partLeaders() (ranks, stages []int) {
	g := s.grid
	for p := range g.P {
		for t := range g.T {
			ranks = append(ranks, g.Rank(mpi.Coord{D: 0, P: p, T: t}))
			stages = append(stages, p*g.T+t)
		}
	}
	return ranks, stages
}

// partLayout is the layout of a part (stage x T + shard), for rank 0's
// side of a transfer.
func (s *Session) partLayout(part int) (*model.Params, error) {
	g := s.grid
	m, err := model.LayoutPart(s.Model.Config, model.Part{Stage: part / g.T, Cuts: s.cuts, Shard: part % g.T, Shards: g.T})
	if err != nil {
		return nil, err
	}
	return m.Params, nil
}

// transfer moves the parts' state between rank 0's whole state w and the
// part leaders: gather (into w) or scatter (out of it). Ranks that lead no
// part do nothing.
func (s *Session) transfer(w *wholeState, gather bool) error {
	ranks, stages := s.partLeaders()
	me := s.Job.Rank()
	optBufs := len(s.State.Optim)
	if me != 0 {
		if !slices.Contains(ranks, me) {
			return nil
		}
		params, buffers, err := partSpans(s.Model.Params, s.Model.Params, gather)
		if err != nil {
			return err
		}
		msg := make([]float32, packLen(params, buffers, optBufs))
		if gather {
			move(msg, &s.State, params, buffers, true, false)
			return s.Job.SendFloat32(msg, 0, tagState)
		}
		if err := s.Job.RecvFloat32(msg, 0, tagState); err != nil {
			return err
		}
		move(msg, &s.State, params, buffers, true, true)
		return nil
	}
	for i, r := range ranks {
		lay := s.Model.Params
		if r != 0 {
			var err error
			if lay, err = s.partLayout(stages[i]); err != nil {
				return err
			}
		}
		params, buffers, err := partSpans(lay, w.model.Params, gather)
		if err != nil {
			return err
		}
		msg := make([]float32, packLen(params, buffers, optBufs))
		switch {
		case r == 0 && gather:
			own, ownBuf, _ := partSpans(lay, lay, gather)
			move(msg, &s.State, own, ownBuf, true, false)
			move(msg, &w.state, params, buffers, false, true)
		case r == 0:
			move(msg, &w.state, params, buffers, false, false)
			own, ownBuf, _ := partSpans(lay, lay, gather)
			move(msg, &s.State, own, ownBuf, true, true)
		case gather:
			if err := s.Job.RecvFloat32(msg, r, tagState); err != nil {
				return err
			}
			move(msg, &w.state, params, buffers, false, true)
		default:
			move(msg, &w.state, params, buffers, false, false)
			if err := s.Job.SendFloat32(msg, r, tagState); err != nil {
				return err
			}
		}
	}
	return nil
}

// gridInitialState gives every part its initial state. A fresh run's
// parts each draw their own; a resumed run (or --init-from) is read on
// rank 0 into the whole model, which is then handed out in parts. The
// position goes to every rank; broadcastState then copies each part to
// its replicas.
func (s *Session) gridInitialState(bench bool) error {
	c := &s.Cfg
	flag := []int64{0}
	var sharded string
	var err error
	if s.Job.Rank() == 0 && (c.Model.InitFrom != "" || (c.Checkpoint.Resume && !bench)) {
		flag[0] = 1
		if c.Checkpoint.Resume && !bench {
			sharded, err = s.newestSharded()
		}
		if sharded != "" {
			flag[0] = 2
		}
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if err := s.Job.BcastInt64(flag, 0); err != nil {
		return err
	}
	if flag[0] == 2 {
		if sharded, err = s.bcastString(sharded); err != nil {
			return err
		}
		return s.resumeShardsOnGrid(sharded)
	}
	if flag[0] == 0 {
		if s.Job.Rank() == 0 {
			s.describeModel()
		}
		if s.W.Rank() == 0 {
			s.Model.Init(c.Optim.Seed)
			s.State.Samples = 0
		}
		if s.Job.Rank() == 0 {
			s.recordStart()
		}
		return nil
	}
	var w *wholeState
	if s.Job.Rank() == 0 {
		if w, err = s.newWholeState(true); err == nil {
			part, state := s.Model, s.State
			s.Model, s.State = w.model, w.state
			err = s.initialState(bench)
			w.state = s.State
			s.Model, s.State = part, state
			s.State.Step, s.State.Epoch, s.State.StepInEpoch, s.State.Samples, s.State.Meta = w.state.Step, w.state.Epoch, w.state.StepInEpoch, w.state.Samples, w.state.Meta
		}
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if err := s.transfer(w, false); err != nil {
		return err
	}
	return s.bcastPosition(s.Job)
}

// gatherCheckpoint brings the parts to rank 0 for a checkpoint of the
// whole model; rank 0 returns the whole model's layout and state (the
// others nil).
func (s *Session) gatherCheckpoint() (*model.Params, *checkpoint.State, error) {
	var w *wholeState
	var err error
	if s.Job.Rank() == 0 {
		w, err = s.newWholeState(false)
	}
	if err := Agree(s.Job, err); err != nil {
		return nil, nil, err
	}
	if err := s.transfer(w, true); err != nil {
		return nil, nil, err
	}
	if s.Job.Rank() != 0 {
		return nil, nil, nil
	}
	st := s.State
	st.Params, st.Buffers, st.Optim = w.state.Params, w.state.Buffers, w.state.Optim
	return w.model.Params, &st, nil
}
