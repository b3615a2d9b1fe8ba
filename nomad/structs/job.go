package structs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Job types.
const (
	JobTypeService = "service"
	JobTypeBatch   = "batch"
	JobTypeSystem  = "system"
)

// Job status values.
const (
	JobStatusPending = "pending"
	JobStatusRunning = "running"
	JobStatusDead    = "dead"
)

// Job is the unit users submit: groups of tasks to run together.
type Job struct {
	ID          string
	Name        string
	Namespace   string
	Type        string
	Priority    int
	Datacenters []string
	Meta        map[string]string
	Constraints []*Constraint
	TaskGroups  []*TaskGroup

	// Stop marks a job the user stopped but did not purge.
	Stop bool
	// Stable marks a version an operator vouched for (Job.Stable); a new
	// version starts unstable. Berth has no deployments to set it.
	Stable bool

	Status         string
	Version        uint64
	SubmitTime     int64
	CreateIndex    uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
}

// Copy returns a deep copy.
func (j *Job) Copy() *Job {
	if j == nil {
		return nil
	}
	out := *j
	out.Datacenters = slices.Clone(j.Datacenters)
	out.Meta = maps.Clone(j.Meta)
	out.Constraints = copyConstraints(j.Constraints)
	if j.TaskGroups != nil {
		out.TaskGroups = make([]*TaskGroup, len(j.TaskGroups))
		for i, tg := range j.TaskGroups {
			out.TaskGroups[i] = tg.Copy()
		}
	}
	return &out
}

// LookupTaskGroup returns the group named name, or nil.
func (j *Job) LookupTaskGroup(name string) *TaskGroup {
	for _, tg := range j.TaskGroups {
		if tg.Name == name {
			return tg
		}
	}
	return nil
}

// Validate returns every problem with a job at once.
func (j *Job) Validate() error {
	var errs []error
	if err := ValidatePathElement("job ID", j.ID); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validateConstraints(j.Constraints)...)
	if j.Name == "" {
		errs = append(errs, errors.New("missing job name"))
	}
	if j.Namespace == "" {
		errs = append(errs, errors.New("missing namespace"))
	}
	switch j.Type {
	case JobTypeService, JobTypeBatch, JobTypeSystem:
	default:
		errs = append(errs, fmt.Errorf("invalid job type %q (want service, batch or system)", j.Type))
	}
	if j.Priority < 1 || j.Priority > 100 {
		errs = append(errs, fmt.Errorf("priority %d is out of range 1-100", j.Priority))
	}
	if len(j.Datacenters) == 0 {
		errs = append(errs, errors.New("missing datacenters"))
	}
	if len(j.TaskGroups) == 0 {
		errs = append(errs, errors.New("missing task groups"))
	}
	if len(j.TaskGroups) > MaxTaskGroups {
		errs = append(errs, fmt.Errorf("%d task groups is over the limit of %d per job; split the job", len(j.TaskGroups), MaxTaskGroups))
	}
	if n := mapBytes(j.Meta); n > MaxMapBytes {
		errs = append(errs, fmt.Errorf("meta is %d bytes, over the limit of %d", n, MaxMapBytes))
	}
	seen := map[string]bool{}
	for _, tg := range j.TaskGroups {
		if seen[tg.Name] {
			errs = append(errs, fmt.Errorf("group %q is defined twice", tg.Name))
		}
		seen[tg.Name] = true
		if err := tg.Validate(j); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &Error{Code: CodeInvalid, Msg: fmt.Sprintf("job %q is invalid: %v", j.ID, err)}
	}
	return nil
}

// Constraint restricts placement: LTarget Operand RTarget, e.g.
// "${attr.kernel.name}" "=" "linux".
type Constraint struct {
	LTarget string
	RTarget string
	Operand string
}

func copyConstraints(cs []*Constraint) []*Constraint {
	if cs == nil {
		return nil
	}
	out := make([]*Constraint, len(cs))
	for i, c := range cs {
		cc := *c
		out[i] = &cc
	}
	return out
}

