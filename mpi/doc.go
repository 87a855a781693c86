// Package mpi is the only package of train that touches MPI.
//
// It wraps one explicit handle, World, created once in main and passed down.
// github.com/sbromberger/gompi v0.2.0 provides rank, size and finalize; a thin
// cgo file of our own (shim.go) does what gompi cannot or gets wrong: it
// initialises MPI without log.Fatal, works on a duplicate of MPI_COMM_WORLD
// whose error handler returns codes instead of aborting, reduces in place
// (MPI_IN_PLACE), accepts empty slices, splits off the node-local
// communicator for the local rank, and turns every return code into a Go
// error carrying MPI's own error string.
//
// # Thread level
//
// World asks for MPI_THREAD_MULTIPLE and refuses to start with less. Go
// moves goroutines between OS threads, so MPI_THREAD_FUNNELED (calls only
// from the main thread) would force every collective onto one locked
// goroutine, and MPI_THREAD_SERIALIZED would make us prove that no two
// goroutines ever call at once: the communication goroutine of the
// overlapped gradient buckets and the watchdogs that come later need
// concurrent calls. Debian's OpenMPI 4.1 grants MPI_THREAD_MULTIPLE.
//
// # Failure
//
// A failed call returns an error naming the operation, the rank and MPI's
// message. The caller decides: main prints one line and calls Abort, which
// ends every rank of the job (OpenMPI's mpirun tears the others down in
// about a second).
package mpi
