// Package builtin assembles Berth's built-in task drivers for the client.
package builtin

import (
	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/exec"
	"github.com/berth-io/berth/plugins/drivers/rawexec"
)

// Drivers returns the built-in drivers by name: raw_exec and exec. The
// client decides which of them to enable. stateDir holds the executor's
// per-task files (spec, status file, log) and must survive client
// restarts: the client passes <data_dir>/client/drivers. Every call
// returns new driver instances.
//
// The mock driver (package drivers/mock) is not built in: it is a test
// double, and only tests add it (command/agent's Config.ExtraDrivers).
func Drivers(logger hclog.Logger, stateDir string) map[string]drivers.Driver {
	return DriversWith(logger, stateDir, Options{})
}

// Options are the agent config's settings for the built-in drivers.
type Options struct {
	// ExecAllowCaps is exec's capability bounding set (nil: its default).
	ExecAllowCaps []string
}

// DriversWith is Drivers with the agent config's driver settings.
func DriversWith(logger hclog.Logger, stateDir string, opts Options) map[string]drivers.Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("driver")
	return map[string]drivers.Driver{
		rawexec.Name: rawexec.New(logger, rawexec.Config{StateDir: stateDir}),
		exec.Name:    exec.New(logger, exec.Config{StateDir: stateDir, AllowCaps: opts.ExecAllowCaps}),
	}
}
