package exec

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// envPropagationHelper makes this test binary, run as a task, play its
// part in TestPropagation (tasks in these tests have no mount program).
const envPropagationHelper = "BERTH_EXEC_TEST_PROPAGATION"

// TestMain lets this test binary serve as the executor its tasks run under,
// and as a task that mounts.
func TestMain(m *testing.M) {
	executor.RunIfExecutor()
	if os.Getenv(envPropagationHelper) == "1" {
		os.Exit(propagationHelper())
	}
	os.Exit(m.Run())
}

// propagationHelper waits for the test's go on /ctl, says whether the
// host's mount at /data/fromhost is visible, then mounts a tmpfs at
// /data/fromtask with a marker file in it.
func propagationHelper() int {
	if _, err := os.ReadFile("/ctl"); err != nil {
		fmt.Fprintln(os.Stderr, "reading /ctl:", err)
		return 1
	}
	if _, err := os.Stat("/data/fromhost/marker"); err == nil {
		fmt.Println("host-mount-visible")
	}
	if err := unix.Mount("tmpfs", "/data/fromtask", "tmpfs", 0, "size=1m"); err != nil {
		fmt.Fprintln(os.Stderr, "mounting tmpfs:", err)
		return 1
	}
	if err := os.WriteFile("/data/fromtask/marker", nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "writing marker:", err)
		return 1
	}
	return 0
}
