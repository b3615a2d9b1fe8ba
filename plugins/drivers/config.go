package drivers

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Helpers that read a task's driver config (TaskConfig.Config, as decoded
// from a jobspec or JSON). Their errors wrap ErrInvalidConfig and name the
// task and the key:
//
//	task "web": config key "command" is required (a string)

// CheckConfigKeys fails on a key the driver does not know, which is most
// often a typo.
func CheckConfigKeys(cfg *TaskConfig, driver string, known ...string) error {
	var unknown []string
	for k := range cfg.Config {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return fmt.Errorf("task %q: unknown config key %q (%s takes %s): %w",
		cfg.Name, strings.Join(unknown, `", "`), driver, quoteList(known), ErrInvalidConfig)
}

// ConfigString reads a string key; a missing key is "" unless required.
func ConfigString(cfg *TaskConfig, key string, required bool) (string, error) {
	v, ok := cfg.Config[key]
	if !ok || v == nil {
		if required {
			return "", configErr(cfg, key, "is required (a string)")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", configErr(cfg, key, fmt.Sprintf("must be a string, not %s", describe(v)))
	}
	if required && s == "" {
		return "", configErr(cfg, key, "is required (a string) and must not be empty")
	}
	return s, nil
}

// ConfigStrings reads a list of strings; a missing key is nil.
func ConfigStrings(cfg *TaskConfig, key string) ([]string, error) {
	v, ok := cfg.Config[key]
	if !ok || v == nil {
		return nil, nil
	}
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), nil
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, configErr(cfg, key, fmt.Sprintf("must be a list of strings, but element %d is %s", i, describe(e)))
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, configErr(cfg, key, fmt.Sprintf("must be a list of strings, not %s", describe(v)))
}

// ConfigInt reads an integer key; a missing key is def. Whole floats
// (JSON numbers) and json.Number are accepted.
func ConfigInt(cfg *TaskConfig, key string, def int) (int, error) {
	v, ok := cfg.Config[key]
	if !ok || v == nil {
		return def, nil
	}
	bad := configErr(cfg, key, fmt.Sprintf("must be an integer, not %s", describe(v)))
	switch n := v.(type) {
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case int32:
		return int(n), nil
	case uint64:
		if n > math.MaxInt {
			return 0, bad
		}
		return int(n), nil
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			return 0, bad
		}
		return int(n), nil
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return 0, bad
		}
		return int(i), nil
	}
	return 0, bad
}

// ConfigDuration reads a duration given as a string ("1.5s", "2m"); a
// missing key is 0.
func ConfigDuration(cfg *TaskConfig, key string) (time.Duration, error) {
	s, err := ConfigString(cfg, key, false)
	if err != nil {
		return 0, configErr(cfg, key, fmt.Sprintf("must be a duration string such as \"1.5s\", not %s", describe(cfg.Config[key])))
	}
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, configErr(cfg, key, fmt.Sprintf("must be a non-negative duration such as \"1.5s\", not %q", s))
	}
	return d, nil
}

func configErr(cfg *TaskConfig, key, what string) error {
	return fmt.Errorf("task %q: config key %q %s: %w", cfg.Name, key, what, ErrInvalidConfig)
}

// describe names a config value's type for error messages.
func describe(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int, int32, int64, uint64, float64, json.Number:
		return fmt.Sprintf("the number %v", v)
	case []any, []string:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}

func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
