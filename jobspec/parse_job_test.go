package jobspec

import (
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

const fullJob = `
job "web" {
  name        = "web-app"
  type        = "service"
  namespace   = "prod"
  region      = "eu"
  priority    = 70
  datacenters = ["dc1", "dc2"]
  meta = {
    team    = "storage"
    version = 3
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  reschedule {
    attempts = 5
    interval = "2h"
  }

  group "db" {
    count = 2

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    volume "data" {
      type            = "csi"
      source          = "db"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true

      mount_options {
        fs_type     = "ext4"
        mount_flags = ["noatime", "nodiratime"]
      }
    }

    volume "shared" {
      type            = "csi"
      source          = "shared"
      read_only       = true
      access_mode     = "multi-node-reader-only"
      attachment_mode = "file-system"
    }

    restart {
      attempts = 10
      interval = "10m"
      delay    = "5s"
      mode     = "delay"
    }

    reschedule {
      delay          = "10s"
      delay_function = "fibonacci"
      max_delay      = "5m"
      unlimited      = false
    }

    meta {
      tier = "db"
    }

    task "server" {
      driver       = "exec"
      kill_timeout = "20s"

      config {
        command = "/bin/db"
        args    = ["-id", "${NOMAD_ALLOC_INDEX}", "-listen", "${attr.unique.network.ip-address}:${NOMAD_PORT_db}", "$${literal}"]
        port    = 5432
        ratio   = 0.5
        debug   = true
        labels = {
          app = "db"
        }

        mount {
          target   = "/x"
          readonly = true
        }

        mount {
          target = "/y"
        }

        device "gpu" "0" {
          count = 1
        }
      }

      env {
        PGDATA = "/data/pg"
        NODE   = "${node.unique.name}"
      }

      resources {
        cpu    = 500
        memory = 1024
      }

      volume_mount {
        volume           = "data"
        destination      = "/data"
        propagation_mode = "host-to-task"
      }

      volume_mount {
        volume      = "shared"
        destination = "/shared"
        read_only   = true
      }

      constraint {
        attribute = "${meta.disk}"
        operator  = "is_set"
      }

      meta {
        role = "primary"
      }
    }

    task "plugin" {
      driver = "raw_exec"

      config = {
        command = "berth"
      }

      csi_plugin {
        id                     = "hostpath"
        type                   = "node"
        mount_dir              = "/sock"
        stage_publish_base_dir = "/mnt/csi"
        health_timeout         = "1m"
      }
    }
  }
}
`

func TestParse_Full(t *testing.T) {
	j, err := Parse("web.hcl", []byte(fullJob))
	must.NoError(t, err)

	p := func(s string) *string { return &s }
	i := func(n int) *int { return &n }
	b := func(v bool) *bool { return &v }
	dur := func(d time.Duration) *time.Duration { return &d }
	u := func(n uint64) *uint64 { return &n }

	want := &api.Job{
		Region: p("eu"), Namespace: p("prod"), ID: p("web"), Name: p("web-app"), Type: p("service"),
		Priority: i(70), Datacenters: []string{"dc1", "dc2"},
		Constraints: []*api.Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}},
		Reschedule:  &api.ReschedulePolicy{Attempts: i(5), Interval: dur(2 * time.Hour)},
		Meta:        map[string]string{"team": "storage", "version": "3"},
		Stop:        b(false), ParentID: p(""), Status: p(""), StatusDescription: p(""), Stable: b(false),
		Version: u(0), CreateIndex: u(0), ModifyIndex: u(0), JobModifyIndex: u(0),
		TaskGroups: []*api.TaskGroup{{
			Name:        p("db"),
			Count:       i(2),
			Constraints: []*api.Constraint{{RTarget: "true", Operand: "distinct_hosts"}},
			Volumes: map[string]*api.VolumeRequest{
				"data": {
					Name: "data", Type: "csi", Source: "db", AccessMode: "single-node-writer",
					AttachmentMode: "file-system", PerAlloc: true,
					MountOptions: &api.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime", "nodiratime"}},
				},
				"shared": {
					Name: "shared", Type: "csi", Source: "shared", ReadOnly: true,
					AccessMode: "multi-node-reader-only", AttachmentMode: "file-system",
				},
			},
			RestartPolicy: &api.RestartPolicy{Attempts: i(10), Interval: dur(10 * time.Minute), Delay: dur(5 * time.Second), Mode: p("delay")},
			// The default for service jobs, then the job's, then the group's.
			ReschedulePolicy: &api.ReschedulePolicy{
				Attempts: i(5), Interval: dur(2 * time.Hour), Delay: dur(10 * time.Second),
				DelayFunction: p("fibonacci"), MaxDelay: dur(5 * time.Minute), Unlimited: b(false),
			},
			Meta: map[string]string{"tier": "db"},
			Tasks: []*api.Task{
				{
					Name:   "server",
					Driver: "exec",
					Config: map[string]interface{}{
						"command": "/bin/db",
						"args":    []interface{}{"-id", "${NOMAD_ALLOC_INDEX}", "-listen", "${attr.unique.network.ip-address}:${NOMAD_PORT_db}", "${literal}"},
						"port":    5432,
						"ratio":   0.5,
						"debug":   true,
						"labels":  map[string]interface{}{"app": "db"},
						"mount": []interface{}{
							map[string]interface{}{"target": "/x", "readonly": true},
							map[string]interface{}{"target": "/y"},
						},
						"device": []interface{}{
							map[string]interface{}{"gpu": []interface{}{
								map[string]interface{}{"0": []interface{}{map[string]interface{}{"count": 1}}},
							}},
						},
					},
					Env:         map[string]string{"PGDATA": "/data/pg", "NODE": "${node.unique.name}"},
					Resources:   &api.Resources{CPU: i(500), MemoryMB: i(1024)},
					KillTimeout: dur(20 * time.Second),
					VolumeMounts: []*api.VolumeMount{
						{Volume: p("data"), Destination: p("/data"), ReadOnly: b(false), PropagationMode: p("host-to-task"), SELinuxLabel: p("")},
						{Volume: p("shared"), Destination: p("/shared"), ReadOnly: b(true), PropagationMode: p("private"), SELinuxLabel: p("")},
					},
					Constraints: []*api.Constraint{{LTarget: "${meta.disk}", Operand: "is_set"}},
					Meta:        map[string]string{"role": "primary"},
				},
				{
					Name:        "plugin",
					Driver:      "raw_exec",
					Config:      map[string]interface{}{"command": "berth"},
					Resources:   &api.Resources{CPU: i(100), MemoryMB: i(300)},
					KillTimeout: dur(5 * time.Second),
					CSIPluginConfig: &api.TaskCSIPluginConfig{
						ID: "hostpath", Type: api.CSIPluginTypeNode, MountDir: "/sock",
						StagePublishBaseDir: "/mnt/csi", HealthTimeout: time.Minute,
					},
				},
			},
		}},
	}
	must.Eq(t, want, j)
}

