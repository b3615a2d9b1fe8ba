package hostpath

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestCheckConflict(t *testing.T) {
	attach := func(node string, m AccessMode, ro bool) usage {
		return usage{Kind: usageAttach, NodeID: node, Mode: m, Readonly: ro}
	}
	stage := func(node, path string, m AccessMode) usage {
		return usage{Kind: usageStage, NodeID: node, Path: path, Mode: m}
	}
	publish := func(node, path string, m AccessMode, ro bool) usage {
		return usage{Kind: usagePublish, NodeID: node, Path: path, Mode: m, Readonly: ro}
	}
	cases := []struct {
		name     string
		existing []usage
		req      usage
		// wantErr lists strings the error must contain; nil means no conflict.
		wantErr []string
	}{
		{name: "unused volume", req: publish("a", "/t1", modeSingleNodeWriter, false)},
		{
			name:     "single node writer attached elsewhere",
			existing: []usage{attach("a", modeSingleNodeWriter, false)},
			req:      attach("b", modeSingleNodeWriter, false),
			wantErr:  []string{`"vol"`, `node "a"`, "SINGLE_NODE_WRITER", `node "b"`},
		},
		{
			name:     "single node writer staged elsewhere",
			existing: []usage{stage("a", "/s", modeSingleNodeWriter)},
			req:      stage("b", "/s", modeSingleNodeWriter),
			wantErr:  []string{`staged on node "a" at "/s"`},
		},
		{
			name:     "single node writer published elsewhere, read-only request",
			existing: []usage{publish("a", "/t", modeSingleNodeWriter, false)},
			req:      publish("b", "/t", modeSingleNodeWriter, true),
			wantErr:  []string{`published on node "a"`},
		},
		{
			name:     "single node reader only elsewhere",
			existing: []usage{stage("a", "/s", modeSingleNodeReaderOnly)},
			req:      stage("b", "/s", modeSingleNodeReaderOnly),
			wantErr:  []string{"SINGLE_NODE_READER_ONLY"},
		},
		{
			name:     "single node multi writer elsewhere",
			existing: []usage{stage("a", "/s", modeSingleNodeMultiWriter)},
			req:      stage("b", "/s", modeSingleNodeMultiWriter),
			wantErr:  []string{"SINGLE_NODE_MULTI_WRITER"},
		},
		{
			name:     "multi node request against single node use",
			existing: []usage{attach("a", modeSingleNodeWriter, false)},
			req:      attach("b", modeMultiNodeMultiWriter, false),
			wantErr:  []string{"SINGLE_NODE_WRITER"},
		},
		{
			name:     "single node request against multi node use",
			existing: []usage{attach("a", modeMultiNodeMultiWriter, false)},
			req:      attach("b", modeSingleNodeWriter, false),
			wantErr:  []string{"SINGLE_NODE_WRITER", `node "a"`},
		},
		{
			name:     "multi node multi writer on two nodes",
			existing: []usage{attach("a", modeMultiNodeMultiWriter, false), publish("a", "/t", modeMultiNodeMultiWriter, false)},
			req:      publish("b", "/t", modeMultiNodeMultiWriter, false),
		},
		{
			name:     "multi node reader only on two nodes",
			existing: []usage{publish("a", "/t", modeMultiNodeReaderOnly, false)},
			req:      publish("b", "/t", modeMultiNodeReaderOnly, false),
		},
		{
			name:     "multi node single writer: second writer",
			existing: []usage{publish("a", "/t", modeMultiNodeSingleWriter, false)},
			req:      publish("b", "/t", modeMultiNodeSingleWriter, false),
			wantErr:  []string{"MULTI_NODE_SINGLE_WRITER", "read-only"},
		},
		{
			name:     "multi node single writer: reader beside the writer",
			existing: []usage{publish("a", "/t", modeMultiNodeSingleWriter, false)},
			req:      publish("b", "/t", modeMultiNodeSingleWriter, true),
		},
		{
			name:     "multi node single writer: stages do not write",
			existing: []usage{stage("a", "/s", modeMultiNodeSingleWriter)},
			req:      stage("b", "/s", modeMultiNodeSingleWriter),
		},
		{
			name:     "same node: attach and stage",
			existing: []usage{attach("a", modeSingleNodeWriter, false)},
			req:      stage("a", "/s", modeSingleNodeWriter),
		},
		{
			name:     "same node, same target (idempotent repeat is the caller's)",
			existing: []usage{publish("a", "/t", modeSingleNodeSingleWriter, false)},
			req:      publish("a", "/t", modeSingleNodeSingleWriter, false),
		},
		{
			name:     "single node single writer: second target",
			existing: []usage{publish("a", "/t1", modeSingleNodeSingleWriter, false)},
			req:      publish("a", "/t2", modeSingleNodeSingleWriter, false),
			wantErr:  []string{"SINGLE_NODE_SINGLE_WRITER", `"/t2"`, "one target path"},
		},
		{
			name:     "single node writer: second read-write target",
			existing: []usage{publish("a", "/t1", modeSingleNodeWriter, false)},
			req:      publish("a", "/t2", modeSingleNodeWriter, false),
			wantErr:  []string{"one read-write target path"},
		},
		{
			name:     "single node writer: read-only target beside the writer",
			existing: []usage{publish("a", "/t1", modeSingleNodeWriter, false)},
			req:      publish("a", "/t2", modeSingleNodeWriter, true),
		},
		{
			name:     "single node multi writer: second writer on the node",
			existing: []usage{publish("a", "/t1", modeSingleNodeMultiWriter, false)},
			req:      publish("a", "/t2", modeSingleNodeMultiWriter, false),
		},
		{
			name:     "second target with another access mode",
			existing: []usage{publish("a", "/t1", modeMultiNodeMultiWriter, false)},
			req:      publish("a", "/t2", modeMultiNodeReaderOnly, false),
			wantErr:  []string{"different access mode"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkConflict("vol", tc.existing, tc.req)
			if tc.wantErr == nil {
				must.NoError(t, err)
				return
			}
			must.Error(t, err)
			for _, s := range tc.wantErr {
				must.StrContains(t, err.Error(), s)
			}
		})
	}
}
