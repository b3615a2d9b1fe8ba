package steptrace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// The package opens its file once per process, so this is its only test
// that marks.
func TestMark_AppendsWholeLinesFromManyGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace")
	t.Setenv(EnvFile, path)
	before := time.Now().UnixNano()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { Mark("alloc-"+strconv.Itoa(i), ClaimSent) })
	}
	wg.Wait()
	after := time.Now().UnixNano()

	raw, err := os.ReadFile(path)
	must.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	must.SliceLen(t, 50, lines)
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		must.SliceLen(t, 3, f, must.Sprintf("line %q", l))
		ns, err := strconv.ParseInt(f[0], 10, 64)
		must.NoError(t, err)
		must.Between(t, before, ns, after)
		must.Eq(t, ClaimSent, f[2])
		seen[f[1]] = true
	}
	must.MapLen(t, 50, seen)
}
