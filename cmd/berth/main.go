// Command berth is the single Berth binary: agent, CLI and built-in plugins.
package main

import (
	"os"

	"github.com/berth-io/berth/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:], os.Stdout, os.Stderr))
}
