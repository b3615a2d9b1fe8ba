package command

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"

	"github.com/berth-io/berth/jobspec"
)

func init() {
	register("volume init", func(ui *UI) Command { return &VolumeInitCommand{ui: ui} })
}

// VolumeInitCommand writes an example volume spec.
type VolumeInitCommand struct{ ui *UI }

func (c *VolumeInitCommand) Synopsis() string { return "Write an example volume specification" }

func (c *VolumeInitCommand) Help() string {
	return `Usage: berth volume init [options] [<file>]

  Writes an example CSI volume specification, with a comment on every
  setting, to <file>: volume.hcl by default, volume.json with -json. An
  existing file is never overwritten. Edit it, then pass it to
  'berth volume create' or 'berth volume register'.

Init Options:

  -json
    Write the specification as JSON.
`
}

func (c *VolumeInitCommand) Run(args []string) int {
	flags := flag.NewFlagSet("volume init", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	asJSON := flags.Bool("json", false, "")
	if err := parseArgs(flags, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if flags.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: the file to write.")
	}
	path := "volume.hcl"
	if *asJSON {
		path = "volume.json"
	}
	if flags.NArg() == 1 {
		path = flags.Arg(0)
	}
	// O_EXCL: never overwrite, even a file that appears after a check.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		c.ui.Error("Volume specification file %q already exists; move it away or name another file: berth volume init <file>", path)
		return 1
	}
	if err != nil {
		c.ui.Error("Error writing %s: %v", path, err)
		return 1
	}
	_, werr := f.WriteString(jobspec.VolumeInit(*asJSON))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		c.ui.Error("Error writing %s: %v", path, err)
		return 1
	}
	c.ui.Output("Example volume specification written to %s", path)
	return 0
}
