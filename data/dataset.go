package data

import "fmt"

// Dataset is a labelled image set in memory: N images of C x H x W unsigned
// bytes, stored one after another, and N labels below Classes.
type Dataset struct {
	Name    string
	Images  []byte
	Labels  []byte
	N       int
	C, H, W int
	Classes int
	// Mean and Std per channel, on the [0, 1] scale: Batch normalises with
	// them.
	Mean, Std []float32
	lut       [][256]float32
}

// NewDataset checks that images and labels agree with the shape given and
// that every label is below classes.
func NewDataset(name string, images, labels []byte, c, h, w, classes int, mean, std []float32) (*Dataset, error) {
	n := len(labels)
	if c <= 0 || h <= 0 || w <= 0 || classes <= 0 {
		return nil, fmt.Errorf("%s: bad shape %dx%dx%d with %d classes", name, c, h, w, classes)
	}
	if len(images) != n*c*h*w {
		return nil, fmt.Errorf("%s: %d labels but %d image bytes (%d images of %dx%dx%d)", name, n, len(images), len(images)/(c*h*w), c, h, w)
	}
	if len(mean) != c || len(std) != c {
		return nil, fmt.Errorf("%s: need mean and std for %d channels", name, c)
	}
	for i, l := range labels {
		if int(l) >= classes {
			return nil, fmt.Errorf("%s: label %d of sample %d is not below %d classes", name, l, i, classes)
		}
	}
	d := &Dataset{Name: name, Images: images, Labels: labels, N: n, C: c, H: h, W: w, Classes: classes, Mean: mean, Std: std}
	d.lut = make([][256]float32, c)
	for ch := range d.lut {
		for p := range 256 {
			d.lut[ch][p] = (float32(p)/255 - mean[ch]) / std[ch]
		}
	}
	return d, nil
}

// SampleSize is the number of values in one image, C x H x W.
func (d *Dataset) SampleSize() int { return d.C * d.H * d.W }

// Batch writes the normalised images of the samples idx into x (len(idx) x
// SampleSize, NCHW) and their labels into y. It panics if x or y is too
// short or an index is out of range.
func (d *Dataset) Batch(x []float32, y []int32, idx []int) {
	s := d.SampleSize()
	hw := d.H * d.W
	x = x[:len(idx)*s]
	y = y[:len(idx)]
	for b, i := range idx {
		img := d.Images[i*s : (i+1)*s]
		out := x[b*s : (b+1)*s]
		for ch := range d.C {
			lut := &d.lut[ch]
			for j, p := range img[ch*hw : (ch+1)*hw] {
				out[ch*hw+j] = lut[p]
			}
		}
		y[b] = int32(d.Labels[i])
	}
}
