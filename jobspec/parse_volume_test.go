package jobspec

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

const fullVolumeHCL = `
id           = "db[0]"
name         = "database"
namespace    = "prod"
type         = "csi"
plugin_id    = "ebs"
external_id  = "vol-123"
snapshot_id  = "snap-1"
capacity_min = "1.5GiB"
capacity_max = 10737418240

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "multi-node-multi-writer"
  attachment_mode = "block-device"
}

mount_options {
  fs_type     = "ext4"
  mount_flags = ["noatime"]
}

topology_request {
  required {
    topology {
      segments {
        rack = "R1"
        zone = "a"
      }
    }
    topology {
      segments = { rack = "R2" }
    }
  }
  preferred {
    topology {
      segments {
        zone = "b"
      }
    }
  }
}

secrets {
  password = "hunter2"
}

parameters = {
  iops = 3000
  tier = "fast"
}

mutable_parameters {
  note = "nightly"
}

context {
  endpoint = "${not.interpolated}"
}
`

const fullVolumeJSON = `{
  "id": "db[0]",
  "name": "database",
  "namespace": "prod",
  "type": "csi",
  "plugin_id": "ebs",
  "external_id": "vol-123",
  "snapshot_id": "snap-1",
  "capacity_min": "1.5GiB",
  "capacity_max": 10737418240,
  "capability": [
    {"access_mode": "single-node-writer", "attachment_mode": "file-system"},
    {"access_mode": "multi-node-multi-writer", "attachment_mode": "block-device"}
  ],
  "mount_options": {"fs_type": "ext4", "mount_flags": ["noatime"]},
  "topology_request": {
    "required": {
      "topology": [
        {"segments": {"rack": "R1", "zone": "a"}},
        {"segments": {"rack": "R2"}}
      ]
    },
    "preferred": {"topology": {"segments": {"zone": "b"}}}
  },
  "secrets": {"password": "hunter2"},
  "parameters": {"iops": 3000, "tier": "fast"},
  "mutable_parameters": {"note": "nightly"},
  "context": {"endpoint": "${not.interpolated}"}
}`

func TestParseVolume_Full(t *testing.T) {
	want := &api.CSIVolume{
		ID: "db[0]", Name: "database", Namespace: "prod", PluginID: "ebs", ExternalID: "vol-123",
		SnapshotID: "snap-1", RequestedCapacityMin: 3 << 29, RequestedCapacityMax: 10 << 30,
		RequestedCapabilities: []*api.CSIVolumeCapability{
			{AccessMode: api.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem},
			{AccessMode: api.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: api.CSIVolumeAttachmentModeBlockDevice},
		},
		MountOptions: &api.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		RequestedTopologies: &api.CSITopologyRequest{
			Required: []*api.CSITopology{
				{Segments: map[string]string{"rack": "R1", "zone": "a"}},
				{Segments: map[string]string{"rack": "R2"}},
			},
			Preferred: []*api.CSITopology{{Segments: map[string]string{"zone": "b"}}},
		},
		Secrets:           api.CSISecrets{"password": "hunter2"},
		Parameters:        map[string]string{"iops": "3000", "tier": "fast"},
		MutableParameters: map[string]string{"note": "nightly"},
		Context:           map[string]string{"endpoint": "${not.interpolated}"},
	}
	for _, tc := range []struct{ name, src string }{
		{"volume.hcl", fullVolumeHCL},
		{"volume.json", fullVolumeJSON},
		{"volume-without-extension", fullVolumeJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolume(tc.name, []byte(tc.src))
			must.NoError(t, err)
			must.Eq(t, want, v)
		})
	}
}

