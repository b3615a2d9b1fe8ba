package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
	buildOut  []byte
)

// BuildBerth builds ./cmd/berth once per test binary and returns its path,
// for tests that run the real binary as a task or process.
//
// The binary goes to <repo>/.bin/test/berth (ignored by git), one file per
// checkout that every test process reuses and replaces: nothing is left
// in the temp dir, however a test process ends. Go's build cache makes the
// rebuild a relink. Each process links to a file of its own and renames
// it into place, so test processes running in parallel never see a half
// written binary, and a process still running the old file keeps it.
func BuildBerth(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildBin, buildOut, buildErr = buildInto(filepath.Join(repoRoot(), ".bin", "test"), "")
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/berth: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

var (
	tagsMu    sync.Mutex
	tagsBuilt = map[string]string{}
)

// BuildBerthTags is BuildBerth with build tags (e.g. "crashpoints"), into
// <repo>/.bin/test/berth-<tags>, built once per test binary and tag set.
func BuildBerthTags(t testing.TB, tags string) string {
	t.Helper()
	tagsMu.Lock()
	defer tagsMu.Unlock()
	if bin, ok := tagsBuilt[tags]; ok {
		return bin
	}
	bin, out, err := buildInto(filepath.Join(repoRoot(), ".bin", "test"), tags)
	if err != nil {
		t.Fatalf("go build -tags %s ./cmd/berth: %v\n%s", tags, err, out)
	}
	tagsBuilt[tags] = bin
	return bin
}

// repoRoot is the repository checkout this file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func buildInto(dir, tags string) (bin string, out []byte, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "berth")
	args := []string{"build"}
	if tags != "" {
		bin += "-" + strings.ReplaceAll(tags, ",", "-")
		args = append(args, "-tags", tags)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", append(args, "-o", tmp, "./cmd/berth")...)
	cmd.Dir = repoRoot()
	if out, err = cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", out, err
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", nil, err
	}
	return bin, nil, nil
}
