// Package acl is Berth's access control language: it parses policies
// written in Nomad's rule language (HCL2, or its JSON form) and compiles
// the policies of a token into an ACL that answers "may this token do X?".
//
// A policy holds rules: namespace "<name or glob>" { policy, capabilities },
// host_volume "<glob>" { policy, capabilities }, and one node, agent,
// operator and plugin block each. Coarse policies expand to capabilities
// (read ⇒ list-jobs, read-job, csi-read-volume, …); when policies are
// merged the union of capabilities is granted, except that deny always
// wins. Nothing here knows about tokens, Raft or endpoints: the server
// resolves a token to its policies and asks the compiled ACL.
package acl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
)

// Coarse dispositions. Not every rule takes every one: list is for
// plugins only, scale for namespaces only.
const (
	PolicyDeny  = "deny"
	PolicyRead  = "read"
	PolicyList  = "list"
	PolicyWrite = "write"
	PolicyScale = "scale"
	PolicyMount = "mount"
)

// Namespace capabilities (Nomad's names, so policies carry over).
const (
	CapDeny                = "deny"
	CapListJobs            = "list-jobs"
	CapParseJob            = "parse-job"
	CapReadJob             = "read-job"
	CapSubmitJob           = "submit-job"
	CapDispatchJob         = "dispatch-job"
	CapReadLogs            = "read-logs"
	CapReadFS              = "read-fs"
	CapAllocExec           = "alloc-exec"
	CapAllocNodeExec       = "alloc-node-exec"
	CapAllocLifecycle      = "alloc-lifecycle"
	CapCSIRegisterPlugin   = "csi-register-plugin"
	CapCSIWriteVolume      = "csi-write-volume"
	CapCSIReadVolume       = "csi-read-volume"
	CapCSIListVolume       = "csi-list-volume"
	CapCSIMountVolume      = "csi-mount-volume"
	CapListScalingPolicies = "list-scaling-policies"
	CapReadScalingPolicy   = "read-scaling-policy"
	CapReadJobScaling      = "read-job-scaling"
	CapScaleJob            = "scale-job"
	CapSubmitRecommend     = "submit-recommendation"
	CapSentinelOverride    = "sentinel-override"
	CapHostVolumeCreate    = "host-volume-create"
	CapHostVolumeRegister  = "host-volume-register"
	CapHostVolumeRead      = "host-volume-read"
	CapHostVolumeWrite     = "host-volume-write"
	CapHostVolumeDelete    = "host-volume-delete"
)

// Host volume capabilities.
const (
	CapMountReadOnly  = "mount-readonly"
	CapMountReadWrite = "mount-readwrite"
)

var namespaceCaps = []string{
	CapDeny, CapListJobs, CapParseJob, CapReadJob, CapSubmitJob, CapDispatchJob,
	CapReadLogs, CapReadFS, CapAllocExec, CapAllocNodeExec, CapAllocLifecycle,
	CapCSIRegisterPlugin, CapCSIWriteVolume, CapCSIReadVolume, CapCSIListVolume,
	CapCSIMountVolume, CapListScalingPolicies, CapReadScalingPolicy, CapReadJobScaling,
	CapScaleJob, CapSubmitRecommend, CapSentinelOverride, CapHostVolumeCreate,
	CapHostVolumeRegister, CapHostVolumeRead, CapHostVolumeWrite, CapHostVolumeDelete,
}

var hostVolumeCaps = []string{CapDeny, CapMountReadOnly, CapMountReadWrite}

// NamespaceCapabilities lists every capability a namespace rule accepts.
func NamespaceCapabilities() []string { return slices.Clone(namespaceCaps) }

// expandNamespacePolicy is what a coarse namespace policy grants.
func expandNamespacePolicy(policy string) []string {
	read := []string{
		CapListJobs, CapParseJob, CapReadJob, CapCSIListVolume, CapCSIReadVolume,
		CapReadJobScaling, CapListScalingPolicies, CapReadScalingPolicy, CapHostVolumeRead,
	}
	switch policy {
	case PolicyDeny:
		return []string{CapDeny}
	case PolicyRead:
		return read
	case PolicyWrite:
		return append(read,
			CapSubmitJob, CapDispatchJob, CapReadLogs, CapReadFS, CapAllocExec,
			CapAllocLifecycle, CapCSIWriteVolume, CapCSIMountVolume, CapScaleJob,
			CapSubmitRecommend, CapHostVolumeCreate, CapHostVolumeDelete)
	case PolicyScale:
		return []string{CapListScalingPolicies, CapReadScalingPolicy, CapReadJobScaling, CapScaleJob}
	}
	return nil
}

