# Berth's own CSI plugin, on every client node. Volumes are directories
# under -root, staged and published with bind mounts, so the client must
# run as root. The plugin listens on $CSI_ENDPOINT, which the client sets
# to a socket in mount_dir; ${node.unique.id} is interpolated by the
# client.
#
#   berth job run examples/hostpath-plugin.hcl
#   berth plugin status hostpath
job "hostpath" {
  type = "system"

  group "hostpath" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = "berth"
        # Node mode: volumes are statically provisioned directories under
        # -root. (Monolith mode adds a controller, which the servers cannot
        # reach through clients yet.)
        args = ["plugin", "hostpath", "-mode", "node", "-root", "/var/lib/berth/hostpath", "-node-id", "${node.unique.id}"]
      }

      csi_plugin {
        id        = "hostpath"
        type      = "node"
        mount_dir = "/csi"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
