#include "shim.h"

#include <stdlib.h>
#include <string.h>

static MPI_Datatype tr_type(int t) {
	switch (t) {
	case TR_F32: return MPI_FLOAT;
	case TR_F64: return MPI_DOUBLE;
	case TR_I64: return MPI_INT64_T;
	default:     return MPI_BYTE;
	}
}

static MPI_Op tr_op(int o) {
	switch (o) {
	case TR_MAX: return MPI_MAX;
	case TR_MIN: return MPI_MIN;
	default:     return MPI_SUM;
	}
}

// tr_init initialises MPI unless something already did, asking for
// MPI_THREAD_MULTIPLE, and makes MPI_COMM_WORLD return error codes.
int tr_init(int *provided) {
	int flag = 0;
	int rc = MPI_Initialized(&flag);
	if (rc != MPI_SUCCESS) return rc;
	rc = flag ? MPI_Query_thread(provided)
	          : MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

// tr_world duplicates MPI_COMM_WORLD (so our traffic never matches a
// library's) and reads the node-local rank and size from a shared-memory
// split of it.
int tr_world(MPI_Comm *out, int *lrank, int *lsize) {
	int rc = MPI_Comm_dup(MPI_COMM_WORLD, out);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) return rc;
	int rank;
	rc = MPI_Comm_rank(*out, &rank);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm local;
	rc = MPI_Comm_split_type(*out, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_rank(local, lrank);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_size(local, lsize);
	int rc2 = MPI_Comm_free(&local);
	return rc != MPI_SUCCESS ? rc : rc2;
}

// tr_split_shared makes the communicator of the ranks sharing this
// node's memory (MPI_COMM_TYPE_SHARED), ranked as in c.
int tr_split_shared(MPI_Comm c, MPI_Comm *out, int *rank, int *size) {
	int r;
	int rc = MPI_Comm_rank(c, &r);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, out);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(*out, rank);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_size(*out, size);
	return rc;
}

// tr_reduce_sum sums buf over c into root's buf, in place there.
int tr_reduce_sum(MPI_Comm c, void *buf, int count, int type, int root, int me) {
	if (me == root) return MPI_Reduce(MPI_IN_PLACE, buf, count, tr_type(type), MPI_SUM, root, c);
	return MPI_Reduce(buf, NULL, count, tr_type(type), MPI_SUM, root, c);
}

int tr_allreduce(MPI_Comm c, void *buf, int count, int type, int op) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, count, tr_type(type), tr_op(op), c);
}

int tr_bcast(MPI_Comm c, void *buf, int count, int type, int root) {
	return MPI_Bcast(buf, count, tr_type(type), root, c);
}

int tr_barrier(MPI_Comm c) { return MPI_Barrier(c); }

int tr_free(MPI_Comm *c) { return MPI_Comm_free(c); }

int tr_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

void tr_error_string(int code, char *buf, int *len) {
	if (MPI_Error_string(code, buf, len) != MPI_SUCCESS) *len = 0;
}

int tr_split(MPI_Comm in, int color, int key, MPI_Comm *out, int *rank, int *size) {
	int rc = MPI_Comm_split(in, color, key, out);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(*out, rank);
	if (rc == MPI_SUCCESS) rc = MPI_Comm_size(*out, size);
	return rc;
}

int tr_dup(MPI_Comm in, MPI_Comm *out) {
	int rc = MPI_Comm_dup(in, out);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
}

// The reduction kernels, compiled with -O3 so GCC vectorises them (the
// restrict qualifiers promise no aliasing). Memory-bound: SSE2, the x86-64
// baseline, already outruns DRAM; see BenchmarkAdd.
void tr_add_f32(float *restrict dst, const float *restrict src, long n) {
	for (long i = 0; i < n; i++) dst[i] += src[i];
}

void tr_scale_f32(float *restrict dst, float s, long n) {
	for (long i = 0; i < n; i++) dst[i] *= s;
}

