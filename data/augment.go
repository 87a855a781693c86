package data

import "math/rand/v2"

// Augment is random cropping with zero padding and horizontal flipping,
// as for CIFAR (He et al. 2016: pad 4, random 32x32 crop, random flip).
//
// Each sample's draw depends on (Seed, epoch, sample index) alone: the
// same sample gets the same crop in the same epoch whichever rank reads
// it and however many ranks there are, so runs are reproducible and np=N
// trains on exactly the batches np=1 does.
type Augment struct {
	Pad  int  // crop after padding each side by Pad pixels; 0: no crop
	Flip bool // mirror left-right with probability 1/2
	Seed uint64
}

// On reports whether the augmentation changes anything.
func (a Augment) On() bool { return a.Pad > 0 || a.Flip }

// BatchAugmented is Batch with a's random crop and flip applied, drawn for
// epoch. The padding is pixel value 0, normalised like any pixel (as
// torchvision's RandomCrop before Normalize).
func (d *Dataset) BatchAugmented(x []float32, y []int32, idx []int, a Augment, epoch int) {
	if !a.On() {
		d.Batch(x, y, idx)
		return
	}
	s, hw := d.SampleSize(), d.H*d.W
	for b, i := range idx {
		rng := rand.NewPCG(a.Seed^0x5eed, uint64(epoch)<<40^uint64(i))
		var dy, dx int
		if a.Pad > 0 {
			span := uint64(2*a.Pad + 1)
			dy, dx = int(rng.Uint64()%span)-a.Pad, int(rng.Uint64()%span)-a.Pad
		}
		flip := a.Flip && rng.Uint64()&1 == 1
		img := d.Images[i*s : (i+1)*s]
		out := x[b*s : (b+1)*s]
		for ch := range d.C {
			lut := &d.lut[ch]
			for r := range d.H {
				sr := r + dy
				row := out[ch*hw+r*d.W : ch*hw+(r+1)*d.W]
				for c := range d.W {
					sc := c + dx
					if flip {
						sc = d.W - 1 - c + dx
					}
					if sr < 0 || sr >= d.H || sc < 0 || sc >= d.W {
						row[c] = lut[0]
					} else {
						row[c] = lut[img[ch*hw+sr*d.W+sc]]
					}
				}
			}
		}
		y[b] = int32(d.Labels[i])
	}
}
