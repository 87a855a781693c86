// The thin C layer under package mpi: what gompi v0.2.0 lacks or gets wrong.
// Every function is one crossing that returns MPI's code. Datatypes and ops
// travel as small ints so that OpenMPI's handle macros stay on the C side.
#ifndef TRAIN_MPI_SHIM_H
#define TRAIN_MPI_SHIM_H
#include <mpi.h>

enum { TR_F32 = 0, TR_F64 = 1, TR_BYTE = 2, TR_I64 = 3 };
// Wire formats of the compressed ring (compress.c).
enum { TR_F16 = 1, TR_BF16 = 2 };
enum { TR_SUM = 0, TR_MAX = 1, TR_MIN = 2 };

int tr_init(int *provided);
int tr_world(MPI_Comm *out, int *lrank, int *lsize);
int tr_allreduce(MPI_Comm c, void *buf, int count, int type, int op);
int tr_bcast(MPI_Comm c, void *buf, int count, int type, int root);
int tr_barrier(MPI_Comm c);
int tr_free(MPI_Comm *c);
int tr_abort(int code);
int tr_dup(MPI_Comm in, MPI_Comm *out);
int tr_split(MPI_Comm in, int color, int key, MPI_Comm *out, int *rank, int *size);
// What a ring step's receiver found where a message was not the one it
// expected (tr_ring_step's TR_RING_MISMATCH): its count (-1: more than
// want), whether the sender's slice was of another length, and whether it
// ended the sender's part where the receiver's should (should_end) or not.
struct tr_ring_bad {
	long got, want;
	int other_length, ends, should_end;
};
enum { TR_RING_MISMATCH = -1 };
int tr_ring_step(MPI_Comm c, int left, int right, const float *send, long n_send, float *dst, long n_recv,
                 void *scratch, long seg, int nbuf, int reduce, int kind, long code, struct tr_ring_bad *bad);
void tr_add_f32(float *dst, const float *src, long n);
void tr_scale_f32(float *dst, float s, long n);
void tr_error_string(int code, char *buf, int *len);
int tr_send(MPI_Comm c, const void *buf, int count, int type, int dest, int tag);
int tr_split_shared(MPI_Comm c, MPI_Comm *out, int *rank, int *size);
int tr_reduce_sum(MPI_Comm c, void *buf, int count, int type, int root, int me);
int tr_iprobe(MPI_Comm c, int from, int tag, int *flag, int *source);
int tr_probe(MPI_Comm c, int tag, int *source);
int tr_recv(MPI_Comm c, void *buf, int count, int type, int source, int tag);
int tr_sendrecv(MPI_Comm c, const void *send, int scount, int dest, void *recv, int rcount, int source, int tag);
int tr_isend(MPI_Comm c, const void *buf, int count, int type, int dest, int tag, MPI_Request *rq);
int tr_irecv(MPI_Comm c, void *buf, int count, int type, int source, int tag, MPI_Request *rq);
int tr_wait(MPI_Request *rq);
int tr_test(MPI_Request *rq, int *done);
int tr_exchange(MPI_Comm c, int nrecv, int nsend, void **bufs, const int *counts, const int *types, const int *peers, const int *tags);

void tr_encode16(unsigned short *dst, const float *src, long n, int kind);
void tr_decode16(float *dst, const unsigned short *src, long n, int kind, int add);
void tr_quantize16(float *buf, long n, int kind);
#endif