// A ring step's messages carry, in their tag, the length of the slice the
// sender's call was given (modulo TR_RING_CODES) and whether the message
// ends the sender's part of the step; the receiver takes any tag and
// checks both, and each message's count, against its own call. So ranks
// that passed slices of different lengths (a bug: the same code cuts the
// buckets on every rank) fail at the step where the difference shows,
// instead of one finishing early or waiting for a message that never
// comes; an empty part still sends one empty message for that reason.
// No message is added where the parts are not empty. MPI guarantees tags
// up to 32767: TR_RING_TAG + 2 * 8190 + 1 = 32765.
enum { TR_RING_TAG = 0x4000, TR_RING_CODES = 8191 };

static int ring_tag(long code, int last) { return TR_RING_TAG + (int)(code % TR_RING_CODES) * 2 + last; }

// ring_check fills bad and returns TR_RING_MISMATCH where a message with
// status st, count got, was not the one the receiver expected (want
// values, ending its part or not).
static int ring_check(const MPI_Status *st, long got, long want, int last, long code, struct tr_ring_bad *bad) {
	if (got == want && st->MPI_TAG == ring_tag(code, last)) return MPI_SUCCESS;
	bad->got = got, bad->want = want;
	bad->other_length = st->MPI_TAG < TR_RING_TAG || (st->MPI_TAG - TR_RING_TAG) / 2 != code % TR_RING_CODES;
	bad->ends = st->MPI_TAG & 1;
	bad->should_end = last;
	return TR_RING_MISMATCH;
}

// ring_truncated is ring_check's for a message longer than its receive.
static int ring_truncated(int rc, long want, struct tr_ring_bad *bad) {
	int cls;
	if (MPI_Error_class(rc, &cls) != MPI_SUCCESS || cls != MPI_ERR_TRUNCATE) return rc;
	bad->got = -1, bad->want = want, bad->other_length = 0, bad->ends = bad->should_end = 0;
	return TR_RING_MISMATCH;
}

// ring_abandon cancels the receives still posted in rq[0..n) before an
// early return, so that none lands in memory after it.
static void ring_abandon(MPI_Request *rq, int n) {
	for (int i = 0; i < n; i++)
		if (rq[i] != MPI_REQUEST_NULL) {
			MPI_Cancel(&rq[i]);
			MPI_Request_free(&rq[i]);
		}
}

