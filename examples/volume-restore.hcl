# A new volume "data-restored" made from a snapshot of "data": the plugin's
# CreateVolume copies the snapshot's content into it. Take the snapshot,
# put its ID below (the plugin chooses snapshot IDs), and create:
#
#   berth volume create examples/volume.hcl
#   berth job run examples/writer.hcl                # writes /data/hello.txt
#   berth volume snapshot create data nightly        # prints the snapshot ID
#   berth volume create examples/volume-restore.hcl  # after setting snapshot_id
#
# Point examples/reader.hcl's source at "data-restored" to read the file
# back. clone_id = "<external ID of a volume>" makes a copy of a volume
# instead (CLONE_VOLUME).
id        = "data-restored"
name      = "data-restored"
type      = "csi"
plugin_id = "hostpath"

snapshot_id = "SNAPSHOT-ID"

capacity_min = "10MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}
