package api

import (
	"time"
)

// Restart policy modes.
const (
	RestartPolicyModeDelay = "delay"
	RestartPolicyModeFail  = "fail"
)

// Volume request types.
const (
	VolumeTypeCSI  = "csi"
	VolumeTypeHost = "host"
)

// Volume mount propagation modes.
const (
	VolumeMountPropagationPrivate       = "private"
	VolumeMountPropagationHostToTask    = "host-to-task"
	VolumeMountPropagationBidirectional = "bidirectional"
)

// Task states.
const (
	TaskStatePending = "pending"
	TaskStateRunning = "running"
	TaskStateDead    = "dead"
)

// TaskGroup is a set of tasks placed together on one node.
type TaskGroup struct {
	Name             *string
	Count            *int
	Constraints      []*Constraint
	Tasks            []*Task
	Volumes          map[string]*VolumeRequest
	RestartPolicy    *RestartPolicy
	ReschedulePolicy *ReschedulePolicy
	Meta             map[string]string
	// EphemeralDisk is Nomad's ephemeral_disk; Berth reads only SizeMB and
	// does not reserve it (the registration warns so).
	EphemeralDisk *EphemeralDisk `json:",omitempty"`
}

// EphemeralDisk is a group's local disk request.
type EphemeralDisk struct {
	Sticky  *bool `json:",omitempty"`
	Migrate *bool `json:",omitempty"`
	SizeMB  *int  `json:",omitempty"`
}

// LogConfig bounds a task's logs: at most MaxFiles files of MaxFileSizeMB
// each, per stream.
type LogConfig struct {
	MaxFiles      *int  `json:",omitempty"`
	MaxFileSizeMB *int  `json:",omitempty"`
	Disabled      *bool `json:",omitempty"`
}

// Canonicalize fills a group's defaults within job j (which must be
// canonicalized first, as Job.Canonicalize does): count 1, the restart
// policy for the job type, the job's reschedule policy merged over the
// default for the job type (system jobs have none), volume names from
// their keys, and each task's defaults.
func (g *TaskGroup) Canonicalize(j *Job) {
	jobType := JobTypeService
	if j != nil && j.Type != nil {
		jobType = *j.Type
	}
	if g.Name == nil {
		g.Name = pointerOf("")
	}
	if g.Count == nil {
		g.Count = pointerOf(1)
	}

	restart := DefaultRestartPolicy(jobType)
	restart.Merge(g.RestartPolicy)
	g.RestartPolicy = restart

	var jobReschedule *ReschedulePolicy
	if j != nil {
		jobReschedule = j.Reschedule
	}
	if jobReschedule != nil || g.ReschedulePolicy != nil || jobType != JobTypeSystem {
		rp := DefaultReschedulePolicy(jobType)
		rp.Merge(jobReschedule)
		rp.Merge(g.ReschedulePolicy)
		g.ReschedulePolicy = rp
	}

	for name, v := range g.Volumes {
		if v != nil && v.Name == "" {
			v.Name = name
		}
	}
	for _, t := range g.Tasks {
		if t != nil {
			t.Canonicalize(g, j)
		}
	}
}

// RestartPolicy says how a group's tasks restart in place after they fail.
type RestartPolicy struct {
	Interval *time.Duration
	Attempts *int
	Delay    *time.Duration
	Mode     *string
}

// DefaultRestartPolicy is Nomad's default for a job type: batch jobs get 3
// attempts in 24h, other jobs 2 attempts in 30m; both wait 15s between
// attempts and fail the alloc when the attempts are used up.
func DefaultRestartPolicy(jobType string) *RestartPolicy {
	if jobType == JobTypeBatch {
		return &RestartPolicy{
			Attempts: pointerOf(3),
			Interval: durationPtr(24 * time.Hour),
			Delay:    durationPtr(15 * time.Second),
			Mode:     pointerOf(RestartPolicyModeFail),
		}
	}
	return &RestartPolicy{
		Attempts: pointerOf(2),
		Interval: durationPtr(30 * time.Minute),
		Delay:    durationPtr(15 * time.Second),
		Mode:     pointerOf(RestartPolicyModeFail),
	}
}

// Merge overlays the fields o sets onto r.
func (r *RestartPolicy) Merge(o *RestartPolicy) {
	if o == nil {
		return
	}
	if o.Interval != nil {
		r.Interval = o.Interval
	}
	if o.Attempts != nil {
		r.Attempts = o.Attempts
	}
	if o.Delay != nil {
		r.Delay = o.Delay
	}
	if o.Mode != nil {
		r.Mode = o.Mode
	}
}

