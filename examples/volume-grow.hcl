# examples/volume.hcl again with a larger capacity_min: creating (or, for
# a volume that was registered with its external_id, registering) a volume
# again with more than it has grows it through the
# plugin's controller (ControllerExpandVolume, EXPAND_VOLUME), then on each
# node that uses it when the plugin asks for that, every step recorded and
# shown by `volume status`. Volumes never shrink: a capacity_max below the
# volume's size is refused.
#
#   berth volume create examples/volume.hcl        # "data", 10 MiB
#   berth volume create examples/volume-grow.hcl   # grows it to 20 MiB
#   berth volume status data                       # Capacity, and the Expansion record
id        = "data"
name      = "data"
type      = "csi"
plugin_id = "hostpath"

capacity_min = "20MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}
