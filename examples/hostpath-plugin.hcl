# Berth's own CSI plugin, on every client node. Volumes are directories
# under -root, published with bind mounts (and staged too with -stage), so
# the client must run as root. The plugin listens on $CSI_ENDPOINT, which the client sets
# to a socket in mount_dir; ${node.unique.id} is interpolated by the
# client.
#
# A dev agent (make dev, berth agent -dev) already runs this plugin, as the
# job "hostpath" from its own binary; this file is for other clusters, and
# runs the `berth` found on each node's PATH:
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
        # Monolith mode: one process serves the controller and the node
        # services. The servers call the controller (through this node's
        # client) to publish a volume to a node before the node mounts it.
        # -static-volumes lets volumes registered with `berth volume
        # register` (not created by the controller) be used: each is an
        # empty directory under -root, made on first use.
        #
        # Plugins that share a -root share their state, so every node of a
        # one-machine cluster can run this job as it is. Nodes on different
        # machines cannot share a root; run the plugin in node mode there
        # (volumes are then statically provisioned on each node), with
        # type = "node" in csi_plugin below:
        #
        #   args = ["plugin", "hostpath", "-mode", "node", "-root", "/var/lib/berth/hostpath", "-node-id", "${node.unique.id}"]
        args = ["plugin", "hostpath", "-mode", "monolith", "-static-volumes", "-root", "/var/lib/berth/hostpath", "-node-id", "${node.unique.id}"]
      }

      csi_plugin {
        id        = "hostpath"
        type      = "monolith" # "node" with -mode node
        mount_dir = "/csi"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
