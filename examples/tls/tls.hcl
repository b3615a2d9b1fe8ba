# Mutual TLS for the example cluster (see README, "TLS"). Layer it over a
# server's config:
#   berth agent -config examples/cluster/server1.hcl -config examples/tls/tls.hcl
# The files come from `berth tls ca create` and `berth tls cert create -server`,
# run in /tmp/berth-pki. A client agent uses global-client-berth*.pem instead.
tls {
  http = true # HTTPS for the API
  rpc  = true # mTLS for RPC, Raft and node sessions

  ca_file   = "/tmp/berth-pki/berth-agent-ca.pem"
  cert_file = "/tmp/berth-pki/global-server-berth.pem"
  key_file  = "/tmp/berth-pki/global-server-berth-key.pem"

  verify_server_hostname = true # clients check that they talk to server.global.berth
  verify_https_client    = true # API callers need a certificate from this CA
}
