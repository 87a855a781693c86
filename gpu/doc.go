// Package gpu will hold the CUDA path: a dlopen shim, device buffers,
// NVRTC-compiled kernels and a reducer over device memory (issue 8). It is
// empty until then; nothing imports it.
package gpu
