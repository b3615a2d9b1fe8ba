# Server 1 of a three-server cluster on one machine (see README).
name      = "server1"
data_dir  = "/tmp/berth-cluster/server1"
bind_addr = "127.0.0.1"

ports {
  http = 5146
  rpc  = 5147
}

server {
  enabled          = true
  bootstrap_expect = 3
  server_join      = ["127.0.0.1:5147", "127.0.0.1:5247", "127.0.0.1:5347"]
}
