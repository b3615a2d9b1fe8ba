package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Rotator keeps one stream's files within its Config (see the package
// doc). Rotate is safe to call from one goroutine at a time; Run is that
// goroutine.
type Rotator struct {
	dir, task, stream string
	cfg               Config
	logger            hclog.Logger
	// collapse is collapseHead; tests replace it to exercise the fallback.
	collapse func(*os.File, int64) error
}

// NewRotator returns a rotator for the stream of task whose files are in dir.
func NewRotator(dir, task, stream string, cfg Config, logger hclog.Logger) *Rotator {
	return &Rotator{
		dir: dir, task: task, stream: stream, cfg: cfg.WithDefaults(),
		logger:   logger.Named("logs").With("stream", stream),
		collapse: collapseHead,
	}
}

// Run rotates every Interval until ctx is done, then returns ctx.Err().
func (r *Rotator) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := r.Rotate(); err != nil {
				r.logger.Warn("rotating task log failed", "error", err)
			}
		}
	}
}

// Rotate cuts the live file once if it is at least MaxFileSize and deletes
// the oldest files beyond MaxFiles. It reports whether it cut.
func (r *Rotator) Rotate() (bool, error) {
	cut, err := r.cut()
	return cut, errors.Join(err, r.prune())
}

func (r *Rotator) cut() (bool, error) {
	live := Path(r.dir, r.task, r.stream, 0)
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("opening %s: %w", live, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("reading size of %s: %w", live, err)
	}
	size := st.Size()
	if size < r.cfg.MaxFileSize {
		return false, nil
	}
	blk, err := blockSize(f)
	if err != nil || blk <= 0 {
		blk = 4096
	}
	// Collapse whole blocks only, and never up to EOF (the kernel refuses).
	n := size - size%blk
	if n == size {
		n -= blk
	}
	idx, err := rotatedIndexes(r.dir, Base(r.task, r.stream))
	if err != nil {
		return false, fmt.Errorf("listing rotated logs in %s: %w", r.dir, err)
	}
	next := 1
	if len(idx) > 0 {
		next = idx[len(idx)-1] + 1
	}
	dst := Path(r.dir, r.task, r.stream, next)

	// The head goes to its numbered file first, made durable and visible,
	// and only then leaves the live file: a crash in between duplicates
	// lines, it never loses them.
	if err := copyRange(f, 0, n, dst); err != nil {
		return false, err
	}
	if n > 0 {
		err := r.collapse(f, n)
		if err == nil {
			return true, nil
		}
		r.logger.Debug("collapsing the live log file is not supported here; copying and truncating", "error", err)
	}
	if err := appendRest(f, n, dst); err != nil {
		return false, err
	}
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("truncating %s: %w", live, err)
	}
	return true, nil
}

// copyRange writes f[off:off+n) to a new file dst (through a temporary
// name, so dst never exists half-written).
func copyRange(f *os.File, off, n int64, dst string) error {
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	_, err = io.Copy(out, io.NewSectionReader(f, off, n))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying log head to %s: %w", dst, err)
	}
	return nil
}

// appendRest appends f[off:EOF) to dst.
func appendRest(f *os.File, off int64, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dst, err)
	}
	defer out.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("seeking live log: %w", err)
	}
	if _, err := io.Copy(out, f); err != nil {
		return fmt.Errorf("copying live log to %s: %w", dst, err)
	}
	return nil
}

// prune deletes the oldest rotated files until at most MaxFiles remain,
// counting the live one.
func (r *Rotator) prune() error {
	idx, err := rotatedIndexes(r.dir, Base(r.task, r.stream))
	if err != nil {
		return fmt.Errorf("listing rotated logs in %s: %w", r.dir, err)
	}
	var errs []error
	for len(idx)+1 > r.cfg.MaxFiles {
		p := Path(r.dir, r.task, r.stream, idx[0])
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing old log %s: %w", p, err))
		}
		idx = idx[1:]
	}
	return errors.Join(errs...)
}
