package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Config is the agent configuration file (HCL2). Every field is optional
// in the file; Merge layers files over defaults.
type Config struct {
	Name       string `hcl:"name,optional"`
	Region     string `hcl:"region,optional"`
	Datacenter string `hcl:"datacenter,optional"`
	DataDir    string `hcl:"data_dir,optional"`
	BindAddr   string `hcl:"bind_addr,optional"`
	LogLevel   string `hcl:"log_level,optional"`
	LogJSON    *bool  `hcl:"log_json,optional"`

	Ports     *Ports           `hcl:"ports,block"`
	Advertise *AdvertiseConfig `hcl:"advertise,block"`
	Server    *ServerConfig    `hcl:"server,block"`
	Client    *ClientConfig    `hcl:"client,block"`
	Plugins   []*PluginConfig  `hcl:"plugin,block"`
	Limits    *LimitsConfig    `hcl:"limits,block"`
	ACL       *ACLConfig       `hcl:"acl,block"`
	TLS       *TLSConfig       `hcl:"tls,block"`

	// DisableUpdateCheck is Nomad's disable_update_check, accepted so
	// Nomad configs load: Berth never checks for updates, so there is
	// nothing to disable.
	DisableUpdateCheck *bool `hcl:"disable_update_check,optional"`

	// DevMode is set by -dev, never by a file.
	DevMode bool
	// DevPlugin, with DevMode, runs Berth's hostpath CSI plugin as the
	// system job "hostpath" (dev_plugin.go). `agent -dev` sets it unless
	// -dev-no-plugin is given; never a file.
	DevPlugin *DevPluginConfig
	// ExtraDrivers, when set, adds task drivers to this agent's client
	// beside the built-in ones (always enabled). Tests add the mock
	// driver this way; production code never sets it, so no test double
	// is built into berth. Never a file.
	ExtraDrivers func(logger hclog.Logger, stateDir string) map[string]drivers.Driver
}

// Ports are the agent's listening ports.
type Ports struct {
	HTTP *int `hcl:"http,optional"`
	RPC  *int `hcl:"rpc,optional"`
}

// HTTPPort is the HTTP port (0 picks a free one).
func (p *Ports) HTTPPort() int { return derefInt(p.HTTP) }

// RPCPort is the RPC port (0 picks a free one).
func (p *Ports) RPCPort() int { return derefInt(p.RPC) }

func derefInt(i *int) int {
	if i == nil {
		return 0
	}
	return *i
}

func intPtr(i int) *int { return &i }

// AdvertiseConfig are the addresses others use to reach the agent.
type AdvertiseConfig struct {
	HTTP string `hcl:"http,optional"`
	RPC  string `hcl:"rpc,optional"`
}

// ServerConfig is the `server {}` block.
type ServerConfig struct {
	Enabled         *bool    `hcl:"enabled,optional"`
	BootstrapExpect int      `hcl:"bootstrap_expect,optional"`
	ServerJoin      []string `hcl:"server_join,optional"`
	// EventBufferSize is how many Raft indexes' events the event stream
	// keeps for readers to catch up and resume (0: 1024).
	EventBufferSize int `hcl:"event_buffer_size,optional"`
	// JobTrackedVersions is how many versions of each job the servers
	// keep for job history and revert (unset: 6, as Nomad's).
	JobTrackedVersions *int `hcl:"job_tracked_versions,optional"`
}

// ACLConfig is the `acl {}` block. With enabled = true every request
// needs a token its policies allow (bootstrap the first with `berth acl
// bootstrap`); -dev agents keep ACLs off unless the block says otherwise.
type ACLConfig struct {
	Enabled *bool `hcl:"enabled,optional"`
	// AuditLog is the audit log file on servers; "" puts it under
	// data_dir (no audit log for -dev unless set). AuditLogMaxMB rotates it.
	AuditLog      string `hcl:"audit_log,optional"`
	AuditLogMaxMB int    `hcl:"audit_log_max_mb,optional"`
}

// ACLEnabled reports whether acl.enabled is true.
func (c *Config) ACLEnabled() bool {
	return c.ACL != nil && c.ACL.Enabled != nil && *c.ACL.Enabled
}

