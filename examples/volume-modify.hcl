# examples/volume.hcl with mutable parameters: the parameters a plugin may
# change on a live volume (ControllerModifyVolume, MODIFY_VOLUME; Kubernetes
# calls a set of them a VolumeAttributesClass). Creating (or registering)
# the volume again with other values sends the changed ones to the plugin and
# records them; a plugin without MODIFY_VOLUME is refused with the fix.
# The hostpath plugin knows one, harmless, mutable parameter: note (free
# text kept with the volume); any other is refused by the plugin.
#
#   berth volume create examples/volume.hcl
#   berth volume create examples/volume-modify.hcl
#   berth volume status data                         # Mutable Parameters
id        = "data"
name      = "data"
type      = "csi"
plugin_id = "hostpath"

capacity_min = "10MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}

mutable_parameters {
  note = "nightly backups"
}