// badJobs are jobspecs with problems, and the exact error each gives.
var badJobs = []struct {
	name string
	src  string
	want string
}{
	{
		name: "syntax error",
		src:  "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \n    }\n  }\n}\n",
		want: `job.hcl:4,16: Invalid expression; Expected the start of an expression, but found an invalid expression token.
    4 |       driver = `,
	},
	{
		name: "unclosed block",
		src:  "job \"x\" {\n  group \"g\" {\n",
		want: `job.hcl:2,13: Unclosed configuration block; There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.
    2 |   group "g" {`,
	},
	{
		name: "empty file",
		src:  "",
		want: `job.hcl:1,1: missing job block: want job "<id>" { group "<name>" { task "<name>" { ... } } }`,
	},
	{
		name: "two jobs",
		src:  "job \"a\" {\n  group \"g\" {\n    task \"t\" { driver = \"exec\" }\n  }\n}\njob \"b\" {}\n",
		want: `job.hcl:6,1: duplicate job block: a file holds one job, and the first is at line 1
    6 | job "b" {}`,
	},
	{
		name: "job without label",
		src:  "job {\n}\n",
		want: `job.hcl:1,5: Missing id for job; All job blocks must have 1 labels (id).
    1 | job {`,
	},
	{
		name: "no group",
		src:  "job \"x\" {\n  type = \"batch\"\n}\n",
		want: `job.hcl:1,1: job "x" has no group: want group "<name>" { task "<name>" { ... } }
    1 | job "x" {`,
	},
	{
		name: "no task and no driver",
		src:  "job \"x\" {\n  group \"a\" {}\n  group \"b\" {\n    task \"t\" {}\n  }\n}\n",
		want: `job.hcl:2,3: group "a" has no task: want task "<name>" { driver = "..." }
    2 |   group "a" {}
job.hcl:4,5: task "t" has no driver: want e.g. driver = "raw_exec" or driver = "exec"
    4 |     task "t" {}`,
	},
	{
		name: "bad job settings",
		src: `job "x" {
  type        = "servce"
  priority    = 101
  datacenters = "dc1"
  region      = ["a"]
  group "g" {
    count = -1
    task "t" { driver = "exec" }
  }
}
`,
		want: `job.hcl:2,17: invalid type "servce": want one of service, batch, system
    2 |   type        = "servce"
job.hcl:3,17: invalid priority 101: want a whole number from 1 to 100
    3 |   priority    = 101
job.hcl:4,17: invalid datacenters "dc1": want a list of strings, e.g. ["a", "b"]
    4 |   datacenters = "dc1"
job.hcl:5,17: invalid region: want a string, got a list
    5 |   region      = ["a"]
job.hcl:7,13: invalid count -1: want a whole number, 0 or more
    7 |     count = -1`,
	},
	{
		name: "unknown argument and block",
		src: `job "x" {
  group "g" {
    cont = 1
    task "t" {
      driver = "exec"
      resource { cpu = 1 }
    }
  }
}
`,
		want: `job.hcl:3,5: Unsupported argument; An argument named "cont" is not expected here. Did you mean "count"?
    3 |     cont = 1
job.hcl:6,7: Unsupported block type; Blocks of type "resource" are not expected here. Did you mean "resources"?
    6 |       resource { cpu = 1 }`,
	},
	{
		name: "bad volume",
		src: `job "x" {
  group "g" {
    count = 3
    volume "data" {
      type            = "csi"
      source          = "data"
      access_mode     = "single-node-writter"
      attachment_mode = "filesystem"
    }
    volume "logs" {
      type   = "csi"
      source = ""
    }
    volume "ro" {
      type            = "csi"
      source          = "ro"
      access_mode     = "multi-node-reader-only"
      attachment_mode = "block-device"
      mount_options {
        fs_type = "xfs"
      }
    }
    volume "one" {
      type            = "csi"
      source          = "one"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    volume "nfs" {
      type   = "nfs"
      source = "x"
    }
    task "t" { driver = "exec" }
  }
}
`,
		want: `job.hcl:7,25: invalid access_mode "single-node-writter": want one of single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer
    7 |       access_mode     = "single-node-writter"
job.hcl:8,25: invalid attachment_mode "filesystem": want one of file-system, block-device
    8 |       attachment_mode = "filesystem"
job.hcl:10,5: volume "logs" has no access_mode: want one of single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer
   10 |     volume "logs" {
job.hcl:10,5: volume "logs" has no attachment_mode: want one of file-system, block-device
   10 |     volume "logs" {
job.hcl:12,16: volume "logs" has no source: want the ID of the volume, e.g. source = "data"
   12 |       source = ""
job.hcl:17,25: access_mode "multi-node-reader-only" needs read_only = true in volume "ro"
   17 |       access_mode     = "multi-node-reader-only"
job.hcl:19,7: volume "ro": mount_options are not allowed with attachment_mode "block-device"
   19 |       mount_options {
job.hcl:26,25: access_mode "single-node-writer" lets one alloc use volume "one", but group "g" has count 3: want per_alloc = true (one volume per alloc) or a multi-node access mode
   26 |       access_mode     = "single-node-writer"
job.hcl:30,16: invalid type "nfs": want one of csi, host
   30 |       type   = "nfs"`,
	},
	{
		name: "per_alloc in a system job",
		src: `job "x" {
  type = "system"
  group "g" {
    volume "v" {
      type            = "csi"
      source          = "v"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true
    }
    task "t" { driver = "exec" }
  }
}
`,
		want: `job.hcl:9,25: per_alloc is not allowed in system jobs: want a service or batch job
    9 |       per_alloc       = true`,
	},
	{
		name: "bad mounts and plugin",
		src: `job "x" {
  group "g" {
    volume "data" {
      type            = "csi"
      source          = "data"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "t" {
      driver = "exec"
      volume_mount {
        volume           = "date"
        propagation_mode = "shared"
      }
      volume_mount {
        destination = "/x"
      }
      csi_plugin {
        type                   = "nodes"
        mount_dir              = "/csi"
        stage_publish_base_dir = "/csi/stage"
        health_timeout         = 30
      }
    }
  }
}
`,
		want: `job.hcl:11,7: volume_mount has no destination: want the path in the task, e.g. destination = "/data"
   11 |       volume_mount {
job.hcl:12,28: volume_mount names volume "date", which group "g" does not define: want one of "data"
   12 |         volume           = "date"
job.hcl:13,28: invalid propagation_mode "shared": want one of private, host-to-task, bidirectional
   13 |         propagation_mode = "shared"
job.hcl:15,7: volume_mount has no volume: want one of "data"
   15 |       volume_mount {
job.hcl:18,7: csi_plugin has no id: want the plugin ID volumes will name, e.g. id = "hostpath"
   18 |       csi_plugin {
job.hcl:19,34: invalid type "nodes": want one of node, controller, monolith
   19 |         type                   = "nodes"
job.hcl:21,34: stage_publish_base_dir "/csi/stage" is inside mount_dir "/csi": want a directory outside it
   21 |         stage_publish_base_dir = "/csi/stage"
job.hcl:22,34: invalid health_timeout 30: want a duration like "30s", "5m" or "1h30m"
   22 |         health_timeout         = 30`,
	},
	{
		name: "bad policies and durations",
		src: `job "x" {
  group "g" {
    restart {
      attempts = 1.5
      interval = "10 minutes"
      mode     = "retry"
    }
    reschedule {
      delay_function = "linear"
      unlimited      = "maybe"
    }
    task "t" {
      driver       = "exec"
      kill_timeout = "-5s"
      resources {
        cpu    = 0
        memory = "lots"
      }
      resources {}
    }
  }
}
`,
		want: `job.hcl:4,18: invalid attempts 1.5: want a whole number, 0 or more
    4 |       attempts = 1.5
job.hcl:5,18: invalid interval "10 minutes": want a duration like "30s", "5m" or "1h30m"
    5 |       interval = "10 minutes"
job.hcl:6,18: invalid mode "retry": want one of fail, delay
    6 |       mode     = "retry"
job.hcl:9,24: invalid delay_function "linear": want one of constant, exponential, fibonacci
    9 |       delay_function = "linear"
job.hcl:10,24: invalid unlimited "maybe": want true or false
   10 |       unlimited      = "maybe"
job.hcl:14,22: invalid kill_timeout "-5s": want a duration like "30s", "5m" or "1h30m"
   14 |       kill_timeout = "-5s"
job.hcl:16,18: invalid cpu 0: want a whole number, 1 or more
   16 |         cpu    = 0
job.hcl:17,18: invalid memory "lots": want a whole number, 1 or more
   17 |         memory = "lots"
job.hcl:19,7: duplicate resources block: task "t" takes one, and the first is at line 15
   19 |       resources {}`,
	},
	{
		name: "duplicates",
		src: `job "x" {
  group "g" {
    volume "v" {
      type   = "host"
      source = "v"
    }
    volume "v" {
      type   = "host"
      source = "v"
    }
    task "t" { driver = "exec" }
    task "t" { driver = "exec" }
  }
  group "g" {
    task "t" { driver = "exec" }
  }
}
`,
		want: `job.hcl:7,12: duplicate volume "v": volume names must be unique within a group
    7 |     volume "v" {
job.hcl:12,10: duplicate task "t": task names must be unique within a group, and the first is at line 11
   12 |     task "t" { driver = "exec" }
job.hcl:14,9: duplicate group "g": group names must be unique, and the first is at line 2
   14 |   group "g" {`,
	},
	{
		name: "variables and functions",
		src: `job "x" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        a = node.class
        b = upper("x")
        c = "${attr.x}-${upper("y")}"
      }
      env {
        X = attr.y
      }
    }
  }
}
`,
		want: `job.hcl:6,13: invalid value node.class: variables are not allowed here; to have the client interpolate it, write it in a string: "${node.class}"
    6 |         a = node.class
job.hcl:7,13: Function calls not allowed; Functions may not be called here.
    7 |         b = upper("x")
job.hcl:8,26: Function calls not allowed; Functions may not be called here.
    8 |         c = "${attr.x}-${upper("y")}"
job.hcl:11,13: invalid value attr.y: variables are not allowed here; to have the client interpolate it, write it in a string: "${attr.y}"
   11 |         X = attr.y`,
	},
	{
		name: "bad maps and constraint",
		src: `job "x" {
  meta = "m"
  constraint {
    operator = "~="
    value    = "x"
  }
  group "g" {
    meta {
      nested {
        a = 1
      }
    }
    task "t" {
      driver = "exec"
      env = {
        LIST = ["a"]
      }
      config = "x"
    }
  }
}
`,
		want: `job.hcl:2,10: invalid meta "m": want an object of strings, e.g. { key = "value" }
    2 |   meta = "m"
job.hcl:3,3: constraint has no attribute: want e.g. attribute = "${attr.kernel.name}"
    3 |   constraint {
job.hcl:4,16: invalid operator "~=": want one of =, ==, is, !=, not, >, >=, <, <=, regexp, version, semver, set_contains, set_contains_all, set_contains_any, distinct_hosts, distinct_property, is_set, is_not_set
    4 |     operator = "~="
job.hcl:9,7: Unexpected "nested" block; Blocks are not allowed here.
    9 |       nested {
job.hcl:15,13: invalid env: want string values, but "LIST" is a list
   15 |       env = {
job.hcl:18,16: invalid config "x": want a block, config { ... }
   18 |       config = "x"`,
	},
}

