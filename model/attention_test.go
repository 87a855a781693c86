package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"train/internal/near"
)

// attentionRef is causal attention in float64, the formulas written out
// one position at a time: the reference for par.c's blocked products.
// qkv (n, t, 3c) and dout (n, t, c) in; o (n, t, c), p (n, heads, t, t)
// and dqkv (n, t, 3c) out.
func attentionRef(qkv, dout []float32, n, t, c, heads int, scale float64) (o, p, dqkv []float64) {
	hd, c3 := c/heads, 3*c
	o, p, dqkv = make([]float64, n*t*c), make([]float64, n*heads*t*t), make([]float64, n*t*c3)
	at := func(s, i, part, h, d int) int { return s*t*c3 + i*c3 + part*c + h*hd + d }
	for s := range n {
		for h := range heads {
			pr := p[(s*heads+h)*t*t:]
			dp := make([]float64, t*t)
			for i := range t {
				m := math.Inf(-1)
				for j := 0; j <= i; j++ {
					var dot float64
					for d := range hd {
						dot += float64(qkv[at(s, i, 0, h, d)]) * float64(qkv[at(s, j, 1, h, d)])
					}
					pr[i*t+j] = dot * scale
					m = math.Max(m, pr[i*t+j])
				}
				var sum float64
				for j := 0; j <= i; j++ {
					pr[i*t+j] = math.Exp(pr[i*t+j] - m)
					sum += pr[i*t+j]
				}
				for j := 0; j <= i; j++ {
					pr[i*t+j] /= sum
					for d := range hd {
						o[s*t*c+i*c+h*hd+d] += pr[i*t+j] * float64(qkv[at(s, j, 2, h, d)])
					}
				}
				// dP_ij = dO_i . v_j; dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij') scale.
				var rowdot float64
				for j := 0; j <= i; j++ {
					for d := range hd {
						dp[i*t+j] += float64(dout[s*t*c+i*c+h*hd+d]) * float64(qkv[at(s, j, 2, h, d)])
					}
					rowdot += pr[i*t+j] * dp[i*t+j]
				}
				for j := 0; j <= i; j++ {
					ds := pr[i*t+j] * (dp[i*t+j] - rowdot) * scale
					for d := range hd {
						dqkv[at(s, i, 0, h, d)] += ds * float64(qkv[at(s, j, 1, h, d)])
						dqkv[at(s, j, 1, h, d)] += ds * float64(qkv[at(s, i, 0, h, d)])
						dqkv[at(s, j, 2, h, d)] += pr[i*t+j] * float64(dout[s*t*c+i*c+h*hd+d])
					}
				}
			}
		}
	}
	return o, p, dqkv
}

// TestAttentionCausal: the attention pass (forward: probabilities and
// output; backward: dq, dk, dv) against attentionRef, for contexts under,
// at and past par.c's ABLOCK of 64 rows (150: blocks of 64, 64 and 22),
// with the probabilities' upper triangle exactly zero; and the same bits
// at 1, 2 and 3 threads.
func TestAttentionCausal(t *testing.T) {
	defer SetThreads(1)
	const n, c, heads = 2, 32, 2
	for _, tt := range []int{5, 64, 150} {
		rng := rand.New(rand.NewPCG(uint64(tt), 3))
		qkv, dout := make([]float32, n*tt*3*c), make([]float32, n*tt*c)
		randn(rng, qkv)
		randn(rng, dout)
		scale := 1 / math.Sqrt(float64(c/heads))
		wo, wp, wd := attentionRef(qkv, dout, n, tt, c, heads, scale)
		var first [3][]float32
		for _, threads := range []int{1, 2, 3} {
			SetThreads(threads)
			o, p, dqkv := make([]float32, n*tt*c), make([]float32, n*heads*tt*tt), make([]float32, n*tt*3*c)
			for i := range p {
				p[i] = float32(math.NaN()) // stale values the products must not read
			}
			attentionForward(o, p, qkv, n, tt, c, heads, float32(scale))
			attentionBackward(dqkv, dout, qkv, p, n, tt, c, heads, float32(scale))
			for name, pair := range map[string][2][]float64{"output": {wo, widen(o)}, "probabilities": {wp, widen(p)}, "dqkv": {wd, widen(dqkv)}} {
				if err := near.Check(pair[0], pair[1], 2e-5); err != nil {
					t.Errorf("T %d, %d threads, %s: %v", tt, threads, name, err)
				}
			}
			for u := range n * heads {
				for i := range tt {
					for j := i + 1; j < tt; j++ {
						if v := p[u*tt*tt+i*tt+j]; math.Float32bits(v) != 0 {
							t.Fatalf("T %d, %d threads: probability [%d][%d][%d] = %v above the diagonal, want +0", tt, threads, u, i, j, v)
						}
					}
				}
			}
			if threads == 1 {
				first = [3][]float32{o, p, dqkv}
				continue
			}
			for k, got := range [][]float32{o, p, dqkv} {
				if i := firstDiff(got, first[k]); i >= 0 {
					t.Errorf("T %d, %d threads: result %d differs from one thread's at %d: %v, want %v", tt, threads, k, i, got[i], first[k][i])
				}
			}
		}
	}
}
