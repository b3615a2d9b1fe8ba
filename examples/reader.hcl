# Reads back what examples/writer.hcl wrote, with a read-only claim on the
# "data" volume. It waits (blocked) while the writer still holds its
# single-node-writer claim.
#
#   berth job run examples/reader.hcl
#   berth alloc logs -job reader
job "reader" {
  type = "batch"

  group "reader" {
    volume "data" {
      type            = "csi"
      source          = "data"
      read_only       = true
      access_mode     = "single-node-reader-only"
      attachment_mode = "file-system"
    }

    task "read" {
      driver = "exec"

      config {
        command = "/bin/cat"
        args    = ["/data/hello.txt"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
        read_only   = true
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
