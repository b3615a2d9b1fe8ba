package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"

	"github.com/berth-io/berth/api"
)

// ParseVolumeFile reads and parses the volume spec at path. See
// ParseVolume.
func ParseVolumeFile(path string) (*api.CSIVolume, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading volume spec: %w", err)
	}
	return ParseVolume(path, src)
}

// ParseVolume parses a CSI volume spec, in HCL2 or in JSON. It is JSON
// when filename ends in ".json" or src starts with "{". filename is used
// in error messages. The error, when not nil, is an *Error listing every
// problem found.
func ParseVolume(filename string, src []byte) (*api.CSIVolume, error) {
	var (
		file  *hcl.File
		diags hcl.Diagnostics
	)
	if isJSON(filename, src) {
		// encoding/json says more precisely what is wrong with malformed
		// JSON than HCL's JSON parser does.
		if err := checkJSON(filename, src); err != nil {
			return nil, err
		}
		file, diags = hcljson.Parse(src, filename)
	} else {
		file, diags = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return nil, newError(filename, src, diags)
	}
	d := newDecoder(filename, src)
	v := d.volume(file.Body)
	if err := d.err(); err != nil {
		return nil, err
	}
	return v, nil
}

// checkJSON reports malformed JSON, or JSON that is not an object, at
// the position of the problem.
func checkJSON(filename string, src []byte) error {
	var v any
	err := json.Unmarshal(src, &v)
	var serr *json.SyntaxError
	switch {
	case errors.As(err, &serr):
		// Offset counts the bytes read, the bad one included.
		off := max(0, min(int(serr.Offset)-1, len(src)))
		if serr.Offset >= int64(len(src)) {
			off = len(src)
		}
		return newError(filename, src, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "invalid JSON: " + serr.Error(),
			Subject:  posRange(filename, src, off).Ptr(),
		}})
	case err != nil:
		return fmt.Errorf("reading JSON volume spec %s: %w", filename, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return newError(filename, src, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  `invalid volume spec: want a JSON object, e.g. {"id": "data", "plugin_id": "hostpath", ...}`,
			Subject:  posRange(filename, src, len(src)-len(bytes.TrimLeft(src, " \t\r\n"))).Ptr(),
		}})
	}
	return nil
}

