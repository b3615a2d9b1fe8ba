// Package jobspec turns the files users write into api types: HCL2
// jobspecs into *api.Job (Parse, ParseFile) and CSI volume specs, in HCL2
// or JSON, into *api.CSIVolume (ParseVolume, ParseVolumeFile). It imports
// only api from Berth, so the CLI can parse before it talks to a server.
//
// # Jobspecs
//
// A jobspec holds one job:
//
//	job "<id>" {
//	  type        = "service"          # service, batch or system
//	  datacenters = ["dc1"]            # default ["*"]
//	  namespace   = "default"
//	  priority    = 50                 # 1 to 100
//	  meta { key = "value" }           # or meta = { key = "value" }
//	  constraint { attribute = "${attr.kernel.name}" operator = "=" value = "linux" }
//	  reschedule { ... }               # inherited by every group
//
//	  group "<name>" {
//	    count = 1
//	    constraint { ... }
//	    volume "<name>" {
//	      type            = "csi"      # csi or host
//	      source          = "<volume id>"
//	      read_only       = false
//	      access_mode     = "single-node-writer"
//	      attachment_mode = "file-system"
//	      per_alloc       = false      # source becomes "<source>[<alloc index>]"
//	      mount_options { fs_type = "ext4" mount_flags = ["noatime"] }
//	    }
//	    restart    { attempts = 2 interval = "30m" delay = "15s" mode = "fail" }
//	    reschedule { attempts = 1 interval = "24h" delay = "5s" delay_function = "constant" max_delay = "1h" unlimited = false }
//	    meta { ... }
//
//	    task "<name>" {
//	      driver = "exec"
//	      config { command = "/bin/sh" args = ["-c", "..."] }
//	      env { KEY = "value" }
//	      resources { cpu = 100 memory = 300 }   # MHz, MB
//	      volume_mount { volume = "<group volume>" destination = "/data" read_only = false propagation_mode = "private" }
//	      csi_plugin { id = "hostpath" type = "monolith" mount_dir = "/csi" stage_publish_base_dir = "/local/csi" health_timeout = "30s" }
//	      kill_timeout = "5s"
//	      constraint { ... }
//	      meta { ... }
//	    }
//	  }
//	}
//
// Durations are strings ("30s", "5m", "1h30m"). The parsed job is
// canonicalized: every default Nomad fills is filled (see
// api.Job.Canonicalize).
//
// A task's config is free-form, for its driver: arguments become values
// (strings, bools, numbers as int when whole or float64, lists, objects),
// and each nested block appends an object to a list under its name, one
// level of objects per label, as Nomad decodes config blocks:
//
//	config { mount { target = "/x" } }  →  {"mount": [{"target": "/x"}]}
//
// There are no variables or functions. Interpolations of runtime
// variables in strings, such as "${node.unique.id}", "${attr.kernel.name}"
// or "${NOMAD_ALLOC_INDEX}", are kept as written; the client interpolates
// them when it places and runs the task. A variable outside a string
// (value = node.class) is an error.
//
// # Volume specs
//
// A volume spec describes one CSI volume for `berth volume register` or
// `berth volume create`. VolumeInit returns a commented example. In HCL:
//
//	id           = "data"              # required
//	name         = "data"
//	namespace    = "default"
//	type         = "csi"               # optional; host volumes are not supported
//	plugin_id    = "hostpath"          # required
//	external_id  = "vol-12345"         # the provider's ID (register)
//	snapshot_id  = "snap-12345"        # create from a snapshot, or
//	clone_id     = "vol-67890"         # ... from a clone: at most one
//	capacity_min = "10GiB"             # "500MB", "1.5TiB", or a number of bytes
//	capacity_max = "20GiB"
//	capability {                       # one or more
//	  access_mode     = "single-node-writer"
//	  attachment_mode = "file-system"
//	}
//	mount_options { fs_type = "ext4" mount_flags = ["noatime"] }
//	topology_request {
//	  required  { topology { segments { rack = "R1" } } }
//	  preferred { topology { segments { zone = "a" } } }
//	}
//	secrets    { key = "value" }       # or secrets = { key = "value" }
//	parameters { key = "value" }
//	mutable_parameters { key = "value" } # changeable later (MODIFY_VOLUME)
//	context    { key = "value" }
//
// Sizes with SI units (KB, MB, GB, TB, PB, EB) are powers of 1000, with
// IEC units (KiB, MiB, GiB, ...) powers of 1024; units are
// case-insensitive and "B" may be left out ("10Gi").
//
// The JSON form, chosen when the file name ends in ".json" or the file
// starts with "{", uses the same snake_case keys, as Nomad's volume specs
// do (not the API's PascalCase): blocks are objects, and repeatable
// blocks (capability, topology) are arrays of objects:
//
//	{
//	  "id": "data",
//	  "plugin_id": "hostpath",
//	  "capacity_min": "10GiB",
//	  "capability": [{"access_mode": "single-node-writer", "attachment_mode": "file-system"}],
//	  "mount_options": {"fs_type": "ext4", "mount_flags": ["noatime"]},
//	  "topology_request": {"required": {"topology": [{"segments": {"rack": "R1"}}]}},
//	  "secrets": {"key": "value"}
//	}
//
// Strings in JSON are taken verbatim: "${...}" is not interpolated.
//
// # Errors
//
// Parsing collects every problem it can find before it returns, as an
// *Error. Each Problem names the file, line and column, says what is
// wrong and what was expected, and quotes the source line:
//
//	volume.hcl:3,17: invalid access_mode "single-node-writter": want one of single-node-reader-only, single-node-writer, ...
//	    3 |   access_mode = "single-node-writter"
//
// Syntax errors, unknown arguments and unknown blocks come from HCL
// itself, as "file:line,col: summary; detail".
package jobspec
