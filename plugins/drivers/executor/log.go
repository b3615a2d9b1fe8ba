package executor

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// execLogger writes the executor's log (executor.log) in hclog's line
// format, with what the executor needs of hclog and no more: importing
// hclog would have the executor wait, in the berth binary, for packages it
// never uses to initialise (see package early).
type execLogger struct {
	mu   *sync.Mutex
	w    io.Writer
	args []any // key, value, ...
}

func newExecLogger(w io.Writer) *execLogger { return &execLogger{mu: new(sync.Mutex), w: w} }

// With returns a logger that adds the key/value pairs to every line.
func (l *execLogger) With(kv ...any) *execLogger {
	return &execLogger{mu: l.mu, w: l.w, args: append(append([]any(nil), l.args...), kv...)}
}

func (l *execLogger) Info(msg string, kv ...any)  { l.log("[INFO]  ", msg, kv) }
func (l *execLogger) Warn(msg string, kv ...any)  { l.log("[WARN]  ", msg, kv) }
func (l *execLogger) Error(msg string, kv ...any) { l.log("[ERROR] ", msg, kv) }

func (l *execLogger) log(level, msg string, kv []any) {
	var b strings.Builder
	b.WriteString(time.Now().Format("2006-01-02T15:04:05.000Z0700"))
	b.WriteByte(' ')
	b.WriteString(level)
	b.WriteString("executor: ")
	b.WriteString(msg)
	all := append(append([]any(nil), l.args...), kv...)
	for i := 0; i < len(all); i += 2 {
		if i == 0 {
			b.WriteByte(':')
		}
		b.WriteByte(' ')
		b.WriteString(fmt.Sprint(all[i]))
		b.WriteByte('=')
		v := "<missing>"
		if i+1 < len(all) {
			v = fmt.Sprint(all[i+1])
		}
		if v == "" || strings.ContainsAny(v, " \t\n\"=") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, b.String())
}
