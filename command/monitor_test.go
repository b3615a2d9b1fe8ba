package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestMonitor_BadLevel(t *testing.T) {
	devAgent(t)
	code, _, errOut := runCLI("monitor", "-log-level", "loud")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `invalid log_level "loud"`)
	code, _, errOut = runCLI("monitor", "extra")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "takes no arguments")
}
