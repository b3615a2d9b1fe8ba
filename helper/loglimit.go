package helper

import (
	"sync"
	"time"
)

// LogLimiter lets one log line through per interval and counts the ones it
// holds back, so a flood (refused connections, accept errors) cannot flood
// the log. Safe for concurrent use.
type LogLimiter struct {
	interval time.Duration

	// lock guards last and suppressed.
	lock       sync.Mutex
	last       time.Time
	suppressed int
}

// NewLogLimiter allows one line per interval.
func NewLogLimiter(interval time.Duration) *LogLimiter {
	return &LogLimiter{interval: interval}
}

// Allow reports whether a line may be written now. When it may, it also
// returns how many lines were held back since the last one written.
func (l *LogLimiter) Allow() (ok bool, suppressed int) {
	l.lock.Lock()
	defer l.lock.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.interval {
		l.suppressed++
		return false, 0
	}
	l.last = now
	n := l.suppressed
	l.suppressed = 0
	return true, n
}
