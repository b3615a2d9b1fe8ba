package jobspec

import (
	"fmt"
	"math"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/berth-io/berth/api"
)

// ParseFile reads and parses the jobspec at path. See Parse.
func ParseFile(path string) (*api.Job, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading jobspec: %w", err)
	}
	return Parse(path, src)
}

// Parse parses an HCL2 jobspec and returns the job, canonicalized (every
// default filled in, see api.Job.Canonicalize). filename is used in
// error messages. The error, when not nil, is an *Error listing every
// problem found.
func Parse(filename string, src []byte) (*api.Job, error) {
	d := newDecoder(filename, src)
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, newError(filename, src, diags)
	}
	c := d.content(file.Body, schema{blocks: []blockSchema{{"job", []string{"id"}}}})
	jobs := c.blocks["job"]
	if len(jobs) == 0 {
		if len(d.diags) == 0 {
			d.errorf(d.fileStart(), `missing job block: want job "<id>" { group "<name>" { task "<name>" { ... } } }`)
		}
		return nil, d.err()
	}
	for _, b := range jobs[1:] {
		d.errorf(b.DefRange, "duplicate job block: a file holds one job, and the first is at line %d", jobs[0].DefRange.Start.Line)
	}
	job := d.job(jobs[0])
	if err := d.err(); err != nil {
		return nil, err
	}
	job.Canonicalize()
	return job, nil
}

var (
	jobSchema = schema{
		attrs:  []string{"name", "type", "namespace", "region", "priority", "datacenters"},
		blocks: []blockSchema{{"group", []string{"name"}}, {"constraint", nil}, {"reschedule", nil}},
		maps:   []string{"meta"},
	}
	groupSchema = schema{
		attrs: []string{"count"},
		blocks: []blockSchema{
			{"task", []string{"name"}}, {"volume", []string{"name"}}, {"constraint", nil},
			{"restart", nil}, {"reschedule", nil}, {"ephemeral_disk", nil},
		},
		maps: []string{"meta"},
	}
	taskSchema = schema{
		attrs: []string{"driver", "kill_timeout", "user"},
		blocks: []blockSchema{
			{"resources", nil}, {"volume_mount", nil}, {"csi_plugin", nil}, {"constraint", nil}, {"logs", nil},
		},
		maps: []string{"config", "env", "meta"},
	}
	constraintSchema   = schema{attrs: []string{"attribute", "operator", "value"}}
	restartSchema      = schema{attrs: []string{"attempts", "interval", "delay", "mode"}}
	rescheduleSchema   = schema{attrs: []string{"attempts", "interval", "delay", "delay_function", "max_delay", "unlimited"}}
	resourcesSchema    = schema{attrs: []string{"cpu", "memory"}}
	ephemeralSchema    = schema{attrs: []string{"size", "migrate", "sticky"}}
	logsSchema         = schema{attrs: []string{"max_files", "max_file_size", "disabled"}}
	mountOptionsSchema = schema{attrs: []string{"fs_type", "mount_flags"}}
	volumeSchema       = schema{
		attrs:  []string{"type", "source", "read_only", "sticky", "access_mode", "attachment_mode", "per_alloc"},
		blocks: []blockSchema{{"mount_options", nil}},
	}
	volumeMountSchema = schema{attrs: []string{"volume", "destination", "read_only", "propagation_mode", "selinux_label"}}
	csiPluginSchema   = schema{attrs: []string{"id", "type", "mount_dir", "stage_publish_base_dir", "health_timeout"}}
)

// Constraint operators, as Nomad's.
var constraintOperators = []string{
	"=", "==", "is", "!=", "not", ">", ">=", "<", "<=", "regexp", "version", "semver",
	"set_contains", "set_contains_all", "set_contains_any", "distinct_hosts", "distinct_property",
	"is_set", "is_not_set",
}

