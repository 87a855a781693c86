package data

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
)

// ImageSet is an image folder seen as torchvision's ImageNet transforms
// see it: each sample decoded from its file when a batch asks for it,
// then, for training, RandomResizedCrop to Size and a horizontal flip
// (Crop false: the evaluation view, then the flip), and for evaluation
// Resize(Resize) and CenterCrop(Size); then normalised with Mean and Std,
// as 3 x Size x Size values (CHW).
//
// A sample's crop and flip depend on (Seed, epoch, index) alone, as
// Augment's: whichever rank decodes it, so np=N trains on the images
// np=1 does.
type ImageSet struct {
	*Folder
	View
	replaced sync.Map // sample index -> the index Skip put in its place
}

// View is how an image becomes a sample: torchvision's ImageNet
// transforms, as ImageSet describes them.
type View struct {
	Size, Resize int
	Train        bool // the training view; false: the evaluation view, no flip
	Crop, Flip   bool
	Mean, Std    [3]float32
	Seed         uint64
	Workers      int // decoding goroutines per batch (at least 1)
	// Skip, when set, is told of each sample that does not decode (its
	// path and why), which is then replaced: in a folder by the next
	// sample in index order that does (a function of the index alone, so
	// every np reads the same replacements), in tar shards by the batch's
	// next good sample (TarSet.decode). Either way the steps stay the
	// same. Unset, a bad sample is the batch's error.
	Skip func(path string, err error)
}

// IsImageFolder reports whether dir holds train/ and val/ image folders.
func IsImageFolder(dir string) bool {
	for _, split := range []string{"train", "val"} {
		if st, err := os.Stat(filepath.Join(dir, split)); err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// Len is the number of samples.
func (s *ImageSet) Len() int { return len(s.Paths) }

// SampleSize is the values of one sample, 3 x Size x Size.
func (s *ImageSet) SampleSize() int { return 3 * s.Size * s.Size }

// Batch decodes and transforms samples idx into x (len(idx) x
// SampleSize) and their labels into y, across Workers goroutines. The
// first failing sample (in idx order) is the error, naming its file.
func (s *ImageSet) Batch(x []float32, y []int32, idx []int, epoch int) error {
	n := s.SampleSize()
	errs := make([]error, len(idx))
	ForEach(len(idx), s.Workers, func(b int) {
		y[b], errs[b] = s.sampleOrNext(x[b*n:(b+1)*n], idx[b], epoch)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sampleOrNext writes sample i, or with Skip the first sample from i on
// that decodes, into dst, and returns its label.
func (s *ImageSet) sampleOrNext(dst []float32, i, epoch int) (int32, error) {
	i0 := i
	for tries := 0; ; tries++ {
		err := s.sample(dst, i, epoch)
		if err == nil {
			if tries > 0 {
				s.replaced.Store(i0, i)
			}
			return s.Labels[i], nil
		}
		if s.Skip == nil {
			return 0, err
		}
		s.Skip(s.Paths[i], err)
		if tries+1 >= s.Len() {
			return 0, fmt.Errorf("image folder %s: no image decodes (--skip-bad)", s.Root)
		}
		i = (i + 1) % s.Len()
	}
}

// Used is the file sample i is read from: its own, or the one Skip put
// in its place.
func (s *ImageSet) Used(i int) string {
	if r, ok := s.replaced.Load(i); ok {
		return s.Paths[r.(int)]
	}
	return s.Paths[i]
}

// decoded recycles decoding buffers between samples.
var decoded = sync.Pool{New: func() any { return new([]uint8) }}

// sample writes sample i's view for epoch into dst.
func (s *ImageSet) sample(dst []float32, i, epoch int) error {
	b, err := os.ReadFile(s.Paths[i])
	if err != nil {
		return err
	}
	return s.render(dst, b, s.Paths[i], i, epoch)
}

// render decodes image file b (name names it in errors) and writes its
// view for sample i of epoch into dst.
func (s *View) render(dst []float32, b []byte, name string, i, epoch int) error {
	buf := decoded.Get().(*[]uint8)
	defer decoded.Put(buf)
	pix, w, h, err := decodeBytesInto(*buf, b, name)
	if err != nil {
		return err
	}
	if cap(pix) > cap(*buf) {
		*buf = pix
	}
	var view []uint8
	r := rand.New(rand.NewPCG(s.Seed^0x1a6e5e7, uint64(epoch)<<40^uint64(i)))
	if s.Train && s.Crop {
		box := RandomResizedCropBox(w, h, [2]float64{0.08, 1}, [2]float64{3. / 4, 4. / 3}, r)
		view = TrainCrop(pix, w, h, box, s.Size, s.Flip && r.Uint64()&1 == 1)
	} else {
		view = EvalCrop(pix, w, h, s.Resize, s.Size)
		if s.Train && s.Flip && r.Uint64()&1 == 1 {
			flipRows(view, s.Size, s.Size, 3)
		}
	}
	Normalize(dst, view, s.Size, s.Size, s.Mean, s.Std)
	return nil
}
