package executor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestStatusFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), statusFile)
	_, err := readStatus(path)
	must.ErrorIs(t, err, errNoStatus)

	want := &Status{ExitCode: -1, Signal: 9, FinishedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	must.NoError(t, writeStatus(path, want))
	got, err := readStatus(path)
	must.NoError(t, err)
	must.Eq(t, want, got)
	_, err = os.Stat(path + ".tmp")
	must.ErrorIs(t, err, os.ErrNotExist)

	must.NoError(t, os.WriteFile(path, []byte("{"), 0o600))
	_, err = readStatus(path)
	must.ErrorContains(t, err, "decoding status file")
}