func (d *decoder) job(b *hcl.Block) *api.Job {
	c := d.content(b.Body, jobSchema)
	id := b.Labels[0]
	d.pathElement(b.LabelRanges[0], "job ID", id)
	j := &api.Job{ID: &id}
	j.Name = d.strPtr(c.attrs["name"])
	if t, ok := d.oneOf(c.attrs["type"], api.JobTypeService, api.JobTypeBatch, api.JobTypeSystem); ok {
		j.Type = &t
	}
	j.Namespace = d.strPtr(c.attrs["namespace"])
	j.Region = d.strPtr(c.attrs["region"])
	j.Priority = d.intPtr(c.attrs["priority"], 1, 100)
	if dcs, ok := d.strList(c.attrs["datacenters"]); ok {
		j.Datacenters = dcs
	}
	j.Meta = d.stringMap(c, "meta", "a job")
	j.Constraints = d.constraints(c)
	if rb := d.single(c, "reschedule", "a job"); rb != nil {
		j.Reschedule = d.reschedule(rb)
	}

	jobType := api.JobTypeService
	if j.Type != nil {
		jobType = *j.Type
	}
	groups := c.blocks["group"]
	if len(groups) == 0 {
		d.errorf(b.DefRange, `job %q has no group: want group "<name>" { task "<name>" { ... } }`, id)
	}
	seen := map[string]*hcl.Block{}
	for _, gb := range groups {
		name := gb.Labels[0]
		if first := seen[name]; first != nil {
			d.errorf(gb.LabelRanges[0], "duplicate group %q: group names must be unique, and the first is at line %d", name, first.DefRange.Start.Line)
			continue
		}
		seen[name] = gb
		j.TaskGroups = append(j.TaskGroups, d.group(gb, jobType))
	}
	return j
}

func (d *decoder) constraints(c *content) []*api.Constraint {
	var out []*api.Constraint
	for _, b := range c.blocks["constraint"] {
		cc := d.content(b.Body, constraintSchema)
		con := &api.Constraint{Operand: "="}
		if op, ok := d.oneOf(cc.attrs["operator"], constraintOperators...); ok {
			con.Operand = op
		}
		if s, ok := d.str(cc.attrs["attribute"]); ok {
			con.LTarget = s
		} else if cc.attrs["attribute"] == nil && con.Operand != "distinct_hosts" {
			d.errorf(b.DefRange, `constraint has no attribute: want e.g. attribute = "${attr.kernel.name}"`)
		}
		if s, ok := d.str(cc.attrs["value"]); ok {
			con.RTarget = s
		}
		out = append(out, con)
	}
	return out
}

func (d *decoder) reschedule(b *hcl.Block) *api.ReschedulePolicy {
	c := d.content(b.Body, rescheduleSchema)
	rp := &api.ReschedulePolicy{
		Attempts:  d.intPtr(c.attrs["attempts"], 0, math.MaxInt32),
		Interval:  d.durationPtr(c.attrs["interval"]),
		Delay:     d.durationPtr(c.attrs["delay"]),
		MaxDelay:  d.durationPtr(c.attrs["max_delay"]),
		Unlimited: d.boolPtr(c.attrs["unlimited"]),
	}
	if f, ok := d.oneOf(c.attrs["delay_function"], "constant", "exponential", "fibonacci"); ok {
		rp.DelayFunction = &f
	}
	return rp
}

func (d *decoder) restart(b *hcl.Block) *api.RestartPolicy {
	c := d.content(b.Body, restartSchema)
	rp := &api.RestartPolicy{
		Attempts: d.intPtr(c.attrs["attempts"], 0, math.MaxInt32),
		Interval: d.durationPtr(c.attrs["interval"]),
		Delay:    d.durationPtr(c.attrs["delay"]),
	}
	if m, ok := d.oneOf(c.attrs["mode"], api.RestartPolicyModeFail, api.RestartPolicyModeDelay); ok {
		rp.Mode = &m
	}
	return rp
}