// ClientConfig is the `client {}` block.
type ClientConfig struct {
	Enabled   *bool             `hcl:"enabled,optional"`
	Servers   []string          `hcl:"servers,optional"`
	NodeClass string            `hcl:"node_class,optional"`
	Meta      map[string]string `hcl:"meta,optional"`

	// NetworkInterface names the interface whose first address the node
	// advertises (its unique.network.ip-address), as in Nomad.
	NetworkInterface string `hcl:"network_interface,optional"`
	// Options are Nomad's client options. Berth reads
	// driver.raw_exec.enable; ParseConfig refuses the others, naming
	// what Berth does instead.
	Options map[string]string `hcl:"options,optional"`
	// ChrootEnv is Nomad's chroot_env, refused by ParseConfig: Berth's
	// exec driver builds a task's root in its own way (see its package).
	ChrootEnv map[string]string `hcl:"chroot_env,optional"`

	// DisconnectDeadline is `disconnect_deadline = "5m"`: once the client
	// has not reached the servers for this long, it has stopped every
	// alloc it runs that uses CSI volumes, and the servers may free the volume claims of the
	// down node's allocs without fencing (client.Config). "0" turns it
	// off. Nil takes DefaultDisconnectDeadline.
	DisconnectDeadline *time.Duration
	// DisconnectDeadlineHCL is disconnect_deadline as written; ParseConfig
	// reads it into DisconnectDeadline.
	DisconnectDeadlineHCL hcl.Expression `hcl:"disconnect_deadline,optional"`

	// CSIStatsInterval is `csi_stats_interval = "15s"`: how often the
	// client samples the usage of the CSI volumes published on it and
	// reports it to the servers; at most 30s. Nil takes the default (15s).
	CSIStatsInterval    *time.Duration
	CSIStatsIntervalHCL hcl.Expression `hcl:"csi_stats_interval,optional"`
}

// DefaultDisconnectDeadline is the client's disconnect deadline unless
// client.disconnect_deadline says otherwise, dev agents included.
//
// Liveness wants it on: without it, a node that crashed or was cut off
// holds its single-writer volumes until a controller fences it or an
// operator runs 'volume detach -force'; with it, they are free 5 minutes
// after the servers marked the node down. Safety holds because the client
// keeps the promise: it stops its allocs that use CSI volumes (and
// unpublishes them) before 5 minutes without contact have passed — at about 4m30s with the
// default kill timeout — takes the promise back when it shuts down
// cleanly and leaves its tasks running, and after a restart stops at once
// the allocs it finds if it has been out of contact that long. What it
// cannot cover is a client agent that dies without shutting down while
// its tasks keep running: run it under a supervisor that restarts it, or
// set "0" where a claim must never be freed on a timer. Five minutes is
// far longer than a heartbeat TTL or a leader election, so a short outage
// never stops an alloc.
const DefaultDisconnectDeadline = 5 * time.Minute

// DisconnectDeadlineOrDefault is the deadline the client promises.
func (c *ClientConfig) DisconnectDeadlineOrDefault() time.Duration {
	if c.DisconnectDeadline == nil {
		return DefaultDisconnectDeadline
	}
	return *c.DisconnectDeadline
}

// decodeDurations reads the duration settings written as strings ("5m"),
// with the file and line of a bad one.
func (c *ClientConfig) decodeDurations() hcl.Diagnostics {
	d, diags := durationAttr("disconnect_deadline", c.DisconnectDeadlineHCL)
	if d != nil {
		c.DisconnectDeadline = d
	}
	si, sdiags := durationAttr("csi_stats_interval", c.CSIStatsIntervalHCL)
	diags = append(diags, sdiags...)
	if si != nil {
		if *si <= 0 || *si > structs.MaxCSIStatsInterval {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid csi_stats_interval",
				Detail:  fmt.Sprintf("csi_stats_interval is %s; write a duration above 0 and at most %s, e.g. \"15s\"", *si, structs.MaxCSIStatsInterval),
				Subject: c.CSIStatsIntervalHCL.Range().Ptr(),
			})
		} else {
			c.CSIStatsInterval = si
		}
	}
	return diags
}

