// Gradient compression on the ring's wire (--compress fp16|bf16): chunks
// travel as 16-bit floats and are reduced in float32 on arrival.
#include <string.h>
#include <mpi.h>
#include "shim.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VEC
#endif

// bf16 is a float's top 16 bits, rounded to nearest even; NaN stays NaN.
// Written as a select, not an early return, so that GCC vectorises the
// loops that call it.
static inline unsigned short to_bf16(float x) {
	unsigned u;
	memcpy(&u, &x, 4);
	unsigned rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	unsigned quiet = (u >> 16) | 0x40u;
	return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float from_bf16(unsigned short h) {
	unsigned u = (unsigned)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

// fp16 through GCC's _Float16: F16C instructions in the x86-64-v3 clone,
// libgcc's conversion otherwise. Beyond 65504 it is Inf, which the
// trainer's finite check then reports.
static inline unsigned short to_f16(float x) {
	_Float16 h = (_Float16)x;
	unsigned short u;
	memcpy(&u, &h, 2);
	return u;
}

static inline float from_f16(unsigned short u) {
	_Float16 h;
	memcpy(&h, &u, 2);
	return (float)h;
}

VEC void tr_encode16(unsigned short *dst, const float *src, long n, int kind) {
	if (kind == TR_BF16)
		for (long i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
	else
		for (long i = 0; i < n; i++) dst[i] = to_f16(src[i]);
}

// tr_decode16 sets dst = src (add == 0) or dst += src (add != 0).
VEC void tr_decode16(float *dst, const unsigned short *src, long n, int kind, int add) {
	if (kind == TR_BF16) {
		if (add)
			for (long i = 0; i < n; i++) dst[i] += from_bf16(src[i]);
		else
			for (long i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
	} else {
		if (add)
			for (long i = 0; i < n; i++) dst[i] += from_f16(src[i]);
		else
			for (long i = 0; i < n; i++) dst[i] = from_f16(src[i]);
	}
}

// tr_quantize16 rounds buf to the wire format in place: the owner of a
// reduced chunk does this before the all-gather, so that every rank ends
// with the bits the others received.
VEC void tr_quantize16(float *buf, long n, int kind) {
	if (kind == TR_BF16)
		for (long i = 0; i < n; i++) buf[i] = from_bf16(to_bf16(buf[i]));
	else
		for (long i = 0; i < n; i++) buf[i] = from_f16(to_f16(buf[i]));
}

enum { TR_RING16_TAG = 0x72 };

// tr_ring_step16 is tr_ring_step with 16-bit floats on the wire: each
// segment of send is encoded into a send slot just before it goes, each
// arriving segment is decoded into dst (added under reduce). scratch holds
// nbuf receive slots then nbuf send slots of seg values each.
int tr_ring_step16(MPI_Comm c, int left, int right, const float *send, long n_send,
                   float *dst, long n_recv, unsigned short *scratch, long seg, int nbuf, int reduce, int kind) {
	int rc;
	if (nbuf > 16) nbuf = 16;
	unsigned short *rslot = scratch, *sslot = scratch + (long)nbuf * seg;
	long sends = (n_send + seg - 1) / seg, recvs = (n_recv + seg - 1) / seg;
	long next_send = 0, next_recv = 0, done_recv = 0, done_send = 0;
	MPI_Request rq[32];
	long seg_of[32];
	for (int i = 0; i < 2 * nbuf; i++) rq[i] = MPI_REQUEST_NULL;
	for (int i = 0; i < nbuf && next_recv < recvs; i++, next_recv++) {
		long off = next_recv * seg, n = n_recv - off < seg ? n_recv - off : seg;
		seg_of[i] = next_recv;
		rc = MPI_Irecv(rslot + (long)i * seg, (int)n, MPI_UINT16_T, left, TR_RING16_TAG, c, &rq[i]);
		if (rc != MPI_SUCCESS) return rc;
	}
	for (int i = 0; i < nbuf && next_send < sends; i++, next_send++) {
		long off = next_send * seg, n = n_send - off < seg ? n_send - off : seg;
		tr_encode16(sslot + (long)i * seg, send + off, n, kind);
		rc = MPI_Isend(sslot + (long)i * seg, (int)n, MPI_UINT16_T, right, TR_RING16_TAG, c, &rq[nbuf + i]);
		if (rc != MPI_SUCCESS) return rc;
	}
	while (done_recv < recvs || done_send < sends) {
		int idx;
		rc = MPI_Waitany(2 * nbuf, rq, &idx, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) return rc;
		if (idx == MPI_UNDEFINED) break;
		if (idx < nbuf) {
			long k = seg_of[idx], off = k * seg, n = n_recv - off < seg ? n_recv - off : seg;
			tr_decode16(dst + off, rslot + (long)idx * seg, n, kind, reduce);
			done_recv++;
			if (next_recv < recvs) {
				off = next_recv * seg;
				n = n_recv - off < seg ? n_recv - off : seg;
				seg_of[idx] = next_recv++;
				rc = MPI_Irecv(rslot + (long)idx * seg, (int)n, MPI_UINT16_T, left, TR_RING16_TAG, c, &rq[idx]);
				if (rc != MPI_SUCCESS) return rc;
			}
		} else {
			done_send++;
			if (next_send < sends) {
				int j = idx - nbuf;
				long off = next_send * seg, n = n_send - off < seg ? n_send - off : seg;
				next_send++;
				tr_encode16(sslot + (long)j * seg, send + off, n, kind);
				rc = MPI_Isend(sslot + (long)j * seg, (int)n, MPI_UINT16_T, right, TR_RING16_TAG, c, &rq[idx]);
				if (rc != MPI_SUCCESS) return rc;
			}
		}
	}
	return MPI_SUCCESS;
}
