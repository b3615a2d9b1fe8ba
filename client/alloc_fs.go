package client

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
)

// Reading an alloc's directory (alloc fs). Paths are relative to the
// alloc dir (<data_dir>/alloc/<alloc id>; a leading "/" is the alloc dir
// itself) and never leave it: a ".." element is refused outright, and
// every open resolves with openat2's RESOLVE_BENEATH, so a symlink the
// task left pointing outside (or an absolute one) fails with
// ErrPathEscapes instead of being followed.

// FileInfo is one file of an alloc dir, as Nomad's AllocFileInfo.
type FileInfo = structs.AllocFileInfo

// Errors of alloc fs.
var (
	// ErrPathEscapes: the path leaves the alloc dir.
	ErrPathEscapes = errors.New("the path leaves the alloc dir")
	// ErrNotRegular: cat of something that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// cleanAllocPath turns a request path into one relative to the alloc dir.
func cleanAllocPath(p string) (string, error) {
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q: '..' is not allowed: %w", p, ErrPathEscapes)
		}
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		c = "."
	}
	return c, nil
}

// openInAllocDir opens rel beneath dir with flags.
func openInAllocDir(dir, rel string, flags uint64) (*os.File, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening alloc dir: %w", err)
	}
	defer unix.Close(root)
	how := &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(root, rel, how)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.EXDEV):
			return nil, fmt.Errorf("path %q resolves outside the alloc dir (a symlink out of it): %w", "/"+strings.TrimPrefix(rel, "."), ErrPathEscapes)
		case errors.Is(err, unix.ENOENT):
			return nil, fmt.Errorf("path %q: %w", "/"+strings.TrimPrefix(rel, "."), fs.ErrNotExist)
		case err != nil:
			return nil, fmt.Errorf("opening %q in the alloc dir: %w", rel, err)
		}
		return os.NewFile(uintptr(fd), filepath.Join(dir, rel)), nil
	}
}

func (c *Client) allocDirOf(allocID string) (string, error) {
	r, err := c.runner(allocID)
	if err != nil {
		return "", err
	}
	return r.AllocDir().Dir, nil
}

// openAllocPath opens path p of the alloc's dir with flags, confined to
// that dir (see openInAllocDir).
func (c *Client) openAllocPath(allocID, p string, flags uint64) (*os.File, error) {
	dir, err := c.allocDirOf(allocID)
	if err != nil {
		return nil, err
	}
	rel, err := cleanAllocPath(p)
	if err != nil {
		return nil, err
	}
	return openInAllocDir(dir, rel, flags)
}

// AllocFSStat describes one path of an alloc's dir.
func (c *Client) AllocFSStat(allocID, p string) (*FileInfo, error) {
	f, err := c.openAllocPath(allocID, p, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return fileInfo(fi), nil
}

// AllocFSList lists a directory of an alloc's dir, by name.
func (c *Client) AllocFSList(allocID, p string) ([]*FileInfo, error) {
	f, err := c.openAllocPath(allocID, p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("path %q is a file, not a directory: %w", p, ErrNotRegular)
		}
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", p, err)
	}
	out := make([]*FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info() // lstat: a symlink is listed, not followed
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, fileInfo(fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AllocFSOpen opens a regular file of an alloc's dir for reading; the
// caller closes it.
func (c *Client) AllocFSOpen(allocID, p string) (*os.File, error) {
	// O_NONBLOCK: a FIFO must not hang the request before the check below.
	f, err := c.openAllocPath(allocID, p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("path %q is a %s: %w (list a directory instead)", p, kindOf(fi), ErrNotRegular)
	}
	return f, nil
}

func kindOf(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "directory"
	}
	return "special file (" + fi.Mode().Type().String() + ")"
}

func fileInfo(fi fs.FileInfo) *FileInfo {
	return &FileInfo{
		Name:     fi.Name(),
		IsDir:    fi.IsDir(),
		Size:     fi.Size(),
		FileMode: fi.Mode().String(),
		ModTime:  fi.ModTime(),
	}
}

// AllocFSRead reads up to limit bytes (at most structs.MaxAllocFSRead) of
// a regular file of an alloc's dir from offset; eof says the file ended.
func (c *Client) AllocFSRead(allocID, p string, offset, limit int64) ([]byte, bool, error) {
	if limit <= 0 || limit > structs.MaxAllocFSRead {
		limit = structs.MaxAllocFSRead
	}
	f, err := c.AllocFSOpen(allocID, p)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	buf := make([]byte, limit)
	n, err := f.ReadAt(buf, offset)
	if errors.Is(err, io.EOF) {
		return buf[:n], true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %q: %w", p, err)
	}
	return buf[:n], false, nil
}

// FS serves alloc fs for the servers (an agent that does not run the
// alloc asks through them).
func (e *ClientAlloc) FS(args *structs.AllocFSRequest, reply *structs.AllocFSResponse) error {
	var err error
	switch args.Op {
	case structs.AllocFSList:
		reply.Files, err = e.c.AllocFSList(args.AllocID, args.Path)
	case structs.AllocFSStat:
		reply.File, err = e.c.AllocFSStat(args.AllocID, args.Path)
	case structs.AllocFSRead:
		reply.Data, reply.EOF, err = e.c.AllocFSRead(args.AllocID, args.Path, args.Offset, args.Limit)
	default:
		err = structs.NewError(structs.CodeInvalid, "alloc fs: unknown operation %q", args.Op)
	}
	if err == nil {
		return nil
	}
	code := structs.CodeInternal
	switch {
	case structs.CodeOf(err) != "" && structs.CodeOf(err) != structs.CodeInternal:
		code = structs.CodeOf(err)
	case errors.Is(err, ErrUnknownAlloc), errors.Is(err, fs.ErrNotExist):
		code = structs.CodeNotFound
	case errors.Is(err, ErrPathEscapes), errors.Is(err, ErrNotRegular):
		code = structs.CodeInvalid
	}
	return structs.WireError(structs.NewError(code, "node %s: %v", e.c.NodeID(), err))
}
