// Package trainer runs training on a world of MPI ranks: a Session, built
// once by NewSession, and the loop (loop.go) that drives three kinds of
// unit, each a type per variant behind an interface and registered in one
// table:
//
//   - Executor (executor.go; exec_cpu.go, exec_cuda.go): the arithmetic of a
//     step on one device (--device);
//   - Strategy (strategy.go; strategy_allreduce.go, strategy_localsgd.go,
//     strategy_pssync.go, strategy_psasync.go): how the replicas stay in
//     step (--strategy);
//   - Hook (hook.go; hook_report.go, hook_metrics.go, hook_timeline.go,
//     hook_push.go, the bucket tuner in autotune.go, the bench counters in
//     benchstrat.go): what watches the run.
//
// Every rank trains on its own shard of each global batch (data.Sampler);
// rank 0 starts everyone from its parameters (fresh or from a checkpoint)
// by broadcast, logs, and alone writes checkpoints.
//
// Errors that every rank might meet during setup (bad options, missing
// data, an unwritable checkpoint directory, a corrupt checkpoint) are
// agreed on with one allreduce, so the job ends cleanly with one message
// from the lowest failing rank; a failure during training returns an error
// on the failing rank only, and main aborts the job.
//
// The options (config.go, choices.go, validate.go) are typed and grouped;
// the package reads no environment variable (main does, through the flags'
// TRAIN_* variables).
//
// The package is named trainer, not train as the design sketch has it: the
// binary built at the repository root is ./train and a directory of that
// name would take its place.
package trainer
