package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Status is how a task ended, as its executor recorded it in the status
// file.
type Status struct {
	// ExitCode is the task's exit code; -1 if a signal killed it.
	ExitCode int
	// Signal is the signal that killed the task, 0 if it exited.
	Signal     int
	FinishedAt time.Time
	// Err says why the exit status is unknown; ExitCode and Signal are then
	// meaningless.
	Err string `json:",omitempty"`
}

// writeStatus writes st to path atomically: to a temporary file that is
// synced and then renamed over path, and the directory synced, so a reader
// sees either no file or the whole status, even across a crash.
func writeStatus(path string, st *Status) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("writing status file %q: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing status file %q: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("syncing the directory of status file %q: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the directory of status file %q: %w", path, err)
	}
	return nil
}

// errNoStatus: the executor has written no status file (yet).
var errNoStatus = errors.New("no status file")

// readStatus reads a status file; errNoStatus if there is none.
func readStatus(path string) (*Status, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading status file %q: %w", path, errNoStatus)
	}
	if err != nil {
		return nil, fmt.Errorf("reading status file %q: %w", path, err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("decoding status file %q: %w", path, err)
	}
	return &st, nil
}
