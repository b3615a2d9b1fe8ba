package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// NodeIDVar is the runtime variable a plugin gets its node ID from; the
// client interpolates it.
const NodeIDVar = "${node.unique.id}"

// PluginJob is a system job that runs a CSI plugin on every client, as a
// raw_exec task with a csi_plugin block. HostpathPlugin fills one for
// Berth's own plugin; an independent plugin (csi-test's mock-driver) is
// the same with another Command and Args.
type PluginJob struct {
	// JobID defaults to "plugin-<PluginID>-<Type>", so a controller job
	// and a node job of one plugin can run side by side.
	JobID    string
	PluginID string
	// Type is the csi_plugin type: "node", "controller" or "monolith".
	Type    string
	Command string
	Args    []string
	// MountDir is csi_plugin's mount_dir; default "/csi".
	MountDir string
	Env      map[string]string
}

// HostpathPlugin is Berth's hostpath plugin (the built berth binary, `berth
// plugin hostpath -mode <mode> -stage`) as csi_plugin type mode, with its
// -root under the harness's Root: every client's instance shares that root,
// as plugins on one machine should. It stages volumes (-stage), so that the
// scenarios run the client's whole stage/publish path, crash points and
// staging counts included; "-stage=false" in extraArgs turns it off, as
// the README's walk-through (walkthrough_test.go) and the dev agent's
// plugin have it. extraArgs go after the others (e.g. "-static-volumes"
// for a controller).
func (h *Harness) HostpathPlugin(mode string, extraArgs ...string) *PluginJob {
	args := []string{"plugin", "hostpath", "-mode", mode, "-stage", "-root", h.HostpathRoot(), "-node-id", NodeIDVar, "-log-level", "debug"}
	return &PluginJob{
		PluginID: "hostpath", Type: mode, Command: h.Berth,
		Args: append(args, extraArgs...),
		Env:  map[string]string{markerEnv: h.Root},
	}
}

// HostpathRoot is the hostpath plugin's -root: volume <id> is the
// directory HostpathRoot()/volumes/<id>.
func (h *Harness) HostpathRoot() string { return h.Path("hostpath") }

// ID is the job's ID.
func (p *PluginJob) ID() string {
	if p.JobID != "" {
		return p.JobID
	}
	return fmt.Sprintf("plugin-%s-%s", p.PluginID, p.Type)
}