// TaskGroup is a set of tasks placed together on one node.
type TaskGroup struct {
	Name             string
	Count            int
	Constraints      []*Constraint
	RestartPolicy    *RestartPolicy
	ReschedulePolicy *ReschedulePolicy
	Volumes          map[string]*VolumeRequest
	Tasks            []*Task
	Meta             map[string]string
}

// Copy returns a deep copy.
func (tg *TaskGroup) Copy() *TaskGroup {
	if tg == nil {
		return nil
	}
	out := *tg
	out.Constraints = copyConstraints(tg.Constraints)
	if tg.RestartPolicy != nil {
		r := *tg.RestartPolicy
		out.RestartPolicy = &r
	}
	if tg.ReschedulePolicy != nil {
		r := *tg.ReschedulePolicy
		out.ReschedulePolicy = &r
	}
	if tg.Volumes != nil {
		out.Volumes = make(map[string]*VolumeRequest, len(tg.Volumes))
		for k, v := range tg.Volumes {
			out.Volumes[k] = v.Copy()
		}
	}
	if tg.Tasks != nil {
		out.Tasks = make([]*Task, len(tg.Tasks))
		for i, t := range tg.Tasks {
			out.Tasks[i] = t.Copy()
		}
	}
	out.Meta = maps.Clone(tg.Meta)
	return &out
}

// LookupTask returns the task named name, or nil.
func (tg *TaskGroup) LookupTask(name string) *Task {
	for _, t := range tg.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Validate checks a group within job j.
func (tg *TaskGroup) Validate(j *Job) error {
	var errs []error
	if err := ValidatePathElement("group name", tg.Name); err != nil {
		errs = append(errs, err)
	}
	if tg.RestartPolicy != nil {
		if err := tg.RestartPolicy.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if tg.ReschedulePolicy != nil {
		if err := tg.ReschedulePolicy.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, validateConstraints(tg.Constraints)...)
	if tg.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d is negative", tg.Count))
	}
	if tg.Count > MaxGroupCount {
		errs = append(errs, fmt.Errorf("count %d is over the limit of %d per group", tg.Count, MaxGroupCount))
	}
	if len(tg.Tasks) == 0 {
		errs = append(errs, errors.New("missing tasks"))
	}
	if len(tg.Tasks) > MaxTasksPerGroup {
		errs = append(errs, fmt.Errorf("%d tasks is over the limit of %d per group", len(tg.Tasks), MaxTasksPerGroup))
	}
	if n := mapBytes(tg.Meta); n > MaxMapBytes {
		errs = append(errs, fmt.Errorf("meta is %d bytes, over the limit of %d", n, MaxMapBytes))
	}
	seen := map[string]bool{}
	for _, t := range tg.Tasks {
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("task %q is defined twice", t.Name))
		}
		seen[t.Name] = true
		if err := t.Validate(tg); err != nil {
			errs = append(errs, err)
		}
	}
	for name, v := range tg.Volumes {
		if err := v.Validate(j, tg, name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("group %q: %w", tg.Name, err)
	}
	return nil
}

// RestartPolicy says how a task restarts in place.
type RestartPolicy struct {
	Attempts int
	Interval time.Duration
	Delay    time.Duration
	Mode     string // "fail" or "delay"
}

// Restart policy modes.
const (
	RestartPolicyModeFail  = "fail"
	RestartPolicyModeDelay = "delay"
)

// ReschedulePolicy says how a failed alloc is replaced on another node.
type ReschedulePolicy struct {
	Attempts      int
	Interval      time.Duration
	Delay         time.Duration
	DelayFunction string // constant, exponential, fibonacci
	MaxDelay      time.Duration
	Unlimited     bool
}

// Volume request types.
const (
	VolumeTypeCSI  = "csi"
	VolumeTypeHost = "host"
)

// VolumeRequest is a group's `volume` block.
type VolumeRequest struct {
	Name           string
	Type           string
	Source         string
	ReadOnly       bool
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	MountOptions   *CSIMountOptions
	PerAlloc       bool
}