func (d *decoder) group(b *hcl.Block, jobType string) *api.TaskGroup {
	c := d.content(b.Body, groupSchema)
	name := b.Labels[0]
	d.pathElement(b.LabelRanges[0], "group name", name)
	g := &api.TaskGroup{Name: &name}
	g.Count = d.intPtr(c.attrs["count"], 0, math.MaxInt32)
	g.Constraints = d.constraints(c)
	g.Meta = d.stringMap(c, "meta", "a group")
	if rb := d.single(c, "restart", "a group"); rb != nil {
		g.RestartPolicy = d.restart(rb)
	}
	if rb := d.single(c, "reschedule", "a group"); rb != nil {
		g.ReschedulePolicy = d.reschedule(rb)
	}
	if eb := d.single(c, "ephemeral_disk", "a group"); eb != nil {
		g.EphemeralDisk = d.ephemeralDisk(eb)
	}

	count := 1
	if g.Count != nil {
		count = *g.Count
	}
	for _, vb := range c.blocks["volume"] {
		vname := vb.Labels[0]
		if _, dup := g.Volumes[vname]; dup {
			d.errorf(vb.LabelRanges[0], "duplicate volume %q: volume names must be unique within a group", vname)
			continue
		}
		if g.Volumes == nil {
			g.Volumes = map[string]*api.VolumeRequest{}
		}
		g.Volumes[vname] = d.volumeRequest(vb, name, count, jobType)
	}

	tasks := c.blocks["task"]
	if len(tasks) == 0 {
		d.errorf(b.DefRange, `group %q has no task: want task "<name>" { driver = "..." }`, name)
	}
	seen := map[string]*hcl.Block{}
	for _, tb := range tasks {
		tname := tb.Labels[0]
		if first := seen[tname]; first != nil {
			d.errorf(tb.LabelRanges[0], "duplicate task %q: task names must be unique within a group, and the first is at line %d", tname, first.DefRange.Start.Line)
			continue
		}
		seen[tname] = tb
		g.Tasks = append(g.Tasks, d.task(tb, g))
	}
	return g
}

func accessModeNames() []string {
	out := make([]string, len(api.CSIVolumeAccessModes))
	for i, m := range api.CSIVolumeAccessModes {
		out[i] = string(m)
	}
	return out
}

func attachmentModeNames() []string {
	out := make([]string, len(api.CSIVolumeAttachmentModes))
	for i, m := range api.CSIVolumeAttachmentModes {
		out[i] = string(m)
	}
	return out
}

// volumeRequest reads a group's volume block and checks it as the
// servers will, but with positions.
func (d *decoder) volumeRequest(b *hcl.Block, group string, count int, jobType string) *api.VolumeRequest {
	c := d.content(b.Body, volumeSchema)
	v := &api.VolumeRequest{Name: b.Labels[0]}
	where := fmt.Sprintf("volume %q", v.Name)
	d.pathElement(b.LabelRanges[0], "volume name", v.Name)

	n := len(d.diags)
	typ, typeOK := d.oneOf(c.attrs["type"], api.VolumeTypeCSI, api.VolumeTypeHost)
	v.Type = typ
	d.missingIf(typ == "", n, b.DefRange, `%s has no type: want type = "csi"`, where)
	n = len(d.diags)
	if s, ok := d.str(c.attrs["source"]); ok && s != "" {
		v.Source = s
	}
	d.missingIf(v.Source == "", n, d.attrOr(c, "source", b), `%s has no source: want the ID of the volume, e.g. source = "data"`, where)
	v.ReadOnly, _ = d.boolean(c.attrs["read_only"])
	v.Sticky, _ = d.boolean(c.attrs["sticky"])
	v.PerAlloc, _ = d.boolean(c.attrs["per_alloc"])
	if mb := d.single(c, "mount_options", where); mb != nil {
		v.MountOptions = d.mountOptions(mb)
	}
	if !typeOK || typ != api.VolumeTypeCSI {
		if a := c.attrs["access_mode"]; a != nil {
			v.AccessMode, _ = d.str(a)
		}
		if a := c.attrs["attachment_mode"]; a != nil {
			v.AttachmentMode, _ = d.str(a)
		}
		return v
	}

	// CSI volumes need both modes, and the modes constrain the rest.
	n = len(d.diags)
	am, amOK := d.oneOf(c.attrs["access_mode"], accessModeNames()...)
	d.missingIf(am == "", n, b.DefRange, "%s has no access_mode: want one of %s", where, strings.Join(accessModeNames(), ", "))
	n = len(d.diags)
	att, attOK := d.oneOf(c.attrs["attachment_mode"], attachmentModeNames()...)
	d.missingIf(att == "", n, b.DefRange, "%s has no attachment_mode: want one of %s", where, strings.Join(attachmentModeNames(), ", "))
	v.AccessMode, v.AttachmentMode = am, att
	mode := api.CSIVolumeAccessMode(am)
	if attOK && att == string(api.CSIVolumeAttachmentModeBlockDevice) && v.MountOptions != nil {
		d.errorf(c.blocks["mount_options"][0].DefRange, `%s: mount_options are not allowed with attachment_mode "block-device"`, where)
	}
	if amOK && mode.ReadOnly() && !v.ReadOnly {
		d.errorf(c.attrs["access_mode"].Expr.Range(), "access_mode %q needs read_only = true in %s", am, where)
	}
	if amOK && mode.SingleNode() && count > 1 && !v.PerAlloc {
		d.errorf(c.attrs["access_mode"].Expr.Range(),
			"access_mode %q lets one alloc use %s, but group %q has count %d: want per_alloc = true (one volume per alloc) or a multi-node access mode",
			am, where, group, count)
	}
	if v.PerAlloc && jobType == api.JobTypeSystem {
		d.errorf(c.attrs["per_alloc"].Expr.Range(), "per_alloc is not allowed in system jobs: want a service or batch job")
	}
	return v
}

