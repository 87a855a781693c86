// Package bench holds the `train bench` subcommands: measurements run
// under the same mpirun as training, printed by rank 0 as a table (or CSV)
// with the figures needed to judge them (machine memcpy bandwidth, peak
// memory per rank). Comparisons come from one run, side by side: the
// machines are shared and noisy.
package bench
