//go:build !linux

package logs

import (
	"errors"
	"os"
)

var errNoCollapse = errors.New("collapsing a file range is only supported on Linux")

func collapseHead(*os.File, int64) error { return errNoCollapse }

func blockSize(*os.File) (int64, error) { return 4096, nil }
