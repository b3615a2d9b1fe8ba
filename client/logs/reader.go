package logs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Reader reads a stream across its files, oldest first, as one byte
// sequence. It sees the files as they were at Open: later output is not
// included (open again to see it), and a rotation while reading may make
// the live file's part repeat or skip a few bytes.
type Reader struct {
	files []*os.File
	names []string
	sizes []int64
	total int64
	off   int64
}

// Open opens the stream of task whose files are in dir. A stream without
// any file yet reads as empty.
func Open(dir, task, stream string) (*Reader, error) {
	if !ValidStream(stream) {
		return nil, fmt.Errorf("log type %q is not valid (want stdout or stderr)", stream)
	}
	idx, err := rotatedIndexes(dir, Base(task, stream))
	if err != nil {
		return nil, fmt.Errorf("listing logs of task %q: %w", task, err)
	}
	r := &Reader{}
	for _, i := range append(idx, 0) {
		p := Path(dir, task, stream, i)
		f, err := os.Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // pruned between listing and opening
			}
			r.Close()
			return nil, fmt.Errorf("opening log %s: %w", p, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			r.Close()
			return nil, fmt.Errorf("reading size of log %s: %w", p, err)
		}
		r.files = append(r.files, f)
		r.names = append(r.names, p)
		r.sizes = append(r.sizes, st.Size())
		r.total += st.Size()
	}
	return r, nil
}

// Size is the total length of the stream at Open.
func (r *Reader) Size() int64 { return r.total }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.off >= r.total {
		return 0, io.EOF
	}
	i, within := r.locate(r.off)
	remain := r.sizes[i] - within
	if int64(len(p)) > remain {
		p = p[:remain]
	}
	n, err := r.files[i].ReadAt(p, within)
	r.off += int64(n)
	if errors.Is(err, io.EOF) {
		// The file shrank under us (a rotation): skip the rest of it.
		r.off += remain - int64(n)
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("reading log %s: %w", r.names[i], err)
	}
	return n, nil
}

// locate maps a stream offset to a file and an offset within it.
func (r *Reader) locate(off int64) (int, int64) {
	for i, s := range r.sizes {
		if off < s {
			return i, off
		}
		off -= s
	}
	return len(r.sizes) - 1, r.sizes[len(r.sizes)-1]
}

// Seek implements io.Seeker; offsets are clamped to [0, Size].
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.total + offset
	default:
		return 0, fmt.Errorf("seek: invalid whence %d", whence)
	}
	r.off = min(max(abs, 0), r.total)
	return r.off, nil
}

// Close closes every file.
func (r *Reader) Close() error {
	var errs []error
	for _, f := range r.files {
		errs = append(errs, f.Close())
	}
	r.files = nil
	return errors.Join(errs...)
}
