package trainer

// batches builds training batches: in the training goroutine when the
// executor computes on the CPU (it would compete with the step for the
// cores), or one step ahead in a goroutine, into two alternating buffers,
// when the executor runs on a device: the CPU's augmentation then overlaps
// the device's step instead of preceding it.
type batches struct {
	s           *Session
	ahead       bool
	xs          [2][]float32
	ys          [2][]int32
	next        int // buffer the next build fills
	epoch, step int // of the batch in flight; step -1: none
	inFlight    int // its buffer
	done        chan struct{}
	err         error // the batch in flight's failure
}

// aheadSource is a source whose batches are worth building ahead on the
// CPU too: image folders, whose decoding goroutines then run while the
// step computes (sharing the cores with it) instead of before it.
type aheadSource interface{ prefetch() bool }

func (s *Session) newBatches() *batches {
	p, ok := s.trainSet.(aheadSource)
	b := &batches{s: s, ahead: s.exec.Ahead() || ok && p.prefetch(), step: -1}
	n := 1
	if b.ahead {
		n = 2
	}
	for i := range n {
		b.xs[i] = make([]float32, s.Cfg.Data.BatchSize*s.trainSet.XSize())
		b.ys[i] = make([]int32, s.Cfg.Data.BatchSize*s.trainSet.YSize())
	}
	return b
}

// get returns batch step of epoch (the sampler's order for the epoch),
// and starts building the next one when building ahead.
func (b *batches) get(epoch, step int, order []int) ([]float32, []int32, error) {
	if !b.ahead {
		return b.xs[0], b.ys[0], b.build(0, epoch, step, order)
	}
	b.wait()
	k := b.inFlight
	if b.step != step || b.epoch != epoch {
		k = b.next
		b.next = 1 - b.next
		b.err = b.build(k, epoch, step, order)
	}
	if err := b.err; err != nil {
		return nil, nil, err
	}
	b.step = -1
	if spe := len(order) / b.s.Cfg.Data.BatchSize; step+1 < spe {
		b.start(epoch, step+1, order)
	}
	return b.xs[k], b.ys[k], nil
}

func (b *batches) build(k, epoch, step int, order []int) error {
	n := b.s.Cfg.Data.BatchSize
	return b.s.trainSet.Batch(b.xs[k], b.ys[k], order[step*n:(step+1)*n], epoch)
}

// start builds batch step of epoch in the background.
func (b *batches) start(epoch, step int, order []int) {
	k := b.next
	b.next = 1 - b.next
	b.epoch, b.step, b.inFlight = epoch, step, k
	b.done = make(chan struct{})
	b.err = nil
	go func() {
		defer close(b.done)
		b.err = b.build(k, epoch, step, order)
	}()
}

// wait lets the batch in flight finish.
func (b *batches) wait() {
	if b.done != nil {
		<-b.done
		b.done = nil
	}
}
