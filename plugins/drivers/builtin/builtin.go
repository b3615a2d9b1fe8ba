// Package builtin assembles Berth's built-in task drivers for the client.
package builtin

import (
	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/exec"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/plugins/drivers/rawexec"
)

// Drivers returns the built-in drivers by name: raw_exec, exec and mock.
// The client decides which of them to enable (mock is for tests and dev
// agents). stateDir holds the executor's per-task files (spec, status
// file, log) for raw_exec and exec, and must survive client restarts: the
// client passes <data_dir>/client/drivers. Every call returns new driver
// instances; mock tasks are shared between instances (see package mock).
func Drivers(logger hclog.Logger, stateDir string) map[string]drivers.Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.Named("driver")
	return map[string]drivers.Driver{
		rawexec.Name: rawexec.New(logger, rawexec.Config{StateDir: stateDir}),
		exec.Name:    exec.New(logger, exec.Config{StateDir: stateDir}),
		mock.Name:    mock.New(logger, mock.Config{}),
	}
}
