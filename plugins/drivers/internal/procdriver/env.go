package procdriver

import (
	"sort"

	"github.com/berth-io/berth/plugins/drivers/executor"
)

// Env turns a task's environment into KEY=VALUE pairs, sorted, with
// executor.DefaultPath as PATH if it has none.
func Env(env map[string]string) []string {
	out := make([]string, 0, len(env)+1)
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	if _, ok := env["PATH"]; !ok {
		out = append(out, "PATH="+executor.DefaultPath)
	}
	sort.Strings(out)
	return out
}
