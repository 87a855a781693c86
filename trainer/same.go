package trainer

import (
	"fmt"
	"strings"

	"train/mpi"
)

// sameOptions ends the job, before any collective whose size the options
// set, when a rank runs other options than rank 0: an mpirun MPMD line, a
// TRAIN_* variable set on one host only, another build of train. Ranks
// that disagree on the model fail in a broadcast with MPI_ERR_TRUNCATE or
// hang; on the learning rate they train for the whole run and fail the
// replica check at its end; on --seed they train silently wrong (the seed
// cuts every batch into the ranks' shards). same is Config.Same: one
// "--name value" entry per option, and the build.
func sameOptions(w *mpi.World, same []string) error {
	mine := strings.Join(same, "\x00") // argv holds no NUL
	n := []int64{int64(len(mine))}
	if err := w.BcastInt64(n, 0); err != nil {
		return err
	}
	root := make([]byte, n[0])
	copy(root, mine) // rank 0's goes out; the others' is overwritten
	if len(root) > 0 {
		if err := w.BcastBytes(root, 0); err != nil {
			return err
		}
	}
	var theirs []string
	if len(root) > 0 {
		theirs = strings.Split(string(root), "\x00")
	}
	return Agree(w, differs(same, theirs))
}

// differs names the first entry of mine that is not rank 0's (root).
// Entries are "--name value", and "build REVISION" (Config.Same).
func differs(mine, root []string) error {
	if len(mine) == 0 && len(root) == 0 {
		return nil
	}
	build := fmt.Errorf("this rank runs another build of train than rank 0 (%s here, %s there): every rank must run the same build",
		entry(mine, "build"), entry(root, "build"))
	if len(mine) != len(root) || entry(mine, "build") != entry(root, "build") {
		return build
	}
	theirs := map[string]string{}
	for _, e := range root {
		theirs[key(e)] = e
	}
	for _, e := range mine {
		r, ok := theirs[key(e)]
		switch {
		case !ok:
			return build
		case r != e:
			return fmt.Errorf("%s here, %s on rank 0: every rank must run the same options (the command line, and TRAIN_* variables on every host)", e, r)
		}
	}
	return nil
}

// key is an entry's name: "--lr" of "--lr 0.1".
func key(e string) string {
	k, _, _ := strings.Cut(e, " ")
	return k
}

// entry is the entry of list named name, or "no NAME".
func entry(list []string, name string) string {
	for _, e := range list {
		if key(e) == name {
			return e
		}
	}
	return "no " + name
}
