package cluster

import (
	"os"
	"testing"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// TestMain lets this test binary act as the task executor that raw_exec
// and exec start (they re-execute the running binary).
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	os.Exit(m.Run())
}