func TestParse_Errors(t *testing.T) {
	for _, tc := range badJobs {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Parse("job.hcl", []byte(tc.src))
			must.Nil(t, j)
			must.EqError(t, err, tc.want)
			var perr *Error
			must.True(t, errors.As(err, &perr))
			for _, p := range perr.Problems {
				must.Eq(t, "job.hcl", p.Filename)
			}
		})
	}
}

func TestParseFile_Missing(t *testing.T) {
	_, err := ParseFile("testdata/does-not-exist.hcl")
	must.ErrorContains(t, err, "reading jobspec: open testdata/does-not-exist.hcl")
}

// TestParse_Interpolation pins which expressions are evaluated here and
// which are left for the client.
func TestParse_Interpolation(t *testing.T) {
	cases := []struct {
		expr string
		want interface{}
	}{
		{`"${node.unique.id}"`, "${node.unique.id}"},
		{`"id-${NOMAD_ALLOC_INDEX}-${attr.unique.hostname}"`, "id-${NOMAD_ALLOC_INDEX}-${attr.unique.hostname}"},
		{`"${meta["rack.name"]}"`, `${meta["rack.name"]}`},
		{`"${foo[0]}"`, "${foo[0]}"},
		{`"$${literal}"`, "${literal}"},
		{`"${"nested ${attr.x}"}"`, "nested ${attr.x}"},
		{"<<EOT\nhello ${node.unique.name}\nEOT", "hello ${node.unique.name}\n"},
		{`"%{ for x in [1, 2] }${x}%{ endfor }"`, "12"},
		{`true ? "a" : "b"`, "a"},
		{`"${true}"`, true},
		{`-1`, -1},
		{`[1, "a", ["${attr.x}"]]`, []interface{}{1, "a", []interface{}{"${attr.x}"}}},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			src := "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n      config {\n        v = " +
				tc.expr + "\n      }\n    }\n  }\n}\n"
			j, err := Parse("job.hcl", []byte(src))
			must.NoError(t, err)
			must.Eq(t, tc.want, j.TaskGroups[0].Tasks[0].Config["v"])
		})
	}
}

