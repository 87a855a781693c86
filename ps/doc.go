// Package ps is the parameter-server protocol of --strategy ps-sync and
// ps-async: K servers each hold a contiguous shard of the flat parameter
// buffer and the optimizer state for it; W workers compute gradients and
// exchange them for parameters. It knows only package mpi (messages) and
// package optim (the servers' updates); the trainer decides who is a
// worker and who a server.
//
// # Ranks
//
// On the communicator the protocol runs on, workers are ranks 0..W-1.
// Servers are ranks W..W+K-1 (their own ranks), or, colocated, ranks
// 0..K-1 again, each a goroutine beside that rank's worker on a duplicated
// communicator (Client.ServerRank says which).
//
// # Messages
//
// Three tags, so that no message can match a receive meant for another
// kind (a colocated worker and its server send to and receive from the
// same rank, and MPI matches on source, tag and communicator only):
//
//	TagHeader (worker -> server): 4 int64s: kind, update t, lr (float64 bits), pull
//	TagGrad   (worker -> server): the worker's gradient for the server's shard
//	TagData   (server -> worker): the shard's parameters, and for State
//	                              the optimizer's state buffers after them
//
// The requests, by the header's kind:
//
//	Step  (1): a gradient follows (TagGrad). The server applies it, and if
//	           pull is 1 answers with the shard's parameters (TagData).
//	           ps-sync: every worker sends Step t for each t, and the server
//	           answers all of them once it has averaged all W gradients.
//	           ps-async: the server applies each gradient scaled by 1/W as it
//	           comes, and answers unless the worker is more than the
//	           staleness bound ahead of the slowest; then the answer waits
//	           until the slowest pushes.
//	Pull  (4): (ps-async) answer with the parameters, within the same bound.
//	Fetch (3): (ps-async) answer with the parameters now.
//	State (2): answer with the parameters, then each optimizer state buffer
//	           in name order (rank 0, before a checkpoint).
//	Stop  (0): this worker is done; a server returns once all W are.
//
// # Why it cannot deadlock
//
// A worker's requests go out in one mpi.Exchange: every answer's receive
// is posted before any header or gradient is sent. A server's blocking
// send of an answer therefore always finds its receive, whatever the
// worker is doing (for instance, waiting for another server to take its
// gradient), so no cycle of waits can form between workers and servers.
// (Before this, workers pushed with blocking sends and then received: with
// two servers, three workers and a staleness bound, server A could block
// answering worker j, j block pushing to server B, B block answering k,
// and k block pushing to A.)
package ps
