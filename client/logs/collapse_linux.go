package logs

import (
	"os"
	"syscall"
)

// fallocFlCollapseRange is FALLOC_FL_COLLAPSE_RANGE from linux/falloc.h.
const fallocFlCollapseRange = 0x08

// collapseHead removes the first n bytes of f, shifting the rest down,
// atomically with respect to concurrent appends. n must be a multiple of
// blockSize(f) and less than the file's size.
func collapseHead(f *os.File, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocFlCollapseRange, 0, n)
		if err != syscall.EINTR {
			return err
		}
	}
}

// blockSize is the filesystem block size collapses must be aligned to.
func blockSize(f *os.File) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bsize), nil
}
