package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
func BuildBerth(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		dir, err := mkdirTemp()
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "berth")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/berth")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/berth: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

// mkdirTemp makes a dir that outlives any one test (the binary is shared
// by every test in the process); the OS temp dir is cleaned by the system.
func mkdirTemp() (string, error) { return os.MkdirTemp("", "berth-test-bin-") }
