// The shared-memory transport within a host (shm.c, shm.go).
#include <stddef.h>
#include <stdint.h>
int tr_shm_map(const char *name, size_t bytes, int create, void **base);
int tr_shm_unlink(const char *name);
void tr_shm_unmap(void *base, size_t bytes);
int tr_shm_allreduce(void *base, size_t ctl, size_t stride, int rank, int size, int oversub, size_t off, size_t n,
                     int mean, uint64_t seq, uint64_t *bad);
int tr_shm_bcast(void *base, size_t ctl, size_t stride, int rank, int size, int oversub, int root, size_t off,
                 size_t n, uint64_t seq, uint64_t *bad);
