package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-io/berth/api"
)

func init() {
	register("alloc fs", func(ui *UI) Command { return &AllocFSCommand{Meta: Meta{ui: ui}} })
}

// AllocFSCommand lists or prints files of an allocation's directory.
type AllocFSCommand struct{ Meta }

func (c *AllocFSCommand) Synopsis() string { return "List or print files of an allocation's directory" }

func (c *AllocFSCommand) Help() string {
	return `Usage: berth alloc fs [options] <allocation> [<path>]

  Lists a directory of an allocation's directory, or prints a file of it.
  Paths are relative to the allocation directory ("/" is its root; each
  task has a directory named after it, the shared one is "alloc"). Paths
  never leave it: ".." and symlinks that point outside are refused. The
  files are read from the agent of the node that runs the allocation.
  Needs read-fs in the allocation's namespace.

FS Options:

  -stat
    Describe the path instead of listing or printing it.

  -job
    Take the first argument as a job ID and use an allocation of that job.

  -json
    With -stat or a directory, print JSON.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

// allocFileInfo is one entry of alloc fs (Nomad's AllocFileInfo).
type allocFileInfo struct {
	Name        string
	IsDir       bool
	Size        int64
	FileMode    string
	ModTime     string
	ContentType string
}

func (c *AllocFSCommand) Run(args []string) int {
	fs := c.flagSet("alloc fs", false)
	var stat, byJob, asJSON bool
	fs.BoolVar(&stat, "stat", false, "")
	fs.BoolVar(&byJob, "job", false, "")
	fs.BoolVar(&asJSON, "json", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return flagErr(c.ui, c.Help(), "This command takes an allocation ID (or with -job a job ID) and optionally a path.")
	}
	p := "/"
	if fs.NArg() == 2 {
		p = fs.Arg(1)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	lc := &AllocLogsCommand{Meta: c.Meta}
	var alloc *api.Allocation
	if byJob {
		alloc, err = lc.jobAlloc(client, fs.Arg(0))
	} else {
		alloc, err = lc.resolveAlloc(client, fs.Arg(0))
	}
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	addrs, err := c.logAddrs(client, alloc)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int {
		c.ui.Error("Error reading %q of allocation %s: %v", p, shortID(alloc.ID, c.verbose), err)
		return 1
	}
	var info allocFileInfo
	if err := c.fsGet(ctx, addrs, "stat", alloc.ID, p, &info); err != nil {
		return fail(err)
	}
	switch {
	case stat:
		if asJSON {
			return c.printJSON(info)
		}
		c.ui.Output("%s", table([][]string{{"Mode", "Size", "Modified Time", "Name"}, fileRow(info)}))
	case info.IsDir:
		var list []allocFileInfo
		if err := c.fsGet(ctx, addrs, "ls", alloc.ID, p, &list); err != nil {
			return fail(err)
		}
		if asJSON {
			return c.printJSON(list)
		}
		rows := [][]string{{"Mode", "Size", "Modified Time", "Name"}}
		for _, f := range list {
			rows = append(rows, fileRow(f))
		}
		c.ui.Output("%s", table(rows))
	default:
		body, err := c.fsOpen(ctx, addrs, "cat", alloc.ID, p)
		if err != nil {
			return fail(err)
		}
		defer body.Close()
		if _, err := io.Copy(c.ui.Out, body); err != nil {
			return fail(err)
		}
	}
	return 0
}

func fileRow(f allocFileInfo) []string {
	name := f.Name
	if f.IsDir {
		name += "/"
	}
	size := humanBytes(f.Size)
	if f.IsDir {
		size = "<dir>"
	}
	return []string{f.FileMode, size, f.ModTime, name}
}

func (c *AllocFSCommand) printJSON(v any) int {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	c.ui.Output("%s", b)
	return 0
}

// fsOpen asks the first agent that answers (the node's, then the
// configured one) for /v1/client/fs/<op>/<alloc>?path=p.
func (c *AllocFSCommand) fsOpen(ctx context.Context, addrs []string, op, allocID, p string) (io.ReadCloser, error) {
	var lastErr error
	for _, addr := range addrs {
		resp, err := c.rawGet(ctx, addr, "/v1/client/fs/"+op+"/"+allocID, url.Values{"path": {p}})
		if err == nil {
			return resp.Body, nil
		}
		lastErr = err
		if !isConnErr(err) {
			break // the agent answered: its answer stands
		}
	}
	var se *api.StatusError
	if errors.As(lastErr, &se) {
		return nil, errors.New(se.Body)
	}
	return nil, lastErr
}

func (c *AllocFSCommand) fsGet(ctx context.Context, addrs []string, op, allocID, p string, out any) error {
	body, err := c.fsOpen(ctx, addrs, op, allocID, p)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("decoding the agent's answer: %w", err)
	}
	return nil
}
