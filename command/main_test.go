package command

import (
	"os"
	"testing"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// TestMain lets this test binary serve as the executor that raw_exec tasks
// run under (a -dev agent's hostpath plugin task): without it, the driver
// would start this binary, which would run the tests again.
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	os.Exit(m.Run())
}