// ReschedulePolicy says how a failed alloc is replaced on another node.
type ReschedulePolicy struct {
	Attempts      *int
	Interval      *time.Duration
	Delay         *time.Duration
	DelayFunction *string // constant, exponential or fibonacci
	MaxDelay      *time.Duration
	Unlimited     *bool
}

// DefaultReschedulePolicy is Nomad's default for a job type: service jobs
// reschedule without limit with an exponential delay from 30s up to 1h;
// batch jobs once a day after 5s; system jobs (and unknown types) never.
func DefaultReschedulePolicy(jobType string) *ReschedulePolicy {
	switch jobType {
	case JobTypeService:
		return &ReschedulePolicy{
			Attempts:      pointerOf(0),
			Interval:      durationPtr(0),
			Delay:         durationPtr(30 * time.Second),
			DelayFunction: pointerOf("exponential"),
			MaxDelay:      durationPtr(time.Hour),
			Unlimited:     pointerOf(true),
		}
	case JobTypeBatch:
		return &ReschedulePolicy{
			Attempts:      pointerOf(1),
			Interval:      durationPtr(24 * time.Hour),
			Delay:         durationPtr(5 * time.Second),
			DelayFunction: pointerOf("constant"),
			MaxDelay:      durationPtr(0),
			Unlimited:     pointerOf(false),
		}
	default:
		return &ReschedulePolicy{
			Attempts:      pointerOf(0),
			Interval:      durationPtr(0),
			Delay:         durationPtr(0),
			DelayFunction: pointerOf(""),
			MaxDelay:      durationPtr(0),
			Unlimited:     pointerOf(false),
		}
	}
}

// Merge overlays the fields o sets onto r.
func (r *ReschedulePolicy) Merge(o *ReschedulePolicy) {
	if o == nil {
		return
	}
	if o.Attempts != nil {
		r.Attempts = o.Attempts
	}
	if o.Interval != nil {
		r.Interval = o.Interval
	}
	if o.Delay != nil {
		r.Delay = o.Delay
	}
	if o.DelayFunction != nil {
		r.DelayFunction = o.DelayFunction
	}
	if o.MaxDelay != nil {
		r.MaxDelay = o.MaxDelay
	}
	if o.Unlimited != nil {
		r.Unlimited = o.Unlimited
	}
}

// VolumeRequest is a group's `volume "name" {}` block: a volume the
// group's tasks may mount.
type VolumeRequest struct {
	Name           string
	Type           string // csi or host
	Source         string // the volume ID
	ReadOnly       bool
	Sticky         bool // host volumes only
	AccessMode     string
	AttachmentMode string
	MountOptions   *CSIMountOptions
	// PerAlloc appends "[<alloc index>]" to Source, so each alloc of the
	// group gets its own volume.
	PerAlloc bool
}

// VolumeMount mounts a group volume into a task.
type VolumeMount struct {
	Volume          *string
	Destination     *string
	ReadOnly        *bool
	PropagationMode *string
	SELinuxLabel    *string
}

// Canonicalize fills the defaults: read-write, private propagation.
func (m *VolumeMount) Canonicalize() {
	if m.ReadOnly == nil {
		m.ReadOnly = pointerOf(false)
	}
	if m.PropagationMode == nil {
		m.PropagationMode = pointerOf(VolumeMountPropagationPrivate)
	}
	if m.SELinuxLabel == nil {
		m.SELinuxLabel = pointerOf("")
	}
}

// Task is one process to run.
type Task struct {
	Name string
	// Driver runs the task: raw_exec, exec, mock.
	Driver string
	// User is who the task runs as (exec: "nobody" unless set).
	User string `json:",omitempty"`
	// Config is the driver's configuration, as the jobspec's config block
	// gave it.
	Config          map[string]interface{}
	Constraints     []*Constraint
	Env             map[string]string
	Resources       *Resources
	Meta            map[string]string
	KillTimeout     *time.Duration
	VolumeMounts    []*VolumeMount
	CSIPluginConfig *TaskCSIPluginConfig `json:",omitempty"`
	LogConfig       *LogConfig           `json:",omitempty"`
}

