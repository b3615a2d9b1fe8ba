package agent

import (
	"os"
	"testing"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// TestMain lets this test binary serve as the executor that raw_exec tasks
// (the dev plugin's) run under.
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	os.Exit(m.Run())
}
