// Package gpu is train's CUDA path: the driver, NVRTC, cuBLAS, cuDNN and
// NCCL opened at run time with dlopen (shim.c; the binary neither links
// nor needs CUDA, and a missing library is an error only when --device
// cuda asks for it), the process's context and stream (Ctx, Open with
// Options), device buffers (Buf), the model's layers on NCHW device
// buffers with the host model's flat layouts (Net, from model.Specs), our
// kernels compiled by NVRTC at start-up for the device's compute
// capability (kernels/kernels.cu), the optimizers (Optim), our ring
// allreduce over CUDA IPC or pinned host buffers (Ring), and NCCL. It reads
// no environment variable: Options and the ring's mode come from the
// caller (train's --gpu-* and --lib* options).
package gpu
