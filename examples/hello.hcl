# The smallest Berth job: one task that says hello and stays up.
#
#   berth job run examples/hello.hcl
job "hello" {
  type = "service"

  group "hello" {
    count = 1

    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from berth; while true; do sleep 5; done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
