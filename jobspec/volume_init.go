package jobspec

// VolumeInit returns the example volume spec `berth volume init` writes:
// HCL with comments on every setting, or, when json is set, the same
// volume in JSON (which has no comments, so it leaves out the optional
// blocks; the package documentation shows their JSON form). Both parse
// with ParseVolume.
func VolumeInit(json bool) string {
	if json {
		return volumeInitJSON
	}
	return volumeInitHCL
}

const volumeInitHCL = `# A CSI volume spec, for "berth volume create" (the plugin's controller
# makes the volume) or "berth volume register" (the volume already exists
# in the storage provider). Commented-out settings are optional.

# The volume's ID in Berth, unique within its namespace. Jobs name it in
# volume "<name>" { source = "<id>" }.
id   = "data"
name = "data"

# Berth supports CSI volumes only.
type = "csi"

# The CSI plugin that manages the volume: the id of a task's csi_plugin.
plugin_id = "hostpath"

# The namespace; the default is the CLI's -namespace, else "default".
# namespace = "default"

# The storage provider's ID of an existing volume (register only).
# external_id = "vol-0123456789"

# Create from a snapshot, or as a clone of another volume (create only; at
# most one of the two).
# snapshot_id = "snap-12345"
# clone_id    = "vol-abcdef"

# The size to ask for (create only): "10GiB", "500MB", or bytes.
capacity_min = "10GiB"
capacity_max = "20GiB"

# One or more ways the volume may be used. access_mode is one of
# single-node-reader-only, single-node-writer, multi-node-reader-only,
# multi-node-single-writer, multi-node-multi-writer (and CSI 1.5's
# single-node-single-writer, single-node-multi-writer); attachment_mode is
# file-system or block-device.
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}

# File system options for file-system mounts. Jobs may override them.
# mount_options {
#   fs_type     = "ext4"
#   mount_flags = ["noatime"]
# }

# Where the volume must (required) or should (preferred) be accessible.
# topology_request {
#   required {
#     topology {
#       segments {
#         rack = "R1"
#       }
#     }
#   }
# }

# Credentials for the plugin. The API never shows them.
# secrets {
#   example_secret = "xyz"
# }

# Passed to the plugin's CreateVolume (create only).
# parameters {
#   tier = "fast"
# }

# Passed to the plugin whenever the volume is used.
# context {
#   endpoint = "http://192.168.1.101:9425"
# }
`

const volumeInitJSON = `{
  "id": "data",
  "name": "data",
  "type": "csi",
  "plugin_id": "hostpath",
  "capacity_min": "10GiB",
  "capacity_max": "20GiB",
  "capability": [
    {
      "access_mode": "single-node-writer",
      "attachment_mode": "file-system"
    },
    {
      "access_mode": "single-node-reader-only",
      "attachment_mode": "file-system"
    }
  ]
}
`
