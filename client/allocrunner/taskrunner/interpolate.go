package taskrunner

import (
	"maps"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Runtime interpolation, as Nomad's: a task's config and env may name
// "${node.unique.id}", "${node.unique.name}", "${node.datacenter}",
// "${node.class}", "${attr.<name>}", "${meta.<name>}" and the task's env
// ("${NOMAD_ALLOC_INDEX}", or "${env.NAME}"). The jobspec keeps these as
// written and the client fills them in when it starts the task, because
// only the node knows them. Anything else is left as written, so a
// shell's own "${VAR}" in a script reaches the shell.

// interpolate replaces the runtime variables in s.
func interpolate(s string, env map[string]string, node *structs.Node) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+2 : i+j]
		b.WriteString(s[:i])
		if v, ok := lookupVar(name, env, node); ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
}

func lookupVar(name string, env map[string]string, node *structs.Node) (string, bool) {
	if node != nil {
		switch name {
		case "node.unique.id":
			return node.ID, node.ID != ""
		case "node.unique.name":
			return node.Name, node.Name != ""
		case "node.datacenter":
			return node.Datacenter, node.Datacenter != ""
		case "node.class":
			return node.NodeClass, true
		}
		if k, ok := strings.CutPrefix(name, "attr."); ok {
			v, ok := node.Attributes[k]
			return v, ok
		}
		if k, ok := strings.CutPrefix(name, "meta."); ok {
			v, ok := node.Meta[k]
			return v, ok
		}
	}
	if k, ok := strings.CutPrefix(name, "env."); ok {
		name = k
	}
	v, ok := env[name]
	return v, ok
}

// interpolateEnv interpolates the values of env (against env itself
// before interpolation, and the node).
func interpolateEnv(env map[string]string, node *structs.Node) map[string]string {
	out := maps.Clone(env)
	for k, v := range env {
		out[k] = interpolate(v, env, node)
	}
	return out
}

// interpolateConfig returns a copy of a driver config with every string in
// it (in maps and lists too) interpolated.
func interpolateConfig(cfg map[string]any, env map[string]string, node *structs.Node) map[string]any {
	if cfg == nil {
		return nil
	}
	out := make(map[string]any, len(cfg))
	for k, v := range cfg {
		out[k] = interpolateValue(v, env, node)
	}
	return out
}

func interpolateValue(v any, env map[string]string, node *structs.Node) any {
	switch v := v.(type) {
	case string:
		return interpolate(v, env, node)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = interpolateValue(e, env, node)
		}
		return out
	case []string:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = interpolate(e, env, node)
		}
		return out
	case map[string]any:
		return interpolateConfig(v, env, node)
	}
	return v
}
