package trainer

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"train/checkpoint"
)

// shardWriters are the job ranks that write a sharded checkpoint, in file
// order, with the part each holds (stage x T + shard): on a grid the
// data-parallel rank 0 of every stage and shard, otherwise rank 0 alone.
func (s *Session) shardWriters() (ranks, parts []int) {
	if s.grid == nil {
		return []int{0}, []int{0}
	}
	return s.partLeaders()
}

// replicatedPart says whether part writes the tensors every shard of its
// stage holds whole (shard 0 does; the others hold the same values).
func (s *Session) replicatedPart(part int) bool { return s.grid == nil || part%s.grid.T == 0 }

// saveSharded writes --checkpoint-format sharded: rank 0 makes the step's
// directory and the metadata; every writer writes its own part's tensors,
// optimizer state and buffers, with no gathering; once all have, rank 0
// writes the index (it knows every part's layout) and prunes. A writer
// that fails or dies leaves no index, so the previous checkpoint stays
// the newest.
func (s *Session) saveSharded() error {
	c := &s.Cfg
	dir := checkpoint.ShardedPath(c.Checkpoint.Dir, s.State.Step)
	var meta map[string]string
	var err error
	if s.Job.Rank() == 0 {
		if meta, err = s.checkpointMeta(); err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	start := time.Now()
	ranks, parts := s.shardWriters()
	if k := slices.Index(ranks, s.Job.Rank()); k >= 0 && (s.grid != nil || s.W.Rank() == 0) {
		st := s.State
		if s.fault.is("kill-in-checkpoint", s.Job.Rank(), s.State.Step) {
			st.WrapFile = killHalfWay
		}
		s.prog.enter(opCheckpoint)
		_, err = checkpoint.WriteShard(filepath.Join(dir, checkpoint.ShardName(k, len(ranks))), s.Model.Params, &st, s.replicatedPart(parts[k]))
		s.prog.leave()
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if s.Job.Rank() != 0 {
		return nil
	}
	x := &checkpoint.Index{Metadata: maps.Clone(meta), Files: map[string]checkpoint.FileInfo{}}
	st := &s.State
	checkpoint.SetPosition(x.Metadata, st)
	optim := slices.Sorted(maps.Keys(st.Optim))
	for k, r := range ranks {
		lay := s.Model.Params
		if r != 0 {
			if lay, err = s.partLayout(parts[k]); err != nil {
				return err
			}
		}
		name := checkpoint.ShardName(k, len(ranks))
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("checkpoint %s: %v", dir, err)
		}
		x.Files[name] = checkpoint.FileInfo{Bytes: fi.Size()}
		x.Add(name, lay, optim, s.replicatedPart(parts[k]))
	}
	if err := checkpoint.WriteIndex(dir, x); err != nil {
		return err
	}
	return s.saved(dir, start)
}

// resumeShardsOnGrid resumes a grid from the sharded checkpoint at path
// without the whole model anywhere: every part's leader reads its own
// tensors from the shards holding them (its own file when the grid is
// the one that wrote it); rank 0 then places the run from the index's
// metadata. broadcastState copies each part to its replicas afterwards.
func (s *Session) resumeShardsOnGrid(path string) error {
	var err error
	if s.W.Rank() == 0 {
		err = checkpoint.LoadShards(path, s.Model.Params, &s.State)
	}
	return s.placeResumed(path, err)
}

// placeResumed ends a resume from the sharded checkpoint at path, which
// this rank read with err: rank 0 describes the run and places it (the
// schedule, the log), every rank agrees on any error, and every rank
// takes rank 0's position.
func (s *Session) placeResumed(path string, err error) error {
	if s.Job.Rank() == 0 {
		s.describeModel()
		if err == nil {
			err = s.resumed(path)
		}
	}
	if err := Agree(s.Job, err); err != nil {
		return err
	}
	if s.Job.Rank() == 0 {
		s.recordStart()
	}
	return s.bcastPosition(s.Job)
}

// newestSharded is, on rank 0 of a grid resuming, the newest checkpoint
// when it is a sharded one ("" otherwise: none, or a single file, which
// rank 0 reads whole and hands out).
func (s *Session) newestSharded() (string, error) {
	c := &s.Cfg
	paths, err := checkpoint.List(c.Checkpoint.Dir)
	if err != nil {
		return "", fmt.Errorf("--checkpoint-dir %s: %v", c.Checkpoint.Dir, err)
	}
	if len(paths) == 0 || !checkpoint.IsSharded(paths[len(paths)-1]) {
		return "", nil
	}
	return paths[len(paths)-1], nil
}
