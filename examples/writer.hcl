# Writes /data/hello.txt on the "data" volume (examples/volume.hcl),
# prints it and exits; its single-node-writer claim is then released. The
# exec driver mounts the volume into the task's chroot. The line names the
# writer's allocation, so the reader's output shows where it came from.
#
#   berth job run examples/writer.hcl
#   berth alloc logs -job writer
job "writer" {
  type = "batch"

  group "writer" {
    volume "data" {
      type            = "csi"
      source          = "data"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }

    task "write" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"hello from berth, written by alloc $NOMAD_ALLOC_ID\" > /data/hello.txt && cat /data/hello.txt"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
