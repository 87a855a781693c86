package model

// scratch is working memory the residual blocks of one model (and its
// pipeline replicas, which share its Mode) share. A block's backward
// buffers are live only while that block runs, and the blocks run one
// at a time, so one set as large as the largest block's serves them all.
// (The forward needs none: BatchNorm2d.Join writes the block's output
// without storing the branches'.)
// Kept per block, ResNet-50's came to about 100 MB per sample, more than
// the activations backward needs.
type scratch struct{ bufs [][]float32 }

// Scratch slots, all of them backward's.
const (
	slotGrad    = iota // backward: the gradient of the branches' sum
	slotT1             // backward: gradients inside the residual branch
	slotT2             //
	slotT3             //
	slotT4             //
	slotT5             //
	slotShortG         // backward: the projection's BatchNorm input gradient
	slotShortDx        // backward: the projection's input gradient
)

// get is slot's buffer of n floats, grown when smaller (its contents are
// not kept across calls).
func (s *scratch) get(slot, n int) []float32 {
	for len(s.bufs) <= slot {
		s.bufs = append(s.bufs, nil)
	}
	if len(s.bufs[slot]) < n {
		s.bufs[slot] = make([]float32, n)
	}
	return s.bufs[slot][:n]
}

// bytes is the scratch held.
func (s *scratch) bytes() int { return floats(s.bufs...) }