// durationAttr reads a duration attribute: nil when it is not set.
func durationAttr(name string, expr hcl.Expression) (*time.Duration, hcl.Diagnostics) {
	if expr == nil {
		return nil, nil
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() || v.IsNull() {
		return nil, diags
	}
	bad := func(detail string) hcl.Diagnostics {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError, Summary: "Invalid duration",
			Detail: fmt.Sprintf("%s: %s; write a duration like \"5m\" or \"90s\"", name, detail), Subject: expr.Range().Ptr(),
		}}
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || !s.IsKnown() {
		return nil, bad("a string is required")
	}
	d, err := time.ParseDuration(s.AsString())
	switch {
	case err != nil:
		return nil, bad(fmt.Sprintf("%q is not a duration", s.AsString()))
	case d < 0:
		return nil, bad(fmt.Sprintf("%q is negative", s.AsString()))
	}
	return &d, nil
}

func durationPtr(d time.Duration) *time.Duration { return &d }

// PluginConfig is a `plugin "raw_exec" { config { ... } }` block.
type PluginConfig struct {
	Name   string   `hcl:"name,label"`
	Remain hcl.Body `hcl:",remain"`
}

func boolPtr(b bool) *bool { return &b }

// DefaultConfig is the base every file is merged onto.
func DefaultConfig() *Config {
	host, _ := os.Hostname()
	return &Config{
		Name:       host,
		Region:     "global",
		Datacenter: "dc1",
		// Loopback unless bind_addr says otherwise: an agent reachable
		// from the network is a choice, not a default.
		BindAddr:  "127.0.0.1",
		LogLevel:  "INFO",
		Ports:     &Ports{HTTP: intPtr(4646), RPC: intPtr(4647)},
		Advertise: &AdvertiseConfig{},
		Server:    &ServerConfig{Enabled: boolPtr(false)},
		Client:    &ClientConfig{Enabled: boolPtr(false), DisconnectDeadline: durationPtr(DefaultDisconnectDeadline)},
	}
}

// DevConfig is `agent -dev`: server and client in one process, in-memory
// Raft, loopback only.
func DevConfig() *Config {
	c := DefaultConfig()
	c.DevMode = true
	c.BindAddr = "127.0.0.1"
	c.LogLevel = "INFO"
	c.Server = &ServerConfig{Enabled: boolPtr(true), BootstrapExpect: 1}
	c.Client = &ClientConfig{Enabled: boolPtr(true), DisconnectDeadline: durationPtr(DefaultDisconnectDeadline)}
	return c
}

// ParseConfigFile reads one HCL2 agent config file. Errors name the file,
// line and column.
func ParseConfigFile(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading agent config: %w", err)
	}
	return ParseConfig(path, src)
}

// ParseConfig parses HCL2 source; filename is used in error messages.
func ParseConfig(filename string, src []byte) (*Config, error) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diagError(diags, src)
	}
	var c Config
	if diags := gohcl.DecodeBody(f.Body, nil, &c); diags.HasErrors() {
		return nil, diagError(diags, src)
	}
	if c.Client != nil {
		if diags := c.Client.decodeDurations(); diags.HasErrors() {
			return nil, diagError(diags, src)
		}
		if err := c.Client.checkNomadKeys(); err != nil {
			return nil, fmt.Errorf("%s: %w", filename, err)
		}
	}
	return &c, nil
}

// rawExecOption is the one Nomad client option Berth reads.
const rawExecOption = "driver.raw_exec.enable"

// checkNomadKeys refuses the Nomad client settings Berth does not
// implement, saying what Berth does instead.
func (c *ClientConfig) checkNomadKeys() error {
	if len(c.ChrootEnv) > 0 {
		return errors.New("client.chroot_env is not supported: Berth's exec driver builds each task's root " +
			"from the host's /bin, /sbin, /lib, /lib64, /usr and /etc bound read-only plus the task's own " +
			"directories; remove chroot_env, and give a task more of the host through a volume")
	}
	keys := make([]string, 0, len(c.Options))
	for k := range c.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.Options[k]
		switch {
		case k == rawExecOption:
			if _, err := strconv.ParseBool(v); err != nil {
				return fmt.Errorf("client.options %q = %q: want true or false (1 or 0)", k, v)
			}
		case strings.HasPrefix(k, "driver."):
			return fmt.Errorf("client.options %q is not supported: Berth configures drivers with plugin blocks "+
				"(plugin \"raw_exec\" {} enables raw_exec; exec is always on); the one option it reads is %s", k, rawExecOption)
		default:
			return fmt.Errorf("client.options %q is not supported: the one client option Berth reads is %s; "+
				"drivers are configured with plugin blocks", k, rawExecOption)
		}
	}
	return nil
}

