package data

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Fashion-MNIST's per-pixel mean and standard deviation over its training
// set, on the [0, 1] scale.
const (
	fashionMean = 0.2860
	fashionStd  = 0.3530
)

// ErrNotFound wraps errors for a dataset directory or file that does not
// exist, so callers can say how to install it.
var ErrNotFound = errors.New("dataset not found")

// LoadMNIST reads an MNIST-format directory (Fashion-MNIST as Debian's
// dataset-fashion-mnist installs it): train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte, each raw or with .gz.
func LoadMNIST(dir string) (train, test *Dataset, err error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("%w: %s is not a directory", ErrNotFound, dir)
	}
	train, err = loadMNISTSplit(dir, "train")
	if err != nil {
		return nil, nil, err
	}
	test, err = loadMNISTSplit(dir, "t10k")
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

func loadMNISTSplit(dir, prefix string) (*Dataset, error) {
	imgPath, err := findFile(dir, prefix+"-images-idx3-ubyte")
	if err != nil {
		return nil, err
	}
	lblPath, err := findFile(dir, prefix+"-labels-idx1-ubyte")
	if err != nil {
		return nil, err
	}
	img, err := ReadIDX(imgPath)
	if err != nil {
		return nil, err
	}
	lbl, err := ReadIDX(lblPath)
	if err != nil {
		return nil, err
	}
	if len(img.Dims) != 3 {
		return nil, fmt.Errorf("%s: images need 3 dimensions (N, rows, cols), header has %v", imgPath, img.Dims)
	}
	if len(lbl.Dims) != 1 {
		return nil, fmt.Errorf("%s: labels need 1 dimension, header has %v", lblPath, lbl.Dims)
	}
	if img.Dims[0] != lbl.Dims[0] {
		return nil, fmt.Errorf("%s has %d images but %s has %d labels", imgPath, img.Dims[0], lblPath, lbl.Dims[0])
	}
	d, err := NewDataset(filepath.Base(dir)+"/"+prefix, img.Data, lbl.Data, 1, img.Dims[1], img.Dims[2], 10,
		[]float32{fashionMean}, []float32{fashionStd})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lblPath, err)
	}
	return d, nil
}

// findFile returns dir/name.gz or dir/name, whichever exists.
func findFile(dir, name string) (string, error) {
	for _, p := range []string{filepath.Join(dir, name+".gz"), filepath.Join(dir, name)} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: neither %s nor %s.gz in %s", ErrNotFound, name, name, dir)
}
