package compat

import (
	"os"
	"testing"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// TestMain lets this test binary serve as the executor that the -dev
// agent's raw_exec tasks run under.
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	os.Exit(m.Run())
}
