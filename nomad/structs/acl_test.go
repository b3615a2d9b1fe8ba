package structs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// TestACLPolicy_ValidateName: the name check accepts exactly what the
// documented pattern ^[a-zA-Z0-9-_]{1,128}$ does (the regexp it replaced),
// and the error names the policy and the rule.
func TestACLPolicy_ValidateName(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9-_]{1,128}$`)
	names := []string{"", "a", "readonly", "ops-team_2", strings.Repeat("x", 128), strings.Repeat("x", 129),
		"é", "a b", "a.b", "a/b", "ns:default", "A-Z_0-9"}
	for c := 0; c < 256; c++ {
		names = append(names, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	for _, name := range names {
		err := (&ACLPolicy{Name: name}).Validate()
		if pattern.MatchString(name) {
			must.NoError(t, err, must.Sprintf("name %q", name))
			continue
		}
		must.Error(t, err, must.Sprintf("name %q", name))
		must.StrContains(t, err.Error(), "invalid policy name")
		must.StrContains(t, err.Error(), "1-128 letters, digits, '-' or '_'")
	}
}
