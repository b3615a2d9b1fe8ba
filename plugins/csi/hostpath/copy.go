package hostpath

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// copyTree copies the directory src to dst, which must not exist, keeping
// modes, owners and symlinks; sockets, fifos and devices are skipped. It
// returns the bytes of file data copied. It checks ctx between files.
func copyTree(ctx context.Context, src, dst string) (int64, error) {
	var total int64
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			n, err := copyFile(path, target, info.Mode().Perm())
			if err != nil {
				return err
			}
			total += n
		default:
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	// Mkdir applied the umask to the top directory; give it src's mode.
	if info, err := os.Stat(src); err == nil {
		if err := os.Chmod(dst, info.Mode().Perm()); err != nil {
			return total, fmt.Errorf("copying %s to %s: %w", src, dst, err)
		}
	}
	return total, nil
}

func copyFile(src, dst string, perm fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in) // copy_file_range(2) where the kernel can
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, perm)
	}
	return n, err
}
