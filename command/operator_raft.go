package command

import (
	"strconv"
)

func init() {
	register("operator raft list-peers", func(ui *UI) Command { return &OperatorRaftListPeers{Meta: Meta{ui: ui}} })
	register("operator raft add-peer", func(ui *UI) Command { return &OperatorRaftAddPeer{Meta: Meta{ui: ui}} })
	register("operator raft remove-peer", func(ui *UI) Command { return &OperatorRaftRemovePeer{Meta: Meta{ui: ui}} })
}

// OperatorRaftListPeers prints the Raft peer set.
type OperatorRaftListPeers struct{ Meta }

func (c *OperatorRaftListPeers) Synopsis() string { return "List the Raft peers" }
func (c *OperatorRaftListPeers) Help() string {
	return "Usage: berth operator raft list-peers [options]\n\n  Lists the servers in the Raft configuration and which one leads.\n" + sharedHelp(true)
}

func (c *OperatorRaftListPeers) Run(args []string) int {
	fs := c.flagSet("operator raft list-peers", true)
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v", err)
		return 1
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	cfg, err := client.Operator().RaftGetConfiguration(nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("getting peers", err))
		return 1
	}
	if done, err := c.formatted(cfg); done {
		if err != nil {
			c.ui.Error("Error: %v", err)
			return 1
		}
		return 0
	}
	rows := [][]string{{"Node", "ID", "Address", "State", "Voter", "RaftProtocol"}}
	for _, s := range cfg.Servers {
		st := "follower"
		if s.Leader {
			st = "leader"
		}
		rows = append(rows, []string{s.Node, s.ID, s.Address, st, strconv.FormatBool(s.Voter), s.RaftProtocol})
	}
	c.ui.Output("%s", table(rows))
	return 0
}

// OperatorRaftAddPeer adds a voter.
type OperatorRaftAddPeer struct{ Meta }

func (c *OperatorRaftAddPeer) Synopsis() string { return "Add a server to the Raft peers" }
func (c *OperatorRaftAddPeer) Help() string {
	return `Usage: berth operator raft add-peer [options] -peer-address=<host:port>

  Adds a running server (started without bootstrap_expect) as a voter.

  -peer-address=<host:port>
    The new server's RPC address.

  -peer-id=<id>
    Its server ID; asked of the server when omitted.
` + sharedHelp(false)
}

func (c *OperatorRaftAddPeer) Run(args []string) int {
	fs := c.flagSet("operator raft add-peer", false)
	addr := fs.String("peer-address", "", "")
	id := fs.String("peer-id", "", "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v", err)
		return 1
	}
	if *addr == "" {
		c.ui.Error("Missing -peer-address: give the new server's RPC address (host:port).")
		return 1
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if err := client.Operator().RaftAddPeer(*addr, *id, nil); err != nil {
		c.ui.Error("Error adding peer %s: %v", *addr, err)
		return 1
	}
	c.ui.Output("Added peer %s", *addr)
	return 0
}

// OperatorRaftRemovePeer removes a peer.
type OperatorRaftRemovePeer struct{ Meta }

func (c *OperatorRaftRemovePeer) Synopsis() string { return "Remove a server from the Raft peers" }
func (c *OperatorRaftRemovePeer) Help() string {
	return `Usage: berth operator raft remove-peer [options] (-peer-id=<id> | -peer-address=<host:port>)

  Removes a server from the Raft configuration, e.g. one that is gone for good.
` + sharedHelp(false)
}

func (c *OperatorRaftRemovePeer) Run(args []string) int {
	fs := c.flagSet("operator raft remove-peer", false)
	addr := fs.String("peer-address", "", "")
	id := fs.String("peer-id", "", "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v", err)
		return 1
	}
	if (*addr == "") == (*id == "") {
		c.ui.Error("Give exactly one of -peer-id or -peer-address (see 'berth operator raft list-peers').")
		return 1
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if *id != "" {
		err = client.Operator().RaftRemovePeerByID(*id, nil)
	} else {
		err = client.Operator().RaftRemovePeerByAddress(*addr, nil)
	}
	if err != nil {
		c.ui.Error("Error removing peer: %v", err)
		return 1
	}
	c.ui.Output("Removed peer %s%s", *id, *addr)
	return 0
}
