// Command berth is the single Berth binary: agent, CLI and built-in plugins.
package main

import (
	"os"

	"github.com/berth-io/berth/command"
	// An executor process runs from this package's init, before the
	// rest of the binary initialises (see its doc).
	_ "github.com/berth-io/berth/plugins/drivers/executor/early"
)

func main() {
	os.Exit(command.Run(os.Args[1:], os.Stdout, os.Stderr))
}
