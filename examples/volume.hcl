# A 10 MiB volume from the hostpath plugin (examples/hostpath-plugin.hcl),
# written by examples/writer.hcl and read by examples/reader.hcl.
#
#   berth volume create examples/volume.hcl
#   berth volume status data
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
