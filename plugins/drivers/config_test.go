package drivers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestConfigHelpers(t *testing.T) {
	cfg := &TaskConfig{Name: "web", Config: map[string]any{
		"s": "x", "empty": "", "n": 3, "f": 4.0, "frac": 4.5, "jn": json.Number("7"),
		"l": []any{"a", "b"}, "ls": []string{"c"}, "bad": []any{"a", 1}, "d": "1.5s", "negd": "-1s",
	}}
	t.Run("string", func(t *testing.T) {
		s, err := ConfigString(cfg, "s", true)
		must.NoError(t, err)
		must.Eq(t, "x", s)
		s, err = ConfigString(cfg, "missing", false)
		must.NoError(t, err)
		must.Eq(t, "", s)
		_, err = ConfigString(cfg, "missing", true)
		must.ErrorIs(t, err, ErrInvalidConfig)
		must.ErrorContains(t, err, `task "web": config key "missing" is required (a string)`)
		_, err = ConfigString(cfg, "empty", true)
		must.ErrorContains(t, err, "must not be empty")
		_, err = ConfigString(cfg, "n", false)
		must.ErrorContains(t, err, `config key "n" must be a string, not the number 3`)
	})
	t.Run("strings", func(t *testing.T) {
		l, err := ConfigStrings(cfg, "l")
		must.NoError(t, err)
		must.Eq(t, []string{"a", "b"}, l)
		l, err = ConfigStrings(cfg, "ls")
		must.NoError(t, err)
		must.Eq(t, []string{"c"}, l)
		_, err = ConfigStrings(cfg, "bad")
		must.ErrorContains(t, err, "element 1 is the number 1")
		_, err = ConfigStrings(cfg, "s")
		must.ErrorContains(t, err, `must be a list of strings, not the string "x"`)
	})
	t.Run("int", func(t *testing.T) {
		for key, want := range map[string]int{"n": 3, "f": 4, "jn": 7, "missing": 9} {
			n, err := ConfigInt(cfg, key, 9)
			must.NoError(t, err)
			must.Eq(t, want, n, must.Sprint(key))
		}
		_, err := ConfigInt(cfg, "frac", 0)
		must.ErrorContains(t, err, "must be an integer, not the number 4.5")
	})
	t.Run("duration", func(t *testing.T) {
		d, err := ConfigDuration(cfg, "d")
		must.NoError(t, err)
		must.Eq(t, 1500*time.Millisecond, d)
		_, err = ConfigDuration(cfg, "negd")
		must.ErrorContains(t, err, "non-negative duration")
		_, err = ConfigDuration(cfg, "n")
		must.ErrorIs(t, err, ErrInvalidConfig)
	})
	t.Run("keys", func(t *testing.T) {
		err := CheckConfigKeys(&TaskConfig{Name: "web", Config: map[string]any{"comand": 1, "args": 2}}, "raw_exec", "command", "args")
		must.ErrorIs(t, err, ErrInvalidConfig)
		must.ErrorContains(t, err, `task "web": unknown config key "comand" (raw_exec takes "command", "args")`)
		must.NoError(t, CheckConfigKeys(&TaskConfig{Config: map[string]any{"args": 1}}, "raw_exec", "command", "args"))
	})
}