// badVolumes are volume specs with problems, and the exact error each
// gives.
var badVolumes = []struct {
	name string
	file string
	src  string
	want string
}{
	{
		name: "misspelt access mode",
		file: "volume.hcl",
		src: `id        = "data"
plugin_id = "hostpath"
capability {
  access_mode     = "single-node-writter"
  attachment_mode = "file-system"
}
`,
		want: `volume.hcl:4,21: invalid access_mode "single-node-writter": want one of single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer
    4 |   access_mode     = "single-node-writter"`,
	},
	{
		name: "empty file",
		file: "volume.hcl",
		src:  "",
		want: `volume.hcl:1,1: missing id: want the volume's ID, e.g. id = "data"
volume.hcl:1,1: missing plugin_id: want the ID of the CSI plugin that manages the volume, e.g. plugin_id = "hostpath"
volume.hcl:1,1: missing capability: want at least one capability { access_mode = "single-node-writer" attachment_mode = "file-system" }`,
	},
	{
		name: "syntax error",
		file: "volume.hcl",
		src:  "id = \"data\n",
		want: `volume.hcl:1,11: Invalid multi-line string; Quoted strings may not be split over multiple lines. To produce a multi-line string, either use the \n escape to represent a newline character or use the "heredoc" multi-line template syntax.
    1 | id = "data
volume.hcl:1,11: Unterminated template string; No closing marker was found for the string.
    1 | id = "data`,
	},
	{
		name: "everything wrong",
		file: "volume.hcl",
		src: `id           = ""
type         = "host"
plugin_id    = 7
snapshot_id  = "s"
clone_id     = "c"
capacity_min = "10 GB"
capacity_max = "1GB"
size         = "1GB"
capability {
  attachment_mode = "file"
}
capability {
  access_mode = "single-node-writer"
}
mount_options {
  fs_type = ["ext4"]
}
topology_request {
  required {}
  preferred {
    topology {
    }
  }
}
secrets = ["a"]
`,
		want: `volume.hcl:1,16: missing id: want the volume's ID, e.g. id = "data"
    1 | id           = ""
volume.hcl:2,16: invalid type "host": host volumes are not supported; want "csi"
    2 | type         = "host"
volume.hcl:5,16: snapshot_id and clone_id are both set: want at most one of them
    5 | clone_id     = "c"
volume.hcl:7,16: capacity_max (1000000000 bytes) is less than capacity_min (10000000000 bytes): want capacity_max >= capacity_min
    7 | capacity_max = "1GB"
volume.hcl:8,1: Unsupported argument; An argument named "size" is not expected here.
    8 | size         = "1GB"
volume.hcl:9,1: capability has no access_mode: want one of single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer
    9 | capability {
volume.hcl:10,21: invalid attachment_mode "file": want one of file-system, block-device
   10 |   attachment_mode = "file"
volume.hcl:12,1: capability has no attachment_mode: want one of file-system, block-device
   12 | capability {
volume.hcl:16,13: invalid fs_type: want a string, got a list
   16 |   fs_type = ["ext4"]
volume.hcl:19,3: required has no topology: want topology { segments { rack = "R1" } }
   19 |   required {}
volume.hcl:21,5: topology has no segments: want segments { rack = "R1" }
   21 |     topology {
volume.hcl:25,11: invalid secrets a list: want an object of strings, e.g. { key = "value" }
   25 | secrets = ["a"]`,
	},
	{
		name: "bad sizes",
		file: "volume.hcl",
		src: `id           = "data"
plugin_id    = "hostpath"
capacity_min = "10 potatoes"
capacity_max = -1
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`,
		want: `volume.hcl:3,16: invalid capacity_min "10 potatoes": want a size like "10GiB" or "500MB", or a number of bytes
    3 | capacity_min = "10 potatoes"
volume.hcl:4,16: invalid capacity_max -1: want a size like "10GiB" or "500MB", or a number of bytes
    4 | capacity_max = -1`,
	},
	{
		name: "json syntax error",
		file: "volume.json",
		src:  "{\n  \"id\": \"data\",\n  \"plugin_id\": \"hostpath\"\n  \"type\": \"csi\"\n}\n",
		want: `volume.json:4,3: invalid JSON: invalid character '"' after object key:value pair
    4 |   "type": "csi"`,
	},
	{
		name: "json cut short",
		file: "volume.json",
		src:  "{\n  \"id\": \"data\",\n",
		want: `volume.json:3,1: invalid JSON: unexpected end of JSON input`,
	},
	{
		name: "json problems",
		file: "volume.json",
		src: `{
  "id": "data",
  "plugin_id": "hostpath",
  "capacity_min": "10MiB",
  "capacity_max": "1KiB",
  "capability": [
    {"access_mode": "single-node-writer", "attachment_mode": "filesystem"}
  ],
  "mount_option": {"fs_type": "ext4"}
}
`,
		want: `volume.json:5,19: capacity_max (1024 bytes) is less than capacity_min (10485760 bytes): want capacity_max >= capacity_min
    5 |   "capacity_max": "1KiB",
volume.json:7,62: invalid attachment_mode "filesystem": want one of file-system, block-device
    7 |     {"access_mode": "single-node-writer", "attachment_mode": "filesystem"}
volume.json:9,3: Extraneous JSON object property; No argument or block type is named "mount_option". Did you mean "mount_options"?
    9 |   "mount_option": {"fs_type": "ext4"}`,
	},
	{
		name: "json not an object",
		file: "volume.json",
		src:  `["data"]`,
		want: `volume.json:1,1: invalid volume spec: want a JSON object, e.g. {"id": "data", "plugin_id": "hostpath", ...}
    1 | ["data"]`,
	},
}

func TestParseVolume_Errors(t *testing.T) {
	for _, tc := range badVolumes {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVolume(tc.file, []byte(tc.src))
			must.Nil(t, v)
			must.EqError(t, err, tc.want)
		})
	}
}

func TestParseVolumeFile_Missing(t *testing.T) {
	_, err := ParseVolumeFile("testdata/nope.hcl")
	must.ErrorContains(t, err, "reading volume spec: open testdata/nope.hcl")
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{in: "0", want: 0},
		{in: "1024", want: 1024},
		{in: "10B", want: 10},
		{in: "500MB", want: 500_000_000},
		{in: "500mb", want: 500_000_000},
		{in: "10GiB", want: 10 << 30},
		{in: "10 GiB", want: 10 << 30},
		{in: "10Gi", want: 10 << 30},
		{in: "10G", want: 10_000_000_000},
		{in: "1.5KiB", want: 1536},
		{in: "1.5TiB", want: 3 << 39},
		{in: "0.5KB", want: 500},
		{in: " 7EiB ", want: 7 << 60},
		{in: "8EiB", err: "size is too large"},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", err: "size is too large"},
		{in: "1.5B", err: "want a whole number of bytes"},
		{in: "", err: "want a number, then an optional unit"},
		{in: "GiB", err: "want a number, then an optional unit"},
		{in: "1..5GiB", err: "want a number, then an optional unit"},
		{in: ".", err: "want a number, then an optional unit"},
		{in: "-1", err: "want a number, then an optional unit"},
		{in: "10 potatoes", err: "unknown unit: want B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB, EB or EiB"},
		{in: "1e9", err: "unknown unit: want B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB, PiB, EB or EiB"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != "" {
				must.EqError(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}