// expandHostVolumePolicy is what a coarse host_volume policy grants.
func expandHostVolumePolicy(policy string) []string {
	switch policy {
	case PolicyDeny:
		return []string{CapDeny}
	case PolicyRead:
		return []string{CapMountReadOnly}
	case PolicyWrite, PolicyMount:
		return []string{CapMountReadOnly, CapMountReadWrite}
	}
	return nil
}

// Policy is one parsed policy document.
type Policy struct {
	Namespaces  []*NamespaceRule
	HostVolumes []*NamespaceRule
	Node        string // "" when the policy has no node block
	Agent       string
	Operator    string
	Plugin      string
}

// NamespaceRule is a namespace (or host_volume) block: the name or glob,
// and the capabilities its policy and capabilities list grant together.
type NamespaceRule struct {
	Name         string
	Policy       string
	Capabilities []string
}

// Expanded returns the rule's capabilities with its policy's implications
// added, sorted and without duplicates.
func (r *NamespaceRule) expanded(expand func(string) []string) []string {
	caps := append(slices.Clone(r.Capabilities), expand(r.Policy)...)
	sort.Strings(caps)
	return slices.Compact(caps)
}

type hclPolicy struct {
	Namespaces  []*hclNamespace `hcl:"namespace,block"`
	HostVolumes []*hclNamespace `hcl:"host_volume,block"`
	Node        *hclCoarse      `hcl:"node,block"`
	Agent       *hclCoarse      `hcl:"agent,block"`
	Operator    *hclCoarse      `hcl:"operator,block"`
	Plugin      *hclCoarse      `hcl:"plugin,block"`
}

type hclNamespace struct {
	Name         string         `hcl:"name,label"`
	Policy       hcl.Expression `hcl:"policy,optional"`
	Capabilities hcl.Expression `hcl:"capabilities,optional"`
	// Variables blocks are Nomad's; Berth has no variables yet, so they
	// are accepted and ignored rather than failing a shared policy.
	Variables []*struct {
		Body hcl.Body `hcl:",remain"`
	} `hcl:"variables,block"`
}

type hclCoarse struct {
	Policy hcl.Expression `hcl:"policy"`
}

// Parse reads a policy from src. filename only labels errors, which read
// "file:line:col: summary; detail". Sources that start with "{" are read
// as JSON, as Nomad's API allows.
func Parse(filename string, src []byte) (*Policy, error) {
	var file *hcl.File
	var diags hcl.Diagnostics
	if t := strings.TrimSpace(string(src)); strings.HasPrefix(t, "{") {
		file, diags = hcljson.Parse(src, filename)
	} else {
		file, diags = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var raw hclPolicy
	if diags := gohcl.DecodeBody(file.Body, nil, &raw); diags.HasErrors() {
		return nil, diagError(diags)
	}
	p := &Policy{}
	var all hcl.Diagnostics
	seen := map[string]bool{}
	for _, ns := range raw.Namespaces {
		rule, d := decodeNamespace("namespace", ns, []string{PolicyDeny, PolicyRead, PolicyWrite, PolicyScale}, namespaceCaps)
		all = append(all, d...)
		if rule != nil {
			if seen[rule.Name] {
				all = append(all, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf("duplicate namespace %q", rule.Name), Detail: "merge the two blocks into one", Subject: rangeOf(ns.Policy)})
			}
			seen[rule.Name] = true
			p.Namespaces = append(p.Namespaces, rule)
		}
	}
	for _, hv := range raw.HostVolumes {
		rule, d := decodeNamespace("host_volume", hv, []string{PolicyDeny, PolicyRead, PolicyWrite, PolicyMount}, hostVolumeCaps)
		all = append(all, d...)
		if rule != nil {
			p.HostVolumes = append(p.HostVolumes, rule)
		}
	}
	coarse := []struct {
		name    string
		blk     *hclCoarse
		allowed []string
		dst     *string
	}{
		{"node", raw.Node, []string{PolicyDeny, PolicyRead, PolicyWrite}, &p.Node},
		{"agent", raw.Agent, []string{PolicyDeny, PolicyRead, PolicyWrite}, &p.Agent},
		{"operator", raw.Operator, []string{PolicyDeny, PolicyRead, PolicyWrite}, &p.Operator},
		{"plugin", raw.Plugin, []string{PolicyDeny, PolicyList, PolicyRead}, &p.Plugin},
	}
	for _, c := range coarse {
		if c.blk == nil {
			continue
		}
		v, d := policyString(c.name, c.blk.Policy, c.allowed, true)
		all = append(all, d...)
		*c.dst = v
	}
	if all.HasErrors() {
		return nil, diagError(all)
	}
	return p, nil
}

