#include "shim.h"

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
