package auth

import (
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Describe names the object a request acts on, for the audit log: the
// kind and ID(s), with the namespace where there is one. Secrets never
// appear.
func Describe(args any) string {
	ns := ""
	if ar, ok := args.(structs.AuthRequest); ok {
		ns = ar.RequestNamespace() + "/"
	}
	switch r := args.(type) {
	case *structs.JobRegisterRequest:
		if r.Job != nil {
			return "job " + orDefault(r.Job.Namespace) + "/" + r.Job.ID
		}
	case *structs.JobDeregisterRequest:
		return "job " + ns + r.JobID
	case *structs.CSIVolumeRegisterRequest:
		return "volume " + volumeIDs(r.Volumes)
	case *structs.CSIVolumeCreateRequest:
		return "volume " + volumeIDs(r.Volumes)
	case *structs.CSIVolumeDeregisterRequest:
		return "volume " + ns + strings.Join(r.VolumeIDs, ",")
	case *structs.CSIVolumeDeleteRequest:
		return "volume " + ns + r.VolumeID
	case *structs.CSIVolumeDetachRequest:
		return "volume " + ns + r.VolumeID + " node " + r.NodeID
	case *structs.CSIVolumeClaimRequest:
		return "volume " + ns + r.VolumeID + " alloc " + r.AllocationID
	case *structs.CSIVolumeUnpublishRequest:
		return "volume " + ns + r.VolumeID + " alloc " + r.AllocationID
	case *structs.NodeUpdateDrainRequest:
		return "node " + r.NodeID
	case *structs.NodeUpdateEligibilityRequest:
		return "node " + r.NodeID
	case *structs.NodeUpdateStatusRequest:
		return "node " + r.NodeID
	case *structs.NodeRegisterRequest:
		if r.Node != nil {
			return "node " + r.Node.ID
		}
	case *structs.RaftPeerRequest:
		return "raft peer " + r.ID + " " + r.Address
	case *structs.ACLPolicyUpsertRequest:
		names := make([]string, 0, len(r.Policies))
		for _, p := range r.Policies {
			if p != nil {
				names = append(names, p.Name)
			}
		}
		return "acl policy " + strings.Join(names, ",")
	case *structs.ACLPolicyDeleteRequest:
		return "acl policy " + strings.Join(r.Names, ",")
	case *structs.ACLTokenUpsertRequest:
		names := make([]string, 0, len(r.Tokens))
		for _, t := range r.Tokens {
			if t != nil {
				names = append(names, t.AccessorID+"("+t.Name+")")
			}
		}
		return "acl token " + strings.Join(names, ",")
	case *structs.ACLTokenDeleteRequest:
		return "acl token " + strings.Join(r.AccessorIDs, ",")
	case *structs.ACLTokenBootstrapRequest:
		return "acl bootstrap"
	case *structs.ACLAuthorizeRequest:
		return r.Endpoint
	}
	return ""
}

func volumeIDs(vols []*structs.CSIVolume) string {
	ids := make([]string, 0, len(vols))
	for _, v := range vols {
		if v != nil {
			ids = append(ids, orDefault(v.Namespace)+"/"+v.ID)
		}
	}
	return strings.Join(ids, ",")
}
