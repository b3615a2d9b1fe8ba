# The "data" volume of the hostpath plugin (the one a dev agent runs, or
# examples/hostpath-plugin.hcl), written by examples/writer.hcl and read by
# examples/reader.hcl. Registering it needs nothing from the plugin: the
# plugin (-static-volumes) creates the volume's directory, empty, when a
# job first uses it.
#
#   berth volume register examples/volume.hcl
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