// attrOr is the range of argument name, or of block b when it is absent.
func (d *decoder) attrOr(c *content, name string, b *hcl.Block) hcl.Range {
	if a := c.attrs[name]; a != nil {
		return a.Expr.Range()
	}
	return b.DefRange
}

func (d *decoder) mountOptions(b *hcl.Block) *api.CSIMountOptions {
	c := d.content(b.Body, mountOptionsSchema)
	mo := &api.CSIMountOptions{}
	mo.FSType, _ = d.str(c.attrs["fs_type"])
	mo.MountFlags, _ = d.strList(c.attrs["mount_flags"])
	return mo
}

func (d *decoder) task(b *hcl.Block, g *api.TaskGroup) *api.Task {
	c := d.content(b.Body, taskSchema)
	t := &api.Task{Name: b.Labels[0]}
	where := fmt.Sprintf("task %q", t.Name)
	d.pathElement(b.LabelRanges[0], "task name", t.Name)
	n := len(d.diags)
	t.Driver, _ = d.str(c.attrs["driver"])
	d.missingIf(t.Driver == "", n, d.attrOr(c, "driver", b), `%s has no driver: want e.g. driver = "raw_exec" or driver = "exec"`, where)
	t.Config = d.config(c, where)
	t.Env = d.stringMap(c, "env", where)
	t.Meta = d.stringMap(c, "meta", where)
	t.KillTimeout = d.durationPtr(c.attrs["kill_timeout"])
	t.User, _ = d.str(c.attrs["user"])
	t.Constraints = d.constraints(c)
	if rb := d.single(c, "resources", where); rb != nil {
		t.Resources = d.resources(rb)
	}
	for _, mb := range c.blocks["volume_mount"] {
		t.VolumeMounts = append(t.VolumeMounts, d.volumeMount(mb, g))
	}
	if pb := d.single(c, "csi_plugin", where); pb != nil {
		t.CSIPluginConfig = d.csiPlugin(pb)
	}
	if lb := d.single(c, "logs", where); lb != nil {
		t.LogConfig = d.logs(lb)
	}
	return t
}

// ephemeralDisk reads ephemeral_disk. Berth keeps an alloc's directory
// under the client's data_dir without reserving space, and never moves
// it to a replacement alloc, so sticky and migrate are refused.
func (d *decoder) ephemeralDisk(b *hcl.Block) *api.EphemeralDisk {
	c := d.content(b.Body, ephemeralSchema)
	e := &api.EphemeralDisk{SizeMB: d.intPtr(c.attrs["size"], 1, math.MaxInt32)}
	for _, name := range []string{"sticky", "migrate"} {
		if a := c.attrs[name]; a != nil {
			if v := d.boolPtr(a); v != nil && *v {
				d.errorf(a.Expr.Range(), "ephemeral_disk %s = true is not supported: Berth does not carry an alloc's "+
					"directory over to its replacement; keep data that must outlive an alloc in a CSI volume", name)
			}
		}
	}
	return e
}

// logs reads a task's logs block: the rotation of its stdout and stderr.
func (d *decoder) logs(b *hcl.Block) *api.LogConfig {
	c := d.content(b.Body, logsSchema)
	l := &api.LogConfig{
		MaxFiles:      d.intPtr(c.attrs["max_files"], 2, 1000),
		MaxFileSizeMB: d.intPtr(c.attrs["max_file_size"], 1, 1<<20),
	}
	if a := c.attrs["disabled"]; a != nil {
		if v := d.boolPtr(a); v != nil && *v {
			d.errorf(a.Expr.Range(), "logs disabled = true is not supported: Berth always keeps a task's logs, "+
				"bounded by max_files × max_file_size (MB) per stream; lower those instead")
		}
	}
	return l
}