func decodeNamespace(block string, ns *hclNamespace, policies, caps []string) (*NamespaceRule, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	rule := &NamespaceRule{Name: ns.Name}
	if ns.Name == "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: block + " with an empty name", Detail: `name a namespace, or use "*" for all of them`, Subject: rangeOf(ns.Policy)})
	}
	p, d := policyString(fmt.Sprintf("%s %q", block, ns.Name), ns.Policy, policies, false)
	diags = append(diags, d...)
	rule.Policy = p
	if ns.Capabilities != nil && !isNull(ns.Capabilities) {
		exprs, d := hcl.ExprList(ns.Capabilities)
		diags = append(diags, d...)
		for _, e := range exprs {
			var c string
			if d := gohcl.DecodeExpression(e, nil, &c); d.HasErrors() {
				diags = append(diags, d...)
				continue
			}
			if !slices.Contains(caps, c) {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("unknown capability %q in %s %q", c, block, ns.Name),
					Detail:   "known capabilities: " + strings.Join(caps, ", "),
					Subject:  e.Range().Ptr(),
				})
				continue
			}
			rule.Capabilities = append(rule.Capabilities, c)
		}
	}
	if rule.Policy == "" && len(rule.Capabilities) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf("%s %q grants nothing", block, ns.Name), Detail: "set policy or capabilities", Subject: rangeOf(ns.Policy)})
	}
	return rule, diags
}

// policyString decodes a policy attribute and checks it is one of allowed.
func policyString(what string, expr hcl.Expression, allowed []string, required bool) (string, hcl.Diagnostics) {
	if expr == nil || isNull(expr) {
		if required {
			return "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: what + " has no policy", Detail: "set policy = " + strings.Join(quoteAll(allowed), " | "), Subject: rangeOf(expr)}}
		}
		return "", nil
	}
	var v string
	if d := gohcl.DecodeExpression(expr, nil, &v); d.HasErrors() {
		return "", d
	}
	if !slices.Contains(allowed, v) {
		return "", hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("invalid policy %q for %s", v, what),
			Detail:   "use one of " + strings.Join(quoteAll(allowed), ", "),
			Subject:  expr.Range().Ptr(),
		}}
	}
	return v, nil
}

// isNull reports whether an optional attribute was left out: gohcl hands
// a synthetic null expression for a missing hcl.Expression field.
func isNull(expr hcl.Expression) bool {
	if len(expr.Variables()) > 0 {
		return false
	}
	v, d := expr.Value(nil)
	return !d.HasErrors() && v.IsNull()
}

func rangeOf(expr hcl.Expression) *hcl.Range {
	if expr == nil {
		return nil
	}
	return expr.Range().Ptr()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// ParseError is a policy that could not be parsed: every problem with
// its file, line and column.
type ParseError struct {
	Problems []string
}

func (e *ParseError) Error() string { return strings.Join(e.Problems, "\n") }

func diagError(diags hcl.Diagnostics) error {
	e := &ParseError{}
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		var b strings.Builder
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString("; " + d.Detail)
		}
		e.Problems = append(e.Problems, b.String())
	}
	return e
}
