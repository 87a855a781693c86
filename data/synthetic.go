package data

import (
	"fmt"
	"math/rand/v2"
)

// Synthetic makes a dataset of random images and labels for benchmarks
// without a dataset: n samples of c x h x w bytes, drawn from seed, and a
// test set of a tenth of that. Nothing can be learnt from it.
func Synthetic(n, c, h, w, classes int, seed uint64) (train, test *Dataset, err error) {
	if n <= 0 || c <= 0 || h <= 0 || w <= 0 || classes <= 0 {
		return nil, nil, fmt.Errorf("synthetic data: bad shape %d x %dx%dx%d, %d classes", n, c, h, w, classes)
	}
	mean, std := make([]float32, c), make([]float32, c)
	for i := range c {
		mean[i], std[i] = 0.5, 0.29 // uniform bytes
	}
	make1 := func(name string, n int, stream uint64) (*Dataset, error) {
		rng := rand.New(rand.NewPCG(seed, stream))
		img := make([]byte, n*c*h*w)
		for i := range img {
			img[i] = byte(rng.Uint32())
		}
		lbl := make([]byte, n)
		for i := range lbl {
			lbl[i] = byte(rng.IntN(classes))
		}
		return NewDataset(name, img, lbl, c, h, w, classes, mean, std)
	}
	if train, err = make1("synthetic/train", n, 1); err != nil {
		return nil, nil, err
	}
	test, err = make1("synthetic/test", max(n/10, 1), 2)
	return train, test, err
}