// config reads a task's config block (or config = { ... }) into the
// driver's free-form map.
func (d *decoder) config(c *content, where string) map[string]interface{} {
	if a := c.attrs["config"]; a != nil {
		v, ok := d.value(a.Expr)
		if !ok {
			return nil
		}
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			d.errorf(a.Expr.Range(), "invalid config %s: want a block, config { ... }", describe(v))
			return nil
		}
		gv, err := goValue(v)
		if err != nil {
			d.errorf(a.Expr.Range(), "invalid config: %v", err)
			return nil
		}
		m, _ := gv.(map[string]interface{})
		return m
	}
	if b := d.single(c, "config", where); b != nil {
		return d.freeform(b.Body)
	}
	return nil
}

func (d *decoder) resources(b *hcl.Block) *api.Resources {
	c := d.content(b.Body, resourcesSchema)
	return &api.Resources{
		CPU:      d.intPtr(c.attrs["cpu"], 1, math.MaxInt32),
		MemoryMB: d.intPtr(c.attrs["memory"], 1, math.MaxInt32),
	}
}

func (d *decoder) volumeMount(b *hcl.Block, g *api.TaskGroup) *api.VolumeMount {
	c := d.content(b.Body, volumeMountSchema)
	m := &api.VolumeMount{
		ReadOnly:     d.boolPtr(c.attrs["read_only"]),
		SELinuxLabel: d.strPtr(c.attrs["selinux_label"]),
	}
	n := len(d.diags)
	if s, ok := d.str(c.attrs["volume"]); ok {
		m.Volume = &s
		if _, defined := g.Volumes[s]; !defined {
			d.errorf(c.attrs["volume"].Expr.Range(), "volume_mount names volume %q, which group %q does not define: %s",
				s, *g.Name, wantVolume(g))
		}
	}
	d.missingIf(m.Volume == nil, n, b.DefRange, "volume_mount has no volume: %s", wantVolume(g))
	n = len(d.diags)
	if s, ok := d.str(c.attrs["destination"]); ok && s != "" {
		m.Destination = &s
	}
	d.missingIf(m.Destination == nil, n, d.attrOr(c, "destination", b), `volume_mount has no destination: want the path in the task, e.g. destination = "/data"`)
	if p, ok := d.oneOf(c.attrs["propagation_mode"], api.VolumeMountPropagationPrivate,
		api.VolumeMountPropagationHostToTask, api.VolumeMountPropagationBidirectional); ok {
		m.PropagationMode = &p
	}
	return m
}

// wantVolume says which volume names a volume_mount may use.
func wantVolume(g *api.TaskGroup) string {
	if len(g.Volumes) == 0 {
		return `want the name of a volume "<name>" block of the group, and the group has none`
	}
	names := make([]string, 0, len(g.Volumes))
	for n := range g.Volumes {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	return "want one of " + strings.Join(names, ", ")
}

func (d *decoder) csiPlugin(b *hcl.Block) *api.TaskCSIPluginConfig {
	c := d.content(b.Body, csiPluginSchema)
	p := &api.TaskCSIPluginConfig{}
	n := len(d.diags)
	p.ID, _ = d.str(c.attrs["id"])
	d.missingIf(p.ID == "", n, d.attrOr(c, "id", b), `csi_plugin has no id: want the plugin ID volumes will name, e.g. id = "hostpath"`)
	types := []string{string(api.CSIPluginTypeNode), string(api.CSIPluginTypeController), string(api.CSIPluginTypeMonolith)}
	n = len(d.diags)
	t, _ := d.oneOf(c.attrs["type"], types...)
	p.Type = api.CSIPluginType(t)
	d.missingIf(t == "", n, b.DefRange, "csi_plugin has no type: want one of %s", strings.Join(types, ", "))
	p.MountDir, _ = d.str(c.attrs["mount_dir"])
	p.StagePublishBaseDir, _ = d.str(c.attrs["stage_publish_base_dir"])
	p.HealthTimeout, _ = d.duration(c.attrs["health_timeout"])

	mount := p.MountDir
	if mount == "" {
		mount = api.DefaultCSIMountDir
	}
	stage := p.StagePublishBaseDir
	if stage == "" {
		stage = api.DefaultCSIStagePublishBaseDir
	}
	if under(stage, mount) {
		d.errorf(d.attrOr(c, "stage_publish_base_dir", b),
			"stage_publish_base_dir %q is inside mount_dir %q: want a directory outside it", stage, mount)
	}
	return p
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	p, dir = path.Clean("/"+p), path.Clean("/"+dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
