package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func write(t *testing.T, dir string, index int, s string) {
	t.Helper()
	must.NoError(t, os.WriteFile(Path(dir, "web", Stdout, index), []byte(s), 0o644))
}

func readAll(t *testing.T, dir string) string {
	t.Helper()
	r, err := Open(dir, "web", Stdout)
	must.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	must.NoError(t, err)
	must.Eq(t, int64(len(b)), r.Size())
	return string(b)
}

func TestReader_OrderAndSeek(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 2, "bbb")
	write(t, dir, 10, "ccc") // numeric, not lexical, order
	write(t, dir, 0, "live")
	write(t, dir, 1, "aa")
	must.NoError(t, os.WriteFile(Path(dir, "web", Stdout, 3)+".tmp", []byte("ignored"), 0o644))
	must.NoError(t, os.WriteFile(Path(dir, "web", Stderr, 0), []byte("err"), 0o644))

	must.Eq(t, "aabbbccclive", readAll(t, dir))

	cases := []struct {
		name   string
		off    int64
		whence int
		want   string
	}{
		{"from start", 4, io.SeekStart, "bccclive"},
		{"from end", -6, io.SeekEnd, "cclive"},
		{"past end clamps", 100, io.SeekStart, ""},
		{"before start clamps", -100, io.SeekEnd, "aabbbccclive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(dir, "web", Stdout)
			must.NoError(t, err)
			defer r.Close()
			_, err = r.Seek(tc.off, tc.whence)
			must.NoError(t, err)
			b, err := io.ReadAll(r)
			must.NoError(t, err)
			must.Eq(t, tc.want, string(b))
		})
	}
}

func TestReader_MissingAndInvalid(t *testing.T) {
	dir := t.TempDir()
	must.Eq(t, "", readAll(t, dir))
	_, err := Open(dir, "web", "stdin")
	must.ErrorContains(t, err, `log type "stdin" is not valid`)
}

func newTestRotator(dir string, cfg Config) *Rotator {
	return NewRotator(dir, "web", Stdout, cfg, hclog.NewNullLogger())
}

func TestRotator_CutsAndPrunes(t *testing.T) {
	for _, collapse := range []bool{true, false} {
		t.Run(fmt.Sprintf("collapse=%v", collapse), func(t *testing.T) {
			dir := t.TempDir()
			r := newTestRotator(dir, Config{MaxFiles: 3, MaxFileSize: 4096})
			if !collapse {
				r.collapse = func(*os.File, int64) error { return errors.New("not supported") }
			}
			var all strings.Builder
			for i := range 5 {
				chunk := strings.Repeat(string(rune('a'+i)), 5000)
				f, err := os.OpenFile(Path(dir, "web", Stdout, 0), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				must.NoError(t, err)
				_, err = f.WriteString(chunk)
				must.NoError(t, err)
				f.Close()
				all.WriteString(chunk)

				cut, err := r.Rotate()
				must.NoError(t, err)
				must.True(t, cut)
			}
			idx, err := rotatedIndexes(dir, "web.stdout")
			must.NoError(t, err)
			must.Eq(t, []int{4, 5}, idx, must.Sprint("MaxFiles=3 keeps the live file and the two newest"))

			got := readAll(t, dir)
			must.True(t, strings.HasSuffix(all.String(), got), must.Sprint("what is kept is the newest output, in order"))
			must.Greater(t, 4096, len(got))

			cut, err := r.Rotate()
			must.NoError(t, err)
			if collapse {
				must.False(t, cut, must.Sprint("the live file keeps less than a block after a collapse"))
			}
		})
	}
}

// TestRotator_ConcurrentWriterLosesNothing rotates while another writer
// appends, as a task does: every line must survive exactly once, in order.
func TestRotator_ConcurrentWriterLosesNothing(t *testing.T) {
	dir := t.TempDir()
	live := Path(dir, "web", Stdout, 0)
	f, err := os.OpenFile(live, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	must.NoError(t, err)
	defer f.Close()
	if bs, err := blockSize(f); err != nil || collapseProbe(t, dir, bs) != nil {
		t.Skipf("the filesystem of %s cannot collapse file ranges; the copy-truncate fallback may lose lines by design", dir)
	}

	const lines = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	done := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range lines {
			fmt.Fprintf(f, "line %06d\n", i)
		}
	}()
	r := newTestRotator(dir, Config{MaxFiles: 10000, MaxFileSize: 8192})
	cuts := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		cut, err := r.Rotate()
		must.NoError(t, err)
		if cut {
			cuts++
		}
	}
	wg.Wait()
	must.Positive(t, cuts)

	var want bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&want, "line %06d\n", i)
	}
	must.Eq(t, want.String(), readAll(t, dir))
}

// collapseProbe reports whether dir's filesystem supports collapsing.
func collapseProbe(t *testing.T, dir string, bs int64) error {
	p, err := os.CreateTemp(dir, "probe")
	must.NoError(t, err)
	defer os.Remove(p.Name())
	defer p.Close()
	_, err = p.Write(make([]byte, 2*bs))
	must.NoError(t, err)
	return collapseHead(p, bs)
}
