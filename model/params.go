package model

import "train/params"

// The parameter storage and its layout live in package params (so that
// checkpoint builds without this package's C kernels); these are their
// names here, which the layers and the rest of the program use.
type (
	Params = params.Params
	Tensor = params.Tensor
	Split  = params.Split
	Tie    = params.Tie
)
