package model

import "math"

// SoftmaxCrossEntropy is torch.nn.CrossEntropyLoss (mean reduction) on
// logits (n, classes) and labels (n). It returns the mean loss and the
// number of samples whose largest logit is their label, and writes the
// gradient of the mean loss into dlogits (n, classes): (softmax - onehot)
// / n. Sums are in float64; the max is subtracted before exp.
func SoftmaxCrossEntropy(dlogits, logits []float32, labels []int32, n, classes int) (loss float64, correct int) {
	inv := 1 / float64(n)
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		y := int(labels[i])
		if best == y {
			correct++
		}
		m := float64(row[best])
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		lse := m + math.Log(sum)
		loss += lse - float64(row[y])
		if dlogits != nil {
			d := dlogits[i*classes : (i+1)*classes]
			for j, v := range row {
				d[j] = float32(math.Exp(float64(v)-lse) * inv)
			}
			d[y] -= float32(inv)
		}
	}
	return loss * inv, correct
}
