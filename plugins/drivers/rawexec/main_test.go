package rawexec

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
)

// envClientHelper makes this test binary play a client that starts one
// task and then waits to be killed (see TestSurvivesClientKill). Its value
// is the JSON of a clientHelperArgs.
const envClientHelper = "BERTH_RAWEXEC_TEST_CLIENT"

type clientHelperArgs struct {
	StateDir string
	Task     *drivers.TaskConfig
}

// TestMain lets this test binary serve as the executor its tasks run under,
// and as a client to kill.
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	if arg := os.Getenv(envClientHelper); arg != "" {
		os.Exit(clientHelper(arg))
	}
	os.Exit(m.Run())
}

// clientHelper starts the task, prints its handle as JSON on stdout and
// waits for its stdin to close (which it never does: the test kills it).
func clientHelper(arg string) int {
	var a clientHelperArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := New(hclog.NewNullLogger(), Config{StateDir: a.StateDir})
	h, err := d.StartTask(context.Background(), a.Task)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, _ = os.Stdin.Read(make([]byte, 1))
	return 0
}
