// Package gpu is train's CUDA path (issue 8). So far: the CUDA driver
// opened at run time with dlopen (libcuda.so.1; the binary neither links
// nor needs CUDA), device discovery and the local-rank-to-GPU mapping.
// Device buffers, NVRTC kernels, cuBLAS/cuDNN and the GPU ring come next.
package gpu