// rawExecOption reports driver.raw_exec.enable, if set.
func (c *ClientConfig) rawExecOption() (on, set bool) {
	if c == nil {
		return false, false
	}
	v, ok := c.Options[rawExecOption]
	if !ok {
		return false, false
	}
	on, _ = strconv.ParseBool(v)
	return on, true
}

// networkIP is the first address of client.network_interface (IPv4
// first), or "" when it is not set.
func (c *ClientConfig) networkIP() (string, error) {
	if c == nil || c.NetworkInterface == "" {
		return "", nil
	}
	ifc, err := net.InterfaceByName(c.NetworkInterface)
	if err != nil {
		var names []string
		if all, err := net.Interfaces(); err == nil {
			for _, i := range all {
				names = append(names, i.Name)
			}
		}
		return "", fmt.Errorf("client.network_interface %q: no such interface (this host has %s)",
			c.NetworkInterface, strings.Join(names, ", "))
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", fmt.Errorf("client.network_interface %q: reading its addresses: %w", c.NetworkInterface, err)
	}
	var v6 string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
		if v6 == "" && !ipn.IP.IsLinkLocalUnicast() {
			v6 = ipn.IP.String()
		}
	}
	if v6 == "" {
		return "", fmt.Errorf("client.network_interface %q has no usable address", c.NetworkInterface)
	}
	return v6, nil
}

