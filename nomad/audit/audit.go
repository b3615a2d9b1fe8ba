// Package audit writes the server's audit log: one JSON object per line
// for every authorized write (and every refused one, with the reason),
// in a file per server that is rotated by size. Reads are not recorded.
//
// The log is for people answering "who changed this?": each entry has the
// time, the token's accessor (never its secret), the endpoint, the object
// and the result.
package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Entry is one line of the log.
type Entry struct {
	Time     time.Time
	Accessor string
	Endpoint string
	Object   string `json:",omitempty"`
	// Result is "ok", "error" (authorized, then failed) or "denied".
	Result string
	Error  string `json:",omitempty"`
	// Index is the Raft index of a successful write, when known.
	Index uint64 `json:",omitempty"`
}

// Log appends entries to Path, moving it to Path+".1" (replacing an older
// one) once it passes MaxBytes. A nil *Log records nothing.
type Log struct {
	path     string
	maxBytes int64

	// lock guards f and size.
	lock sync.Mutex
	f    *os.File
	size int64
}

// DefaultMaxBytes is the size at which the log rotates.
const DefaultMaxBytes = 16 << 20

// Open opens (or creates) the log at path.
func Open(path string, maxBytes int64) (*Log, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l := &Log{path: path, maxBytes: maxBytes}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: opening %s: %w", l.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Path is the current file.
func (l *Log) Path() string { return l.path }

// Record appends e. Errors are returned for the caller to log; a full
// disk must not fail the write it describes.
func (l *Log) Record(e Entry) error {
	if l == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit log: encoding entry: %w", err)
	}
	b = append(b, '\n')
	l.lock.Lock()
	defer l.lock.Unlock()
	if l.f == nil {
		return errors.New("audit log: closed")
	}
	if l.size > 0 && l.size+int64(len(b)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("audit log: writing %s: %w", l.path, err)
	}
	return nil
}

func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit log: closing %s: %w", l.path, err)
	}
	l.f = nil
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("audit log: rotating %s: %w", l.path, err)
	}
	return l.open()
}

// Recent returns up to n of the newest entries, oldest first, from the
// current file and the rotated one.
func (l *Log) Recent(n int) ([]Entry, error) {
	if l == nil {
		return nil, nil
	}
	l.lock.Lock()
	defer l.lock.Unlock()
	var out []Entry
	for _, p := range []string{l.path + ".1", l.path} {
		es, err := readAll(p)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	if len(out) > n && n > 0 {
		out = out[len(out)-n:]
	}
	return out, nil
}

func readAll(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	return decode(f)
}

func decode(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A torn last line after a crash: skip it, keep the rest.
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Close closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.lock.Lock()
	defer l.lock.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
