package executor

import (
	"os"
	"testing"
)

// TestMain lets this test binary serve as the executor Launch starts.
func TestMain(m *testing.M) {
	RunIfExecutor()
	os.Exit(m.Run())
}
