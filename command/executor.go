package command

import (
	"strings"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

func init() {
	register(executor.Command, func(ui *UI) Command { return &executorCommand{ui: ui} })
}

// executorCommand runs one task for the client: raw_exec and exec start
// `berth executor <spec file>` detached, so tasks outlive a client restart.
type executorCommand struct {
	ui *UI
}

func (c *executorCommand) Synopsis() string {
	return "internal: runs one task for the client (do not call directly)"
}

func (c *executorCommand) Help() string {
	return strings.TrimSpace(`
Usage: berth executor <spec file>

  Internal. The client starts one executor per raw_exec or exec task, in its
  own session so it survives the client. It starts the task described by the
  spec file, reports its pid to the client on file descriptor 3, waits for it,
  and writes its exit status to the status file beside the spec. Running it by
  hand does nothing useful.
`)
}

func (c *executorCommand) Run(args []string) int {
	return executor.Main(args)
}
