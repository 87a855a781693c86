package data

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CIFAR-10's binary format (https://www.cs.toronto.edu/~kriz/cifar.html):
// records of 1 label byte and 3072 pixel bytes (1024 red, 1024 green, 1024
// blue, rows of 32), 10000 records a file; the training set is
// data_batch_1.bin to data_batch_5.bin, the test set test_batch.bin.
const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	cifarRecord = 1 + cifarPixels
	// cifarMaxFile bounds a file before reading it (the real ones are
	// 30,730,000 bytes).
	cifarMaxFile = 1 << 30
)

// CIFAR-10 per-channel mean and standard deviation of the training set.
var cifarMean, cifarStd = []float32{0.4914, 0.4822, 0.4465}, []float32{0.2470, 0.2435, 0.2616}

// IsCIFAR reports whether dir holds CIFAR-10 binary batches.
func IsCIFAR(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "data_batch_1.bin"))
	return err == nil
}

// LoadCIFAR reads CIFAR-10's binary version from dir: the data_batch_N.bin
// files that exist (from 1, at least one) for training and test_batch.bin
// for testing.
func LoadCIFAR(dir string) (train, test *Dataset, err error) {
	var paths []string
	for i := 1; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("data_batch_%d.bin", i))
		if _, err := os.Stat(p); err != nil {
			break
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("%w: no data_batch_1.bin in %s", ErrNotFound, dir)
	}
	if train, err = readCIFAR("cifar10/train", paths); err != nil {
		return nil, nil, err
	}
	testPath := filepath.Join(dir, "test_batch.bin")
	if _, err := os.Stat(testPath); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: no test_batch.bin in %s", ErrNotFound, dir)
	}
	if test, err = readCIFAR("cifar10/test", []string{testPath}); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// readCIFAR reads and checks CIFAR-10 binary files into one dataset.
func readCIFAR(name string, paths []string) (*Dataset, error) {
	var images, labels []byte
	for _, p := range paths {
		img, lbl, err := ReadCIFARFile(p)
		if err != nil {
			return nil, err
		}
		images, labels = append(images, img...), append(labels, lbl...)
	}
	return NewDataset(name, images, labels, 3, cifarSide, cifarSide, 10, cifarMean, cifarStd)
}

// ReadCIFARFile reads one CIFAR-10 binary file: its size must be a whole,
// non-zero number of 3073-byte records and every label below 10. It
// returns the pixels (N x 3 x 32 x 32) and the labels.
func ReadCIFARFile(path string) (images, labels []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	switch {
	case size == 0:
		return nil, nil, fmt.Errorf("%s: empty file", path)
	case size > cifarMaxFile:
		return nil, nil, fmt.Errorf("%s: %d bytes, more than a CIFAR-10 batch file can be", path, size)
	case size%cifarRecord != 0:
		return nil, nil, fmt.Errorf("%s: %d bytes is not a whole number of %d-byte CIFAR-10 records (truncated, or not CIFAR-10's binary version)", path, size, cifarRecord)
	}
	n := int(size / cifarRecord)
	raw := make([]byte, size)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, truncated(err))
	}
	images = make([]byte, n*cifarPixels)
	labels = make([]byte, n)
	for i := range n {
		rec := raw[i*cifarRecord : (i+1)*cifarRecord]
		if rec[0] >= 10 {
			return nil, nil, fmt.Errorf("%s: record %d has label %d, not below 10 (not CIFAR-10's binary version?)", path, i, rec[0])
		}
		labels[i] = rec[0]
		copy(images[i*cifarPixels:], rec[1:])
	}
	return images, labels, nil
}
