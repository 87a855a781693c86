package data

import (
	"fmt"
	"strconv"
	"strings"
)

// Source names a dataset: a directory of MNIST-format IDX files (Fashion-
// MNIST) or of CIFAR-10 binary batches, recognised by their file names, or
// "synthetic" with a shape and a sample count.
type Source struct {
	Dir              string // or "synthetic"
	SyntheticShape   string // "CxHxW", e.g. 3x32x32
	SyntheticSamples int
	Seed             uint64
}

// Load reads (or makes) the training and test sets src names.
func Load(src Source) (train, test *Dataset, err error) {
	if src.Dir == "synthetic" {
		c, h, w, err := ParseShape(src.SyntheticShape)
		if err != nil {
			return nil, nil, err
		}
		return Synthetic(src.SyntheticSamples, c, h, w, 10, src.Seed)
	}
	if IsCIFAR(src.Dir) {
		return LoadCIFAR(src.Dir)
	}
	return LoadMNIST(src.Dir)
}

// ParseShape reads "CxHxW".
func ParseShape(s string) (c, h, w int, err error) {
	parts := strings.Split(s, "x")
	var v [3]int
	if len(parts) == 3 {
		for i, p := range parts {
			if v[i], err = strconv.Atoi(p); err != nil || v[i] <= 0 {
				break
			}
		}
	}
	if len(parts) != 3 || err != nil || v[0] <= 0 || v[1] <= 0 || v[2] <= 0 {
		return 0, 0, 0, fmt.Errorf("--synthetic-shape %q: want CxHxW, e.g. 3x32x32", s)
	}
	return v[0], v[1], v[2], nil
}
