package logs

import (
	"fmt"
	"path/filepath"
	"time"
)

// Stream names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Config bounds the disk a task's logs use: at most MaxFiles files of about
// MaxFileSize bytes each, per stream.
type Config struct {
	// MaxFiles counts the live file too; at least 2 (live + one rotated).
	MaxFiles int
	// MaxFileSize is the size at which the live file is cut.
	MaxFileSize int64
	// Interval is how often the rotator checks the live file's size.
	Interval time.Duration
}

// Defaults: 10 files of 10 MiB, checked every second.
const (
	DefaultMaxFiles    = 10
	DefaultMaxFileSize = 10 << 20
	DefaultInterval    = time.Second
)

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.MaxFiles < 2 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MaxFileSize <= 0 {
		c.MaxFileSize = DefaultMaxFileSize
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	return c
}

// Base is the file name prefix of a task's stream: "<task>.<stream>".
func Base(task, stream string) string { return task + "." + stream }

// Path is the path of file number index of a stream; index 0 is live.
func Path(dir, task, stream string, index int) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d", Base(task, stream), index))
}

// ValidStream reports whether s names a stream.
func ValidStream(s string) bool { return s == Stdout || s == Stderr }
