// The thin C side of package gpu: the CUDA driver API opened with dlopen,
// so train builds and runs on machines without CUDA. Only the prototypes
// used are declared, with the driver's real (versioned) symbol names.
#ifndef TRAIN_GPU_SHIM_H
#define TRAIN_GPU_SHIM_H

#include <stddef.h>

// cu_load opens the driver library and resolves the functions; on failure
// it writes dlerror's message (or the missing symbol) into err.
int cu_load(const char *path, char *err, int errlen);

// The driver calls return CUresult (0 is CUDA_SUCCESS).
int cu_init(void);
int cu_device_count(int *n);
int cu_device_info(int ordinal, char *name, int namelen, int *major, int *minor, size_t *mem);
// cu_error_string is the driver's text for a CUresult.
const char *cu_error_string(int code);

#endif
