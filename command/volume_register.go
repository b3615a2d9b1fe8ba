package command

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/jobspec"
)

func init() {
	register("volume register", func(ui *UI) Command { return &VolumeRegisterCommand{Meta: Meta{ui: ui}} })
}

// VolumeRegisterCommand registers an existing volume.
type VolumeRegisterCommand struct {
	Meta
	// stdin is read for the file "-"; nil means os.Stdin.
	stdin io.Reader
}

func (c *VolumeRegisterCommand) Synopsis() string { return "Register an existing CSI volume" }

func (c *VolumeRegisterCommand) Help() string {
	return `Usage: berth volume register [options] <file>

  Registers a volume that already exists in the storage provider, from a
  volume specification in HCL or JSON ("-" reads standard input; see
  'berth volume init'). The servers check it against the plugin's
  capabilities. Registering a registered volume updates it.
` + sharedHelp(false)
}

func (c *VolumeRegisterCommand) Run(args []string) int {
	vol, client, code := c.volumeSpecArgs(c.flagSet("volume register", false), c.Help(), args, c.stdin)
	if code != 0 {
		return code
	}
	resp, _, err := client.CSIVolumes().RegisterOpts(&api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{vol}},
		&api.WriteOptions{Namespace: vol.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("registering volume %q", vol.ID), err))
		return 1
	}
	printWarnings(c.ui, resp.Warnings)
	c.ui.Output("Volume %q registered", vol.ID)
	return 0
}

// volumeSpecArgs parses the flags and the one argument of volume create
// and volume register, a volume specification file (see parseVolumeArg),
// and makes the client. A nonzero code is the exit code of a failure it
// has reported.
func (m *Meta) volumeSpecArgs(fs *flag.FlagSet, help string, args []string, stdin io.Reader) (vol *api.CSIVolume, client *api.Client, code int) {
	if err := parseArgs(fs, args); err != nil {
		return nil, nil, flagErr(m.ui, help, "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return nil, nil, flagErr(m.ui, help, "This command takes one argument: the volume specification file (or - for standard input).")
	}
	vol, err := parseVolumeArg(fs.Arg(0), stdin)
	if err != nil {
		m.ui.Error("Error parsing volume specification %s:\n%v", fs.Arg(0), err)
		return nil, nil, 1
	}
	if client, err = m.client(); err != nil {
		m.ui.Error("Error: %v", err)
		return nil, nil, 1
	}
	return vol, client, 0
}

// parseVolumeArg parses a volume specification file, or standard input
// for "-".
func parseVolumeArg(path string, stdin io.Reader) (*api.CSIVolume, error) {
	if path != "-" {
		return jobspec.ParseVolumeFile(path)
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	src, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return jobspec.ParseVolume("<stdin>", src)
}

// printWarnings prints the servers' warnings, one per line.
func printWarnings(ui *UI, w string) {
	if w = strings.TrimSpace(w); w != "" {
		ui.Output("Warnings:\n%s\n", w)
	}
}