// tr_ring_step is one step of a ring allreduce: send n_send floats of send
// to rank right while receiving n_recv floats from rank left, on the wire
// as float32 (kind 0) or 16-bit floats (TR_F16, TR_BF16: compress.c), for
// a call on a slice of code floats.
//
// reduce == 0 (all-gather), float32: one message each way, the data
// landing straight in dst.
// Otherwise both sides cut their message into segments of seg values;
// incoming segments land in nbuf scratch slots of seg values and are added
// into dst (reduce) or decoded into it as they arrive, while later
// segments are still on the wire, and each slot is reposted as soon as it
// is consumed. Sends run in a window of nbuf segments too, 16-bit ones
// encoded into nbuf send slots after the receive slots. MPI's
// non-overtaking rule matches the segments in order; the communicator is
// the ring's own, so nothing else can match.
//
// The step is blocking: when it returns no request is pending, so Go
// memory handed in is never kept by C beyond the call (on a mismatch its
// sends are left to finish or to the abort that follows).
int tr_ring_step(MPI_Comm c, int left, int right, const float *send, long n_send, float *dst, long n_recv,
                 void *scratch, long seg, int nbuf, int reduce, int kind, long code, struct tr_ring_bad *bad) {
	int rc;
	MPI_Status st;
	int got;
	if (kind == 0 && !reduce) {
		MPI_Request rq[2];
		rc = MPI_Irecv(dst, (int)n_recv, MPI_FLOAT, left, MPI_ANY_TAG, c, &rq[0]);
		if (rc != MPI_SUCCESS) return rc;
		rc = MPI_Isend(send, (int)n_send, MPI_FLOAT, right, ring_tag(code, 1), c, &rq[1]);
		if (rc != MPI_SUCCESS) { ring_abandon(rq, 1); return rc; }
		rc = MPI_Wait(&rq[0], &st);
		if (rc != MPI_SUCCESS) return ring_truncated(rc, n_recv, bad);
		MPI_Get_count(&st, MPI_FLOAT, &got);
		if ((rc = ring_check(&st, got, n_recv, 1, code, bad)) != MPI_SUCCESS) return rc;
		return MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
	}
	if (nbuf > 16) nbuf = 16;
	MPI_Datatype type = kind ? MPI_UINT16_T : MPI_FLOAT;
	size_t size = kind ? 2 : 4;
	char *rslot = scratch, *sslot = rslot + (size_t)nbuf * seg * size;
	// An empty part is one empty message.
	long sends = n_send ? (n_send + seg - 1) / seg : 1, recvs = n_recv ? (n_recv + seg - 1) / seg : 1;
	long next_send = 0, next_recv = 0, done_recv = 0, done_send = 0;
	// rq[0..nbuf) receives into slot i; rq[nbuf..2nbuf) sends.
	MPI_Request rq[32];
	long seg_of[32];
	for (int i = 0; i < 2 * nbuf; i++) rq[i] = MPI_REQUEST_NULL;
#define SEG(total, k) ((total) - (k) * seg < seg ? (total) - (k) * seg : seg)
	// Each receive takes up to a whole slot, so that a longer segment than
	// expected is counted, not truncated.
	for (int i = 0; i < nbuf && next_recv < recvs; i++, next_recv++) {
		seg_of[i] = next_recv;
		rc = MPI_Irecv(rslot + (size_t)i * seg * size, (int)seg, type, left, MPI_ANY_TAG, c, &rq[i]);
		if (rc != MPI_SUCCESS) { ring_abandon(rq, nbuf); return rc; }
	}
	for (int i = 0; i < nbuf && next_send < sends; i++, next_send++) {
		long off = next_send * seg, n = SEG(n_send, next_send);
		const void *from = n ? send + off : NULL;
		if (kind) {
			if (n) tr_encode16((unsigned short *)(sslot + (size_t)i * seg * size), send + off, n, kind);
			from = sslot + (size_t)i * seg * size;
		}
		rc = MPI_Isend(from, (int)n, type, right, ring_tag(code, next_send == sends - 1), c, &rq[nbuf + i]);
		if (rc != MPI_SUCCESS) { ring_abandon(rq, nbuf); return rc; }
	}
	while (done_recv < recvs || done_send < sends) {
		int idx;
		rc = MPI_Waitany(2 * nbuf, rq, &idx, &st);
		if (rc != MPI_SUCCESS) { ring_abandon(rq, nbuf); return rc; }
		if (idx == MPI_UNDEFINED) break;
		if (idx < nbuf) {
			long k = seg_of[idx], off = k * seg, n = SEG(n_recv, k);
			MPI_Get_count(&st, type, &got);
			if ((rc = ring_check(&st, got, n, k == recvs - 1, code, bad)) != MPI_SUCCESS) {
				ring_abandon(rq, nbuf);
				return rc;
			}
			void *slot = rslot + (size_t)idx * seg * size;
			if (n && kind)
				tr_decode16(dst + off, slot, n, kind, reduce);
			else if (n)
				tr_add_f32(dst + off, slot, n);
			done_recv++;
			if (next_recv < recvs) {
				seg_of[idx] = next_recv++;
				rc = MPI_Irecv(slot, (int)seg, type, left, MPI_ANY_TAG, c, &rq[idx]);
				if (rc != MPI_SUCCESS) { ring_abandon(rq, nbuf); return rc; }
			}
		} else {
			done_send++;
			if (next_send < sends) {
				void *slot = sslot + (size_t)(idx - nbuf) * seg * size;
				long off = next_send * seg, n = SEG(n_send, next_send);
				const void *from = send + off; // n > 0: only the first send may be empty
				if (kind) {
					tr_encode16(slot, send + off, n, kind);
					from = slot;
				}
				rc = MPI_Isend(from, (int)n, type, right, ring_tag(code, next_send == sends - 1), c, &rq[idx]);
				next_send++;
				if (rc != MPI_SUCCESS) { ring_abandon(rq, nbuf); return rc; }
			}
		}
	}
#undef SEG
	return MPI_SUCCESS;
}