// posRange is the empty range at byte offset off of src.
func posRange(filename string, src []byte, off int) hcl.Range {
	before := src[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	pos := hcl.Pos{Line: line, Column: utf8.RuneCount(before[lineStart:]) + 1, Byte: off}
	return hcl.Range{Filename: filename, Start: pos, End: pos}
}

func isJSON(filename string, src []byte) bool {
	if strings.EqualFold(filepath.Ext(filename), ".json") {
		return true
	}
	return bytes.HasPrefix(bytes.TrimLeft(src, " \t\r\n"), []byte("{"))
}

var (
	volumeSpecSchema = schema{
		attrs: []string{
			"id", "name", "namespace", "type", "plugin_id", "external_id",
			"snapshot_id", "clone_id", "capacity_min", "capacity_max",
		},
		blocks: []blockSchema{{"capability", nil}, {"mount_options", nil}, {"topology_request", nil}},
		maps:   []string{"secrets", "parameters", "mutable_parameters", "context"},
	}
	capabilitySchema      = schema{attrs: []string{"access_mode", "attachment_mode"}}
	topologyRequestSchema = schema{blocks: []blockSchema{{"required", nil}, {"preferred", nil}}}
	topologyListSchema    = schema{blocks: []blockSchema{{"topology", nil}}}
	topologySchema        = schema{maps: []string{"segments"}}
)

// maxVolumeIDLength is the longest volume ID the servers accept.
const maxVolumeIDLength = 128

func (d *decoder) volume(body hcl.Body) *api.CSIVolume {
	c := d.content(body, volumeSpecSchema)
	top := d.fileStart()
	v := &api.CSIVolume{}

	n := len(d.diags)
	v.ID, _ = d.str(c.attrs["id"])
	d.missingIf(v.ID == "", n, d.attrOrRange(c, "id", top), `missing id: want the volume's ID, e.g. id = "data"`)
	if len(v.ID) > maxVolumeIDLength {
		d.errorf(c.attrs["id"].Expr.Range(), "invalid id: want at most %d characters, got %d", maxVolumeIDLength, len(v.ID))
	} else if problem := pathElementProblem(v.ID); v.ID != "" && problem != "" {
		d.errorf(c.attrs["id"].Expr.Range(), "invalid id %q: %s", v.ID, problem)
	}
	v.Name, _ = d.str(c.attrs["name"])
	v.Namespace, _ = d.str(c.attrs["namespace"])
	if t, ok := d.str(c.attrs["type"]); ok && t != api.CSIVolumeTypeCSI {
		why := `want "csi"`
		if t == api.CSIVolumeTypeHost {
			why = `host volumes are not supported; want "csi"`
		}
		d.errorf(c.attrs["type"].Expr.Range(), "invalid type %q: %s", t, why)
	}
	n = len(d.diags)
	v.PluginID, _ = d.str(c.attrs["plugin_id"])
	d.missingIf(v.PluginID == "", n, d.attrOrRange(c, "plugin_id", top),
		`missing plugin_id: want the ID of the CSI plugin that manages the volume, e.g. plugin_id = "hostpath"`)
	v.ExternalID, _ = d.str(c.attrs["external_id"])
	v.SnapshotID, _ = d.str(c.attrs["snapshot_id"])
	v.CloneID, _ = d.str(c.attrs["clone_id"])
	if v.SnapshotID != "" && v.CloneID != "" {
		d.errorf(c.attrs["clone_id"].Expr.Range(), "snapshot_id and clone_id are both set: want at most one of them")
	}

	v.RequestedCapacityMin, _ = d.size(c.attrs["capacity_min"])
	v.RequestedCapacityMax, _ = d.size(c.attrs["capacity_max"])
	if lo, hi := v.RequestedCapacityMin, v.RequestedCapacityMax; lo > 0 && hi > 0 && hi < lo {
		d.errorf(c.attrs["capacity_max"].Expr.Range(), "capacity_max (%d bytes) is less than capacity_min (%d bytes): want capacity_max >= capacity_min", hi, lo)
	}

	caps := c.blocks["capability"]
	if len(caps) == 0 {
		d.errorf(top, `missing capability: want at least one capability { access_mode = "single-node-writer" attachment_mode = "file-system" }`)
	}
	for _, b := range caps {
		if cp := d.capability(b); cp != nil {
			v.RequestedCapabilities = append(v.RequestedCapabilities, cp)
		}
	}
	if b := d.single(c, "mount_options", "a volume"); b != nil {
		v.MountOptions = d.mountOptions(b)
	}
	if b := d.single(c, "topology_request", "a volume"); b != nil {
		v.RequestedTopologies = d.topologyRequest(b)
	}
	if s := d.stringMap(c, "secrets", "a volume"); s != nil {
		v.Secrets = api.CSISecrets(s)
	}
	v.Parameters = d.stringMap(c, "parameters", "a volume")
	v.MutableParameters = d.stringMap(c, "mutable_parameters", "a volume")
	v.Context = d.stringMap(c, "context", "a volume")
	return v
}

// attrOrRange is the range of argument name, or rng when it is absent.
func (d *decoder) attrOrRange(c *content, name string, rng hcl.Range) hcl.Range {
	if a := c.attrs[name]; a != nil {
		return a.Expr.Range()
	}
	return rng
}

func (d *decoder) capability(b *hcl.Block) *api.CSIVolumeCapability {
	c := d.content(b.Body, capabilitySchema)
	n := len(d.diags)
	am, _ := d.oneOf(c.attrs["access_mode"], accessModeNames()...)
	d.missingIf(am == "", n, b.DefRange, "capability has no access_mode: want one of %s", strings.Join(accessModeNames(), ", "))
	n = len(d.diags)
	att, _ := d.oneOf(c.attrs["attachment_mode"], attachmentModeNames()...)
	d.missingIf(att == "", n, b.DefRange, "capability has no attachment_mode: want one of %s", strings.Join(attachmentModeNames(), ", "))
	if am == "" || att == "" {
		return nil
	}
	return &api.CSIVolumeCapability{
		AccessMode:     api.CSIVolumeAccessMode(am),
		AttachmentMode: api.CSIVolumeAttachmentMode(att),
	}
}

func (d *decoder) topologyRequest(b *hcl.Block) *api.CSITopologyRequest {
	c := d.content(b.Body, topologyRequestSchema)
	req := &api.CSITopologyRequest{}
	if rb := d.single(c, "required", "a topology_request"); rb != nil {
		req.Required = d.topologies(rb)
	}
	if pb := d.single(c, "preferred", "a topology_request"); pb != nil {
		req.Preferred = d.topologies(pb)
	}
	return req
}

func (d *decoder) topologies(b *hcl.Block) []*api.CSITopology {
	c := d.content(b.Body, topologyListSchema)
	tbs := c.blocks["topology"]
	if len(tbs) == 0 {
		d.errorf(b.DefRange, `%s has no topology: want topology { segments { rack = "R1" } }`, b.Type)
	}
	var out []*api.CSITopology
	for _, tb := range tbs {
		tc := d.content(tb.Body, topologySchema)
		n := len(d.diags)
		segs := d.stringMap(tc, "segments", "a topology")
		d.missingIf(len(segs) == 0, n, tb.DefRange, `topology has no segments: want segments { rack = "R1" }`)
		out = append(out, &api.CSITopology{Segments: segs})
	}
	return out
}
