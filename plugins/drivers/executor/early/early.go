// Package early runs the executor, or a task's init, before the rest of the
// berth binary is initialised. cmd/berth imports it for its side effect.
//
// Every exec task starts the berth binary twice (`berth executor <spec>`,
// then the executor's `executor -init` in the task's PID namespace), and a
// Go program runs the init of every package it links before main: in berth
// that is 196 packages, gRPC, the CSI and other protobuf descriptors,
// raft-wal's CRC tables, go-cmp, the regexps of nomad/structs among them,
// ~870 KB allocated and ~3 ms of CPU per start that the executor never uses.
//
// The Go specification fixes the order of package initialisation: packages
// sorted by import path, and at each step the first one whose imports are
// all initialised is initialised next. This package imports only the
// executor, so its init runs as soon as the executor's imports are
// initialised, and in an executor process it runs the executor there and
// exits. Whatever the executor can reach is initialised by then, since
// the executor's imports all are; what is not is never used.
//
// How early that is depends on what the executor imports: any ready
// package that sorts before the last of them is initialised first. So the
// executor imports the standard library and x/sys only, and not net (its
// resolver's vendored DNS package sorts after everything, so net is among
// the last to initialise) nor hclog (through regexp, it waits for the
// protobuf descriptors, go-cmp and nomad/structs). That leaves 109
// packages and ~200 KB.
// TestEarlyInit holds the binary to this.
package early

import (
	"os"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

func init() {
	// Only a process Launch started (it sets EnvReexec) runs here; `berth
	// executor` typed by hand goes through the CLI and its usage message.
	if os.Getenv(executor.EnvReexec) != "1" || len(os.Args) < 2 || os.Args[1] != executor.Command {
		return
	}
	os.Exit(executor.Main(os.Args[2:]))
}
