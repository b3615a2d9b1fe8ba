# Writes /data/hello.txt on the "data" volume (examples/volume.hcl) and
# exits. The exec driver mounts the volume into the task's chroot.
#
#   berth job run examples/writer.hcl
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
        args    = ["-c", "echo hello from berth > /data/hello.txt && cat /data/hello.txt"]
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
