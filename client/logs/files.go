package logs

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// rotatedIndexes returns the indexes (> 0) of a stream's rotated files in
// dir, oldest first.
func rotatedIndexes(dir, base string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n <= 0 || strconv.Itoa(n) != rest {
			continue // not ours (e.g. a ".tmp" being written)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}