// HCL renders the jobspec.
func (p *PluginJob) HCL() string {
	mountDir := p.MountDir
	if mountDir == "" {
		mountDir = "/csi"
	}
	return fmt.Sprintf(`job %s {
  type = "system"

  group "plugin" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = %s
        args    = %s
      }
%s
      csi_plugin {
        id             = %s
        type           = %s
        mount_dir      = %s
        health_timeout = "30s"
      }

      kill_timeout = "5s"

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, hclString(p.ID()), hclString(p.Command), hclList(p.Args), hclEnv(p.Env, "      "), hclString(p.PluginID), hclString(p.Type), hclString(mountDir))
}

// Capability is one access mode + attachment mode pair.
type Capability struct {
	AccessMode, AttachmentMode string
}

// Volume is a CSI volume spec for `berth volume register`.
type Volume struct {
	ID, PluginID string
	// ExternalID is the provider's ID; empty means ID.
	ExternalID   string
	Capabilities []Capability
	// SnapshotID, for `volume create`: start from this snapshot.
	SnapshotID string
	// CapacityMin, for `volume create`, e.g. "64MiB".
	CapacityMin string
}

// HCL renders the volume spec.
func (v *Volume) HCL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "id        = %s\nname      = %s\ntype      = \"csi\"\nplugin_id = %s\n", hclString(v.ID), hclString(v.ID), hclString(v.PluginID))
	if v.ExternalID != "" {
		fmt.Fprintf(&b, "external_id = %s\n", hclString(v.ExternalID))
	}
	if v.SnapshotID != "" {
		fmt.Fprintf(&b, "snapshot_id = %s\n", hclString(v.SnapshotID))
	}
	if v.CapacityMin != "" {
		fmt.Fprintf(&b, "capacity_min = %s\n", hclString(v.CapacityMin))
	}
	for _, c := range v.Capabilities {
		fmt.Fprintf(&b, "\ncapability {\n  access_mode     = %s\n  attachment_mode = %s\n}\n", hclString(c.AccessMode), hclString(c.AttachmentMode))
	}
	return b.String()
}

// Access modes and the attachment mode the scenarios use.
const (
	SingleNodeWriter     = "single-node-writer"
	SingleNodeReaderOnly = "single-node-reader-only"
	FileSystem           = "file-system"
	BlockDevice          = "block-device"
)

// Workload is a job of one group with one exec task that runs Script
// with /bin/sh -c, the group's CSI volume mounted at /data. It neither
// restarts nor reschedules: a failure shows as a failed alloc.
type Workload struct {
	JobID string
	// Type is "batch" or "service".
	Type   string
	Volume string
	// AccessMode is the group volume's; read-only modes mount read-only.
	AccessMode string
	// AttachmentMode is the group volume's; FileSystem when empty. A
	// BlockDevice volume is the device node at /data.
	AttachmentMode string
	Script         string
	KillTimeout    time.Duration
	// Env is added to the task's environment (markerEnv is always).
	Env map[string]string
}

// Group and task names of every Workload.
const (
	WorkloadGroup = "work"
	WorkloadTask  = "work"
)

// HCL renders the jobspec; root is the harness's Root (the task carries
// it in markerEnv, so cleanup can find it).
func (w *Workload) HCL(root string) string {
	readOnly := w.AccessMode == SingleNodeReaderOnly || w.AccessMode == "multi-node-reader-only"
	kt := w.KillTimeout
	if kt == 0 {
		kt = 5 * time.Second
	}
	attachment := w.AttachmentMode
	if attachment == "" {
		attachment = FileSystem
	}
	env := map[string]string{markerEnv: root}
	for k, v := range w.Env {
		env[k] = v
	}
	return fmt.Sprintf(`job %s {
  type = %s

  group %q {
    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    volume "vol" {
      type            = "csi"
      source          = %s
      read_only       = %t
      access_mode     = %s
      attachment_mode = %q
    }

    task %q {
      driver = "exec"
      # Root, not exec's default nobody: the workloads write into the
      # volume's root directory, which a fresh file system or a raw block
      # device leaves to root alone.
      user   = "root"

      config {
        command = "/bin/sh"
        args    = ["-c", %s]
      }
%s
      volume_mount {
        volume      = "vol"
        destination = "/data"
        read_only   = %t
      }

      kill_timeout = %q

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, hclString(w.JobID), hclString(w.Type), WorkloadGroup, hclString(w.Volume), readOnly, hclString(w.AccessMode), attachment,
		WorkloadTask, hclString(w.Script), hclEnv(env, "      "), readOnly, kt.String())
}

// SlowStopScript runs until it is signalled, then takes stopDelay to exit
// (0 when it is done): a task whose exit is visibly later than its stop.
func SlowStopScript(stopDelay time.Duration) string {
	return fmt.Sprintf("trap 'sleep %g; exit 0' TERM INT; while true; do sleep 0.1; done", stopDelay.Seconds())
}

// hclString quotes s as an HCL string. "${...}" stays an interpolation,
// which the jobspec keeps for the client (NodeIDVar).
func hclString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // JSON string escapes are HCL string escapes
	return strings.TrimSpace(b.String())
}

// hclList renders a list of strings.
func hclList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = hclString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// hclEnv renders an env block (nothing for an empty map), indented.
func hclEnv(env map[string]string, indent string) string {
	if len(env) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%senv {\n", indent)
	for _, k := range sortedKeys(env) {
		fmt.Fprintf(&b, "%s  %s = %s\n", indent, k, hclString(env[k]))
	}
	fmt.Fprintf(&b, "%s}\n", indent)
	return b.String()
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
