// Package fuzz holds checkpoint's fuzz target, FuzzLoadCheckpoint, and
// the model layout it loads into. It is a package of its own so that its
// test build imports checkpoint and params and nothing more: checkpoint's
// own tests build models through package model, and `go test -fuzz`
// compiles every dependency of the test binary again with coverage
// instrumentation, model's C kernels included (minutes of gcc on an empty
// build cache: scripts/test.sh's side checks).
package fuzz

import "train/params"

// MLPConfig is the fuzzed model's configuration as model.Config.String
// writes it: an MLP with one hidden layer of 3, input 1x2x2, 2 classes.
const MLPConfig = `{"kind":"mlp","hidden":[3],"input":[1,2,2],"classes":2}`

// MLP is the parameter layout model.Build gives MLPConfig (nn.Sequential's
// names: net.0 and net.2, the ReLU between them net.1), written out here
// so that this package need not import model. The seed corpus was written
// with that model; checkpoint's TestFuzzLayout checks that the two agree.
func MLP() *params.Params {
	p := &params.Params{}
	p.Add("net.0.weight", 3, 4)
	p.Add("net.0.bias", 3)
	p.Add("net.2.weight", 2, 3)
	p.Add("net.2.bias", 2)
	p.Alloc()
	return p
}
