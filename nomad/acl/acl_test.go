package acl

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse("policy.hcl", []byte(src))
	must.NoError(t, err)
	return p
}

func TestParse_Errors(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"unknown capability named with its position",
			"namespace \"default\" {\n  capabilities = [\"csi-read-volume\", \"csi-eat-volume\"]\n}\n",
			[]string{`policy.hcl:2:38: unknown capability "csi-eat-volume" in namespace "default"`, "csi-mount-volume"}},
		{"bad namespace policy", "namespace \"x\" {\n policy = \"admin\"\n}\n",
			[]string{`policy.hcl:2:11: invalid policy "admin" for namespace "x"`, `"scale"`}},
		{"plugin takes list not write", "plugin {\n  policy = \"write\"\n}\n",
			[]string{`policy.hcl:2:12: invalid policy "write" for plugin`, `"list"`}},
		{"syntax error", "namespace \"x\" {\n policy = \n}\n", []string{"policy.hcl:2:"}},
		{"unknown block", "namspace \"x\" { policy = \"read\" }\n", []string{"policy.hcl:1:1:", "namspace"}},
		{"empty namespace rule", "namespace \"x\" {}\n", []string{`namespace "x" grants nothing`}},
		{"node without policy", "node {}\n", []string{"policy.hcl:1:", "policy"}},
		{"json unknown capability", `{"namespace": {"default": {"capabilities": ["read-jobs"]}}}`,
			[]string{`policy.hcl:1:`, `unknown capability "read-jobs"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("policy.hcl", []byte(c.src))
			must.Error(t, err)
			for _, w := range c.want {
				must.StrContains(t, err.Error(), w)
			}
		})
	}
}

func TestACL_Namespaces(t *testing.T) {
	readOnly := mustParse(t, `namespace "default" { policy = "read" }`)
	csiRead := mustParse(t, `namespace "default" { capabilities = ["csi-read-volume", "csi-list-volume"] }`)
	writer := mustParse(t, `
namespace "default" { policy = "write" }
namespace "prod-*" { policy = "read" }
namespace "prod-secret" { policy = "deny" }
`)
	globs := mustParse(t, `
namespace "*" { policy = "read" }
namespace "team-*" { policy = "write" }
namespace "team-a*" { capabilities = ["list-jobs"] }
`)
	denyCap := mustParse(t, `namespace "default" { policy = "write" }`)
	denyOther := mustParse(t, `namespace "default" { capabilities = ["deny"] }`)

	cases := []struct {
		name    string
		acl     *ACL
		ns, cap string
		want    bool
	}{
		{"read implies csi-read-volume", New(readOnly), "default", CapCSIReadVolume, true},
		{"read implies read-job", New(readOnly), "default", CapReadJob, true},
		{"read does not imply csi-write-volume", New(readOnly), "default", CapCSIWriteVolume, false},
		{"read does not imply submit-job", New(readOnly), "default", CapSubmitJob, false},
		{"read elsewhere is nothing", New(readOnly), "other", CapReadJob, false},
		{"capability list only", New(csiRead), "default", CapCSIReadVolume, true},
		{"capability list not register", New(csiRead), "default", CapCSIWriteVolume, false},
		{"write implies csi-mount-volume", New(writer), "default", CapCSIMountVolume, true},
		{"write implies alloc-lifecycle", New(writer), "default", CapAllocLifecycle, true},
		{"write does not imply csi-register-plugin", New(writer), "default", CapCSIRegisterPlugin, false},
		{"glob grants read", New(writer), "prod-web", CapReadJob, true},
		{"exact deny beats glob", New(writer), "prod-secret", CapReadJob, false},
		{"closest glob wins: team-a* lists only", New(globs), "team-abc", CapSubmitJob, false},
		{"closest glob wins: team-* writes", New(globs), "team-b", CapSubmitJob, true},
		{"star reads anything", New(globs), "zzz", CapReadJob, true},
		{"deny in another policy wins on merge", New(denyCap, denyOther), "default", CapReadJob, false},
		{"management allows all", Management(), "anything", CapCSIRegisterPlugin, true},
		{"no policies allow nothing", Deny(), "default", CapReadJob, false},
		{"nil ACL allows nothing", nil, "default", CapReadJob, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, c.acl.AllowNamespaceOperation(c.ns, c.cap))
		})
	}
}

func TestACL_Coarse(t *testing.T) {
	p1 := mustParse(t, "node { policy = \"read\" }\noperator { policy = \"write\" }\nplugin { policy = \"list\" }\nagent { policy = \"read\" }")
	p2 := mustParse(t, "node { policy = \"write\" }\noperator { policy = \"deny\" }\nplugin { policy = \"read\" }")
	one := New(p1)
	must.True(t, one.AllowNodeRead())
	must.False(t, one.AllowNodeWrite())
	must.True(t, one.AllowOperatorWrite())
	must.True(t, one.AllowPluginList())
	must.False(t, one.AllowPluginRead())
	must.True(t, one.AllowAgentRead())
	must.False(t, one.AllowAgentWrite())

	both := New(p1, p2)
	must.True(t, both.AllowNodeWrite(), must.Sprint("the higher grant wins"))
	must.False(t, both.AllowOperatorRead(), must.Sprint("deny wins over write"))
	must.True(t, both.AllowPluginRead())

	none := New()
	for _, f := range []func() bool{none.AllowNodeRead, none.AllowAgentRead, none.AllowOperatorRead, none.AllowPluginList} {
		must.False(t, f())
	}
}

func TestACL_AnyAndVisible(t *testing.T) {
	a := New(mustParse(t, `namespace "team-*" { capabilities = ["csi-list-volume"] }`))
	must.True(t, a.AllowNamespaceInAny(CapCSIListVolume))
	must.False(t, a.AllowNamespaceInAny(CapListJobs))
	must.True(t, a.AllowNamespace("team-x"))
	must.False(t, a.AllowNamespace("default"))
	must.Eq(t, []string{CapCSIListVolume}, a.Capabilities("team-x"))
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pat, name string
		want      bool
	}{
		{"*", "", true}, {"*", "x", true}, {"a*", "a", true}, {"a*", "ba", false},
		{"*b", "ab", true}, {"a*c*e", "abcde", true}, {"a*c*e", "abde", false}, {"abc", "abc", true},
	}
	for _, c := range cases {
		must.Eq(t, c.want, globMatch(c.pat, c.name), must.Sprintf("%s ~ %s", c.pat, c.name))
	}
}

func TestParse_JSONAndVariables(t *testing.T) {
	p := mustParse(t, `{"namespace": {"default": {"policy": "read", "capabilities": ["submit-job"]}}, "node": {"policy": "read"}}`)
	a := New(p)
	must.True(t, a.AllowNamespaceOperation("default", CapSubmitJob))
	must.True(t, a.AllowNamespaceOperation("default", CapReadJob))
	must.True(t, a.AllowNodeRead())

	p = mustParse(t, `namespace "default" {
  policy = "read"
  variables {
    path "*" { capabilities = ["read"] }
  }
}`)
	must.True(t, strings.Contains(strings.Join(New(p).Capabilities("default"), ","), CapReadJob))
}