// Copy returns a deep copy.
func (v *VolumeRequest) Copy() *VolumeRequest {
	if v == nil {
		return nil
	}
	out := *v
	out.MountOptions = v.MountOptions.Copy()
	return &out
}

// SourceFor returns the volume ID for alloc index idx: "name[idx]" when
// PerAlloc is set, else Source.
func (v *VolumeRequest) SourceFor(idx int) string {
	if v.PerAlloc {
		return fmt.Sprintf("%s[%d]", v.Source, idx)
	}
	return v.Source
}

// ClaimMode is the claim mode the request needs.
func (v *VolumeRequest) ClaimMode() CSIVolumeClaimMode {
	if v.ReadOnly {
		return CSIVolumeClaimRead
	}
	return CSIVolumeClaimWrite
}

// Validate checks a volume request named name in group tg of job j.
func (v *VolumeRequest) Validate(j *Job, tg *TaskGroup, name string) error {
	var errs []error
	if err := ValidatePathElement("volume name", name); err != nil {
		errs = append(errs, err)
	}
	switch v.Type {
	case VolumeTypeCSI:
		if !v.AccessMode.Valid() {
			errs = append(errs, fmt.Errorf("access_mode %q is not valid", v.AccessMode))
		}
		if !v.AttachmentMode.Valid() {
			errs = append(errs, fmt.Errorf("attachment_mode %q is not valid", v.AttachmentMode))
		}
		if v.AttachmentMode == CSIVolumeAttachmentModeBlockDevice && v.MountOptions != nil {
			errs = append(errs, errors.New("block devices cannot have mount options"))
		}
		if v.AccessMode.ReadOnly() && !v.ReadOnly {
			errs = append(errs, fmt.Errorf("access mode %s requires read_only = true", v.AccessMode))
		}
		if v.AccessMode.SingleNode() && tg.Count > 1 && !v.PerAlloc {
			errs = append(errs, fmt.Errorf("access mode %s allows one alloc, but the group has count %d; set per_alloc = true", v.AccessMode, tg.Count))
		}
		if v.PerAlloc && j.Type == JobTypeSystem {
			errs = append(errs, errors.New("per_alloc is not allowed in system jobs"))
		}
	case VolumeTypeHost:
	default:
		errs = append(errs, fmt.Errorf("type %q is not valid (want csi or host)", v.Type))
	}
	if v.Source == "" {
		errs = append(errs, errors.New("missing source"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("volume %q: %w", name, err)
	}
	return nil
}

// Task is one process to run.
type Task struct {
	Name            string
	Driver          string
	Config          map[string]any
	Env             map[string]string
	Resources       *Resources
	VolumeMounts    []*VolumeMount
	CSIPluginConfig *TaskCSIPluginConfig
	KillTimeout     time.Duration
	// User is who the task runs as; "" is the driver's default (exec:
	// nobody, or root for a CSI plugin task).
	User        string
	Constraints []*Constraint
	Meta        map[string]string
	// LogConfig bounds the task's logs; nil keeps the client's defaults.
	LogConfig *LogConfig
}

// LogConfig is a task's log rotation: at most MaxFiles files (the live
// one included) of MaxFileSizeMB each, per stream; zero keeps the
// client's default.
type LogConfig struct {
	MaxFiles      int
	MaxFileSizeMB int
}

// Copy returns a deep copy (Config is copied one level deep).
func (t *Task) Copy() *Task {
	if t == nil {
		return nil
	}
	out := *t
	out.Config = maps.Clone(t.Config)
	out.Env = maps.Clone(t.Env)
	if t.LogConfig != nil {
		lc := *t.LogConfig
		out.LogConfig = &lc
	}
	if t.Resources != nil {
		r := *t.Resources
		out.Resources = &r
	}
	if t.VolumeMounts != nil {
		out.VolumeMounts = make([]*VolumeMount, len(t.VolumeMounts))
		for i, m := range t.VolumeMounts {
			mm := *m
			out.VolumeMounts[i] = &mm
		}
	}
	if t.CSIPluginConfig != nil {
		c := *t.CSIPluginConfig
		out.CSIPluginConfig = &c
	}
	out.Constraints = copyConstraints(t.Constraints)
	out.Meta = maps.Clone(t.Meta)
	return &out
}

// Validate checks a task within group tg.
func (t *Task) Validate(tg *TaskGroup) error {
	var errs []error
	if err := ValidatePathElement("task name", t.Name); err != nil {
		errs = append(errs, err)
	}
	if t.KillTimeout < 0 {
		errs = append(errs, fmt.Errorf("kill_timeout %s is negative", t.KillTimeout))
	}
	if t.Resources != nil {
		if err := t.Resources.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, validateConstraints(t.Constraints)...)
	if n := mapBytes(t.Env) + mapBytes(t.Meta); n > MaxMapBytes {
		errs = append(errs, fmt.Errorf("env and meta are %d bytes, over the limit of %d", n, MaxMapBytes))
	}
	if t.Driver == "" {
		errs = append(errs, errors.New("missing driver"))
	}
	for _, m := range t.VolumeMounts {
		if _, ok := tg.Volumes[m.Volume]; !ok {
			errs = append(errs, fmt.Errorf("volume_mount names volume %q, which the group does not define", m.Volume))
		}
		if m.Destination == "" {
			errs = append(errs, fmt.Errorf("volume_mount of %q: missing destination", m.Volume))
		}
	}
	if c := t.CSIPluginConfig; c != nil {
		if c.ID == "" {
			errs = append(errs, errors.New("csi_plugin: missing id"))
		}
		if !c.Type.Valid() {
			errs = append(errs, fmt.Errorf("csi_plugin: type %q is not valid (want node, controller or monolith)", c.Type))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("task %q: %w", t.Name, err)
	}
	return nil
}

// Resources a task asks for.
type Resources struct {
	CPU      int64 // MHz
	MemoryMB int64
}

// VolumeMount mounts a group volume into a task.
type VolumeMount struct {
	Volume          string
	Destination     string
	ReadOnly        bool
	PropagationMode string
}

// TaskCSIPluginConfig marks a task as a CSI plugin.
type TaskCSIPluginConfig struct {
	ID                  string
	Type                CSIPluginType
	MountDir            string
	StagePublishBaseDir string
	HealthTimeout       time.Duration
}

// JobListStub is the list view of a job.
type JobListStub struct {
	ID             string
	Name           string
	Namespace      string
	Type           string
	Priority       int
	Status         string
	Stop           bool
	SubmitTime     int64
	CreateIndex    uint64
	ModifyIndex    uint64
	JobModifyIndex uint64
	// JobSummary counts the job's allocs by state, per group.
	JobSummary *JobSummary
}

// JobSummary counts a job's allocs by client state, per task group.
type JobSummary struct {
	JobID     string
	Namespace string
	Summary   map[string]TaskGroupSummary
	// Children is always empty: Berth has no parameterized or periodic
	// jobs, so no job has children.
	Children *JobChildrenSummary

	CreateIndex uint64
	ModifyIndex uint64
}

// JobChildrenSummary counts a parent job's children by status.
type JobChildrenSummary struct {
	Pending, Running, Dead int64
}

// TaskGroupSummary counts one group's allocs by client state; Queued is
// what the job's latest evaluation could not place yet.
type TaskGroupSummary struct {
	Queued, Complete, Failed, Running, Starting, Lost, Unknown int
}

// SummarizeJob counts the allocs of job (allocs of an earlier job of the
// same ID, purged and registered again, are left out) and takes the queued
// counts from the newest of evals that has them.
func SummarizeJob(job *Job, allocs []*Allocation, evals []*Evaluation) *JobSummary {
	out := &JobSummary{
		JobID: job.ID, Namespace: job.Namespace, Summary: make(map[string]TaskGroupSummary, len(job.TaskGroups)),
		Children: &JobChildrenSummary{}, CreateIndex: job.CreateIndex, ModifyIndex: job.ModifyIndex,
	}
	for _, tg := range job.TaskGroups {
		out.Summary[tg.Name] = TaskGroupSummary{}
	}
	for _, a := range allocs {
		if a.Job != nil && a.Job.CreateIndex != job.CreateIndex {
			continue
		}
		s := out.Summary[a.TaskGroup]
		switch a.ClientStatus {
		case AllocClientStatusPending:
			s.Starting++
		case AllocClientStatusRunning:
			s.Running++
		case AllocClientStatusComplete:
			s.Complete++
		case AllocClientStatusFailed:
			s.Failed++
		case AllocClientStatusLost:
			s.Lost++
		default:
			s.Unknown++
		}
		out.Summary[a.TaskGroup] = s
		out.ModifyIndex = max(out.ModifyIndex, a.ModifyIndex)
	}
	var latest *Evaluation
	for _, e := range evals {
		if e.QueuedAllocations != nil && e.JobModifyIndex >= job.JobModifyIndex &&
			(latest == nil || e.CreateIndex > latest.CreateIndex) {
			latest = e
		}
	}
	if latest != nil {
		for tg, n := range latest.QueuedAllocations {
			if s, ok := out.Summary[tg]; ok {
				s.Queued = n
				out.Summary[tg] = s
			}
		}
	}
	return out
}

// Stub returns the list view.
func (j *Job) Stub() *JobListStub {
	return &JobListStub{
		ID: j.ID, Name: j.Name, Namespace: j.Namespace, Type: j.Type, Priority: j.Priority,
		Status: j.Status, Stop: j.Stop, SubmitTime: j.SubmitTime,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
	}
}

// DefaultJobTrackedVersions is how many versions of each job the servers
// keep when server.job_tracked_versions is unset, as Nomad's default.
const DefaultJobTrackedVersions = 6

// JobRegisterRequest registers or updates a job; the eval created for it
// rides in the same Raft entry.
type JobRegisterRequest struct {
	Job       *Job
	Eval      *Evaluation
	Timestamp int64
	// TrackedVersions is how many versions of the job to keep (0: the
	// default). The leader sets it from its config, whatever a caller sent,
	// so that every server applying the entry trims the same versions.
	TrackedVersions int
	WriteRequest
}

// JobRegisterResponse is the reply to register.
type JobRegisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Warnings        string
	WriteMeta
}

// JobDeregisterRequest stops (or purges) a job.
type JobDeregisterRequest struct {
	JobID     string
	Purge     bool
	Eval      *Evaluation
	Timestamp int64
	// TrackedVersions is as in JobRegisterRequest: a stop is a new version.
	TrackedVersions int
	WriteRequest
}

// JobDeregisterResponse is the reply to deregister.
type JobDeregisterResponse struct {
	EvalID string
	WriteMeta
}

// JobSpecificRequest reads one job.
type JobSpecificRequest struct {
	JobID string
	All   bool
	QueryOptions
}

// SingleJobResponse carries one job, or nil.
type SingleJobResponse struct {
	Job *Job
	QueryMeta
}

// JobVersionsRequest reads the versions of one job, by exact ID.
type JobVersionsRequest struct {
	JobID string
	QueryOptions
}

// JobVersionsResponse carries a job's versions, newest first; empty when
// there is no such job.
type JobVersionsResponse struct {
	Versions []*Job
	QueryMeta
}

// JobRevertRequest registers again the spec of one of a job's kept
// versions (as a new version).
type JobRevertRequest struct {
	JobID      string
	JobVersion uint64
	// EnforcePriorVersion, when set, refuses the revert unless the job is
	// at that version, so two operators cannot revert over each other.
	EnforcePriorVersion *uint64
	WriteRequest
}

// JobStabilityRequest marks one kept version of a job stable or not.
type JobStabilityRequest struct {
	JobID      string
	JobVersion uint64
	Stable     bool
	WriteRequest
}

// JobListResponse carries list stubs.
type JobListResponse struct {
	Jobs []*JobListStub
	QueryMeta
}