int tr_send(MPI_Comm c, const void *buf, int count, int type, int dest, int tag) {
	return MPI_Send(buf, count, tr_type(type), dest, tag, c);
}

int tr_iprobe(MPI_Comm c, int from, int tag, int *flag, int *source) {
	MPI_Status st;
	int rc = MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, tag, c, flag, &st);
	if (rc == MPI_SUCCESS && *flag) *source = st.MPI_SOURCE;
	return rc;
}

int tr_probe(MPI_Comm c, int tag, int *source) {
	MPI_Status st;
	int rc = MPI_Probe(MPI_ANY_SOURCE, tag, c, &st);
	if (rc == MPI_SUCCESS) *source = st.MPI_SOURCE;
	return rc;
}

int tr_recv(MPI_Comm c, void *buf, int count, int type, int source, int tag) {
	return MPI_Recv(buf, count, tr_type(type), source, tag, c, MPI_STATUS_IGNORE);
}

int tr_sendrecv(MPI_Comm c, const void *send, int scount, int dest, void *recv, int rcount, int source, int tag) {
	return MPI_Sendrecv(send, scount, MPI_BYTE, dest, tag, recv, rcount, MPI_BYTE, source, tag, c, MPI_STATUS_IGNORE);
}

// tr_exchange posts nrecv receives, then nsend sends, and waits for all of
// them: message i (receives first) is counts[i] values of types[i] at
// bufs[i], from or to peers[i] with tags[i]. A rank that has posted every
// receive it expects before it sends can always take a peer's message, so
// ranks that all exchange this way never wait on each other in a cycle.
// Blocking: no request outlives the call.
int tr_exchange(MPI_Comm c, int nrecv, int nsend, void **bufs, const int *counts, const int *types, const int *peers, const int *tags) {
	int n = nrecv + nsend;
	MPI_Request stack[16], *rq = stack;
	if (n > 16) rq = malloc(sizeof(MPI_Request) * n);
	if (!rq) return MPI_ERR_NO_MEM;
	int rc = MPI_SUCCESS, posted = 0;
	for (; posted < n && rc == MPI_SUCCESS; posted++) {
		int i = posted;
		if (i < nrecv)
			rc = MPI_Irecv(bufs[i], counts[i], tr_type(types[i]), peers[i], tags[i], c, &rq[i]);
		else
			rc = MPI_Isend(bufs[i], counts[i], tr_type(types[i]), peers[i], tags[i], c, &rq[i]);
	}
	if (rc == MPI_SUCCESS) {
		rc = MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
	} else {
		// Cancel and free what was posted before the failure: no request
		// may outlive the call.
		for (int i = 0; i < posted - 1; i++) {
			MPI_Cancel(&rq[i]);
			MPI_Request_free(&rq[i]);
		}
	}
	if (rq != stack) free(rq);
	return rc;
}

// Non-blocking point-to-point for the pipeline's activations and
// gradients (request.go): the request handle lives in the caller's Request.
int tr_isend(MPI_Comm c, const void *buf, int count, int type, int dest, int tag, MPI_Request *rq) {
	return MPI_Isend(buf, count, tr_type(type), dest, tag, c, rq);
}

int tr_irecv(MPI_Comm c, void *buf, int count, int type, int source, int tag, MPI_Request *rq) {
	return MPI_Irecv(buf, count, tr_type(type), source, tag, c, rq);
}

int tr_wait(MPI_Request *rq) { return MPI_Wait(rq, MPI_STATUS_IGNORE); }

int tr_test(MPI_Request *rq, int *done) { return MPI_Test(rq, done, MPI_STATUS_IGNORE); }