// Canonicalize fills a task's defaults: resources, a 5s kill timeout, the
// volume mount and csi_plugin defaults. g and j may be nil.
func (t *Task) Canonicalize(g *TaskGroup, j *Job) {
	if t.Resources == nil {
		t.Resources = &Resources{}
	}
	t.Resources.Canonicalize()
	if t.KillTimeout == nil {
		t.KillTimeout = durationPtr(5 * time.Second)
	}
	for _, m := range t.VolumeMounts {
		if m != nil {
			m.Canonicalize()
		}
	}
	if t.CSIPluginConfig != nil {
		t.CSIPluginConfig.Canonicalize()
	}
}

// Resources a task asks for.
type Resources struct {
	CPU      *int // MHz
	MemoryMB *int
}

// Default task resources, as Nomad's.
const (
	DefaultCPU      = 100
	DefaultMemoryMB = 300
)

// Canonicalize fills the defaults: 100 MHz of CPU, 300 MB of memory.
func (r *Resources) Canonicalize() {
	if r.CPU == nil {
		r.CPU = pointerOf(DefaultCPU)
	}
	if r.MemoryMB == nil {
		r.MemoryMB = pointerOf(DefaultMemoryMB)
	}
}

// CSIPluginType is which CSI services a plugin task serves.
type CSIPluginType string

// CSI plugin types.
const (
	CSIPluginTypeNode       CSIPluginType = "node"
	CSIPluginTypeController CSIPluginType = "controller"
	CSIPluginTypeMonolith   CSIPluginType = "monolith"
)

// TaskCSIPluginConfig is a task's `csi_plugin` block: the task serves a
// CSI plugin on a unix socket in MountDir.
type TaskCSIPluginConfig struct {
	ID   string
	Type CSIPluginType
	// MountDir is where, inside the task, the plugin's socket directory
	// is mounted (CSI_ENDPOINT points into it).
	MountDir string
	// StagePublishBaseDir is where, inside the task, the plugin sees the
	// staging and publish paths. It must not be under MountDir.
	StagePublishBaseDir string
	// HealthTimeout is how long the plugin may stay unhealthy before the
	// task is restarted.
	HealthTimeout time.Duration
}

// Defaults for csi_plugin blocks.
const (
	DefaultCSIMountDir            = "/csi"
	DefaultCSIStagePublishBaseDir = "/local/csi"
	DefaultCSIHealthTimeout       = 30 * time.Second
)

// Canonicalize fills the defaults: mount_dir "/csi",
// stage_publish_base_dir "/local/csi", health_timeout 30s.
func (c *TaskCSIPluginConfig) Canonicalize() {
	if c.MountDir == "" {
		c.MountDir = DefaultCSIMountDir
	}
	if c.StagePublishBaseDir == "" {
		c.StagePublishBaseDir = DefaultCSIStagePublishBaseDir
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = DefaultCSIHealthTimeout
	}
}

// TaskState is where a task is and how it got there.
type TaskState struct {
	State       string // pending, running, dead
	Failed      bool
	Restarts    uint64
	LastRestart time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	Events      []*TaskEvent
}

// Task event types.
const (
	TaskSetup            = "Task Setup"
	TaskSetupFailure     = "Setup Failure"
	TaskDriverFailure    = "Driver Failure"
	TaskDriverMessage    = "Driver"
	TaskReceived         = "Received"
	TaskFailedValidation = "Failed Validation"
	TaskStarted          = "Started"
	TaskTerminated       = "Terminated"
	TaskKilling          = "Killing"
	TaskKilled           = "Killed"
	TaskRestarting       = "Restarting"
	TaskNotRestarting    = "Not Restarting"
	TaskSiblingFailed    = "Sibling Task Failed"
	TaskSignaling        = "Signaling"
	TaskPluginUnhealthy  = "Plugin became unhealthy"
	TaskPluginHealthy    = "Plugin became healthy"
)

// TaskEvent is one thing that happened to a task.
type TaskEvent struct {
	Type           string
	Time           int64 // unix ns
	DisplayMessage string
	Details        map[string]string
	Message        string
	FailsTask      bool
	RestartReason  string
	SetupError     string
	DriverError    string
	DriverMessage  string
	ExitCode       int
	Signal         int
	KillReason     string
	KillTimeout    time.Duration
	KillError      string
	StartDelay     int64 // ns
	FailedSibling  string
	TaskSignal     string
}
