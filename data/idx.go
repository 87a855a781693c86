package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// IDX is one IDX file (LeCun's MNIST format, also Fashion-MNIST's): a
// header of big-endian dimensions and the unsigned bytes that follow.
type IDX struct {
	Dims []int
	Data []byte
}

// maxIDXBytes bounds what a header may claim (16 GiB), before any check
// against the file's real size.
var maxIDXBytes int64 = 1 << 34 // a variable so fuzzing can lower it

// ReadIDX reads an IDX file of unsigned bytes (type 0x08), raw or gzipped
// (recognised by its content, not its name). It checks the magic number,
// the dimensions and that the data is exactly as long as they say.
func ReadIDX(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	compressed := false
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: bad gzip stream: %v", path, err)
		}
		defer zr.Close()
		r, compressed = zr, true
	}
	var mapped func(off, n int64) ([]byte, error)
	if !compressed && st.Size() >= mapIDXBytes {
		mapped = func(off, n int64) ([]byte, error) { return mapFile(f, off, n) }
	}
	m, err := parseIDX(r, st.Size(), compressed, mapped)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// parseIDX reads an IDX stream. fileSize bounds the data of a raw file
// before allocating; a compressed stream is read as it comes, so memory
// grows only with data that is really there. mapped, when set, gives a
// raw file's n data bytes from offset off instead of reading them.
func parseIDX(r io.Reader, fileSize int64, compressed bool, mapped func(off, n int64) ([]byte, error)) (*IDX, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("not an IDX file: too short for the 4-byte magic number (%v)", truncated(err))
	}
	if hdr[0] != 0 || hdr[1] != 0 {
		return nil, fmt.Errorf("not an IDX file: magic number %#02x%02x%02x%02x does not start with two zero bytes", hdr[0], hdr[1], hdr[2], hdr[3])
	}
	if hdr[2] != 0x08 {
		return nil, fmt.Errorf("IDX data type %#02x not supported (only 0x08, unsigned byte)", hdr[2])
	}
	nd := int(hdr[3])
	if nd < 1 || nd > 4 {
		return nil, fmt.Errorf("IDX header claims %d dimensions; expected 1 to 4", nd)
	}
	raw := make([]byte, 4*nd)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("header truncated: %d dimensions need %d bytes (%v)", nd, 4*nd, truncated(err))
	}
	dims := make([]int, nd)
	total := int64(1)
	for i := range dims {
		d := int64(binary.BigEndian.Uint32(raw[4*i:]))
		if d == 0 {
			return nil, fmt.Errorf("IDX dimension %d is zero", i)
		}
		total *= d
		if total > maxIDXBytes {
			return nil, fmt.Errorf("IDX header claims more than %d bytes of data", int64(maxIDXBytes))
		}
		dims[i] = int(d)
	}
	hdrLen := int64(4 + 4*nd)
	if !compressed && fileSize-hdrLen != total {
		return nil, fmt.Errorf("header says %v = %d bytes of data, file holds %d: truncated or not this format", dims, total, fileSize-hdrLen)
	}
	var data []byte
	if compressed {
		// Grow with the stream: a lying header cannot make us allocate.
		var buf bytes.Buffer
		n, err := io.Copy(&buf, io.LimitReader(r, total+1))
		if err != nil {
			return nil, fmt.Errorf("after %d of %d data bytes: %v", n, total, truncated(err))
		}
		if n != total {
			return nil, fmt.Errorf("header says %v = %d bytes of data, stream holds %d: truncated or not this format", dims, total, n)
		}
		data = buf.Bytes()
	} else if mapped != nil {
		var err error
		if data, err = mapped(hdrLen, total); err != nil {
			return nil, fmt.Errorf("data: %v", err)
		}
	} else {
		data = make([]byte, total)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("data: %v", truncated(err))
		}
	}
	return &IDX{Dims: dims, Data: data}, nil
}

// mapIDXBytes is the size from which a raw IDX file is mapped rather
// than read: the ranks of a host then share the page cache's one copy,
// and a rank's start-up neither copies the file nor faults in fresh pages
// for it (mpirun -np 2 of one MLP step on raw Fashion-MNIST: 1.0 s, of
// which 0.3 s was reading it). Smaller files are read: a mapping is never
// undone, since the dataset's bytes live as long as the process.
const mapIDXBytes = 1 << 20

// mapFile maps n bytes of f from off, read-only. The mapping outlives f.
// A file truncated under a running job would fault its readers (SIGBUS),
// as with any mapped dataset.
func mapFile(f *os.File, off, n int64) ([]byte, error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, int(off+n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %v", err)
	}
	return b[off : off+n : off+n], nil
}

// truncated names an unexpected end of input plainly.
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("file truncated")
	}
	return err
}