// TestParse_UnsafeNames: IDs and names that would escape a directory or
// split a URL are refused at their label, with file:line:col.
func TestParse_UnsafeNames(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want string
	}{
		{"task ../x", "job \"j\" {\n  group \"g\" {\n    task \"../x\" {\n      driver = \"exec\"\n    }\n  }\n}\n",
			`job.hcl:3,10: invalid task name "../x": must not contain / or \ (it is used as a single path element)`},
		{"job a/b", "job \"a/b\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n    }\n  }\n}\n",
			`job.hcl:1,5: invalid job ID "a/b": must not contain / or \ (it is used as a single path element)`},
		{"group ..", "job \"j\" {\n  group \"..\" {\n    task \"t\" {\n      driver = \"exec\"\n    }\n  }\n}\n",
			`job.hcl:2,9: invalid group name "..": it names a directory; pick another name`},
		{"job with newline", "job \"a\\nb\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n    }\n  }\n}\n",
			`job.hcl:1,5: invalid job ID "a\nb": must not contain control characters or invalid UTF-8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("job.hcl", []byte(tc.src))
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

func TestParse_TaskUser(t *testing.T) {
	j, err := Parse("job.hcl", []byte("job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"exec\"\n      user   = \"root\"\n    }\n  }\n}\n"))
	must.NoError(t, err)
	must.Eq(t, "root", j.TaskGroups[0].Tasks[0].User)
}