// diagError turns HCL diagnostics into one error, each line
// "file:line,col: summary; detail", followed by the offending source line
// so the user sees which setting is wrong.
func diagError(diags hcl.Diagnostics, src []byte) error {
	lines := strings.Split(string(src), "\n")
	var errs []error
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("%s:%d,%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
			if l := d.Subject.Start.Line; l >= 1 && l <= len(lines) && strings.TrimSpace(lines[l-1]) != "" {
				msg += fmt.Sprintf("\n    %d | %s", l, strings.TrimRight(lines[l-1], "\r"))
			}
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// Merge returns c with every field set in o laid over it.
func (c *Config) Merge(o *Config) *Config {
	out := *c
	if o.Name != "" {
		out.Name = o.Name
	}
	if o.Region != "" {
		out.Region = o.Region
	}
	if o.Datacenter != "" {
		out.Datacenter = o.Datacenter
	}
	if o.DataDir != "" {
		out.DataDir = o.DataDir
	}
	if o.BindAddr != "" {
		out.BindAddr = o.BindAddr
	}
	if o.LogLevel != "" {
		out.LogLevel = o.LogLevel
	}
	if o.LogJSON != nil {
		out.LogJSON = o.LogJSON
	}
	if o.Ports != nil {
		p := *out.Ports
		if o.Ports.HTTP != nil {
			p.HTTP = o.Ports.HTTP
		}
		if o.Ports.RPC != nil {
			p.RPC = o.Ports.RPC
		}
		out.Ports = &p
	}
	if o.Advertise != nil {
		a := *out.Advertise
		if o.Advertise.HTTP != "" {
			a.HTTP = o.Advertise.HTTP
		}
		if o.Advertise.RPC != "" {
			a.RPC = o.Advertise.RPC
		}
		out.Advertise = &a
	}
	if o.ACL != nil {
		a := ACLConfig{}
		if out.ACL != nil {
			a = *out.ACL
		}
		if o.ACL.Enabled != nil {
			a.Enabled = o.ACL.Enabled
		}
		if o.ACL.AuditLog != "" {
			a.AuditLog = o.ACL.AuditLog
		}
		if o.ACL.AuditLogMaxMB != 0 {
			a.AuditLogMaxMB = o.ACL.AuditLogMaxMB
		}
		out.ACL = &a
	}
	if o.Server != nil {
		s := *out.Server
		if o.Server.Enabled != nil {
			s.Enabled = o.Server.Enabled
		}
		if o.Server.BootstrapExpect != 0 {
			s.BootstrapExpect = o.Server.BootstrapExpect
		}
		if o.Server.EventBufferSize != 0 {
			s.EventBufferSize = o.Server.EventBufferSize
		}
		if o.Server.ServerJoin != nil {
			s.ServerJoin = o.Server.ServerJoin
		}
		if o.Server.JobTrackedVersions != nil {
			s.JobTrackedVersions = o.Server.JobTrackedVersions
		}
		out.Server = &s
	}
	if o.Client != nil {
		cl := *out.Client
		if o.Client.Enabled != nil {
			cl.Enabled = o.Client.Enabled
		}
		if o.Client.Servers != nil {
			cl.Servers = o.Client.Servers
		}
		if o.Client.NodeClass != "" {
			cl.NodeClass = o.Client.NodeClass
		}
		if o.Client.Meta != nil {
			cl.Meta = o.Client.Meta
		}
		if o.Client.DisconnectDeadline != nil {
			cl.DisconnectDeadline = o.Client.DisconnectDeadline
		}
		if o.Client.CSIStatsInterval != nil {
			cl.CSIStatsInterval = o.Client.CSIStatsInterval
		}
		if o.Client.NetworkInterface != "" {
			cl.NetworkInterface = o.Client.NetworkInterface
		}
		if o.Client.Options != nil {
			cl.Options = o.Client.Options
		}
		out.Client = &cl
	}
	if o.DisableUpdateCheck != nil {
		out.DisableUpdateCheck = o.DisableUpdateCheck
	}
	out.Plugins = append(append([]*PluginConfig(nil), c.Plugins...), o.Plugins...)
	out.Limits = mergeLimits(c.Limits, o.Limits)
	out.TLS = mergeTLS(c.TLS, o.TLS)
	return &out
}

// ServerEnabled reports whether this agent runs a server.
func (c *Config) ServerEnabled() bool {
	return c.Server != nil && c.Server.Enabled != nil && *c.Server.Enabled
}

// ClientEnabled reports whether this agent runs a client.
func (c *Config) ClientEnabled() bool {
	return c.Client != nil && c.Client.Enabled != nil && *c.Client.Enabled
}

// Validate returns every problem with a merged config at once.
func (c *Config) Validate() error {
	var errs []error
	if !c.ServerEnabled() && !c.ClientEnabled() {
		errs = append(errs, errors.New("neither server nor client is enabled: set server { enabled = true } and/or client { enabled = true }, or run with -dev"))
	}
	if !c.DevMode && c.DataDir == "" {
		errs = append(errs, errors.New("data_dir is required (or run with -dev for in-memory state)"))
	}
	if ip := net.ParseIP(c.BindAddr); ip == nil {
		errs = append(errs, fmt.Errorf("bind_addr %q is not an IP address", c.BindAddr))
	} else if ip.IsUnspecified() && c.ServerEnabled() && c.Advertise.RPC == "" {
		errs = append(errs, fmt.Errorf("bind_addr %q needs advertise { rpc = \"ip:port\" } so peers know where to reach this server", c.BindAddr))
	}
	for name, p := range map[string]int{"http": c.Ports.HTTPPort(), "rpc": c.Ports.RPCPort()} {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("ports.%s = %d is out of range 0-65535", name, p))
		}
	}
	if c.ServerEnabled() && c.Server.EventBufferSize < 0 {
		errs = append(errs, fmt.Errorf("server.event_buffer_size = %d: want 0 (the default, 1024) or more", c.Server.EventBufferSize))
	}
	if c.ServerEnabled() && c.Server.JobTrackedVersions != nil && *c.Server.JobTrackedVersions <= 0 {
		errs = append(errs, fmt.Errorf("server.job_tracked_versions = %d: want 1 or more (leave it out for the default, 6)", *c.Server.JobTrackedVersions))
	}
	if c.ServerEnabled() && c.Server.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("server.bootstrap_expect = %d must not be negative", c.Server.BootstrapExpect))
	}
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.TLS.validate()...)
	switch strings.ToUpper(c.LogLevel) {
	case "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF":
	default:
		errs = append(errs, fmt.Errorf("log_level %q is not one of TRACE, DEBUG, INFO, WARN, ERROR, OFF", c.LogLevel))
	}
	return errors.Join(errs...)
}

// shutdownTimeout bounds a graceful agent shutdown; httpShutdownGrace is
// how long in-flight HTTP requests may take to finish before they are cut.
const (
	shutdownTimeout   = 10 * time.Second
	httpShutdownGrace = time.Second
)
