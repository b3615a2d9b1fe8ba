package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// ACLPolicyByName returns the policy, or nil. Do not mutate it.
func (s *StateStore) ACLPolicyByName(ws memdb.WatchSet, name string) (*structs.ACLPolicy, error) {
	raw, err := s.first(ws, TableACLPolicies, IndexID, name)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.ACLPolicy), nil
}

// ACLPolicies iterates over the policies (*structs.ACLPolicy) whose name
// starts with prefix.
func (s *StateStore) ACLPolicies(ws memdb.WatchSet, prefix string) (memdb.ResultIterator, error) {
	return s.list(ws, TableACLPolicies, IndexID+prefixSuffix, prefix)
}

// UpsertACLPolicies creates or replaces policies, keeping CreateIndex.
func (s *StateStore) UpsertACLPolicies(index uint64, policies []*structs.ACLPolicy) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, p := range policies {
		out := *p
		out.CreateIndex, out.ModifyIndex = index, index
		existing, err := txn.First(TableACLPolicies, IndexID, p.Name)
		if err != nil {
			return fmt.Errorf("reading acl policy %q: %w", p.Name, err)
		}
		if existing != nil {
			out.CreateIndex = existing.(*structs.ACLPolicy).CreateIndex
		}
		if err := txn.Insert(TableACLPolicies, &out); err != nil {
			return fmt.Errorf("writing acl policy %q: %w", p.Name, err)
		}
	}
	return txn.commit()
}

// DeleteACLPolicies removes policies; a missing name is an error so a
// typo in `acl policy delete` is not reported as success.
func (s *StateStore) DeleteACLPolicies(index uint64, names []string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, name := range names {
		existing, err := txn.First(TableACLPolicies, IndexID, name)
		if err != nil {
			return fmt.Errorf("reading acl policy %q: %w", name, err)
		}
		if existing == nil {
			return structs.NotFound("ACL policy", name)
		}
		if err := txn.Delete(TableACLPolicies, existing); err != nil {
			return fmt.Errorf("deleting acl policy %q: %w", name, err)
		}
	}
	return txn.commit()
}

// ACLTokenByAccessorID returns the token, or nil. Do not mutate it.
func (s *StateStore) ACLTokenByAccessorID(ws memdb.WatchSet, id string) (*structs.ACLToken, error) {
	raw, err := s.first(ws, TableACLTokens, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.ACLToken), nil
}

// ACLTokenBySecret finds the token whose secret is secret, comparing the
// stored hash in constant time. Returns nil when there is none.
func (s *StateStore) ACLTokenBySecret(ws memdb.WatchSet, secret string) (*structs.ACLToken, error) {
	raw, err := s.first(ws, TableACLTokens, IndexSecretID, structs.HashSecret(secret))
	if raw == nil || err != nil {
		return nil, err
	}
	t := raw.(*structs.ACLToken)
	if !t.SecretMatches(secret) {
		return nil, nil
	}
	return t, nil
}

// ACLTokens iterates over the tokens (*structs.ACLToken) whose accessor
// starts with prefix.
func (s *StateStore) ACLTokens(ws memdb.WatchSet, prefix string) (memdb.ResultIterator, error) {
	return s.list(ws, TableACLTokens, IndexID+prefixSuffix, prefix)
}

// UpsertACLTokens creates or updates tokens. An update keeps the stored
// secret hash, CreateIndex and CreateTime: updating a token never changes
// its secret.
func (s *StateStore) UpsertACLTokens(index uint64, tokens []*structs.ACLToken) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := upsertACLTokensTxn(txn, tokens); err != nil {
		return err
	}
	return txn.commit()
}

func upsertACLTokensTxn(txn *writeTxn, tokens []*structs.ACLToken) error {
	for _, t := range tokens {
		out := t.Copy()
		out.SecretID = ""
		out.CreateIndex, out.ModifyIndex = txn.index, txn.index
		existing, err := txn.First(TableACLTokens, IndexID, t.AccessorID)
		if err != nil {
			return fmt.Errorf("reading acl token %q: %w", t.AccessorID, err)
		}
		if existing != nil {
			old := existing.(*structs.ACLToken)
			out.SecretHash = old.SecretHash
			out.CreateIndex = old.CreateIndex
			out.CreateTime = old.CreateTime
			out.ExpirationTime = old.ExpirationTime
		}
		if out.SecretHash == "" {
			return structs.NewError(structs.CodeInvalid, "acl token %q has no secret hash", t.AccessorID)
		}
		if err := txn.Insert(TableACLTokens, out); err != nil {
			return fmt.Errorf("writing acl token %q: %w", t.AccessorID, err)
		}
	}
	return nil
}

// DeleteACLTokens removes tokens by accessor; a missing one is an error.
func (s *StateStore) DeleteACLTokens(index uint64, ids []string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, id := range ids {
		existing, err := txn.First(TableACLTokens, IndexID, id)
		if err != nil {
			return fmt.Errorf("reading acl token %q: %w", id, err)
		}
		if existing == nil {
			return structs.NotFound("ACL token", id)
		}
		if err := txn.Delete(TableACLTokens, existing); err != nil {
			return fmt.Errorf("deleting acl token %q: %w", id, err)
		}
	}
	return txn.commit()
}

// ACLBootstrapped returns the Raft index the ACL system was bootstrapped
// at, or 0 if it was not.
func (s *StateStore) ACLBootstrapped() (uint64, error) {
	return s.Index(structs.ACLBootstrapIndexKey)
}

// BootstrapACLToken writes the first management token, once: a second
// bootstrap is refused in the same transaction that would write it, so two
// racing bootstraps cannot both succeed.
func (s *StateStore) BootstrapACLToken(index uint64, token *structs.ACLToken) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	raw, err := txn.First(TableIndex, IndexID, structs.ACLBootstrapIndexKey)
	if err != nil {
		return fmt.Errorf("reading acl bootstrap index: %w", err)
	}
	if raw != nil {
		return structs.ErrACLBootstrapped(raw.(*IndexEntry).Value)
	}
	if err := upsertACLTokensTxn(txn, []*structs.ACLToken{token}); err != nil {
		return err
	}
	if err := txn.Txn.Insert(TableIndex, &IndexEntry{Key: structs.ACLBootstrapIndexKey, Value: index}); err != nil {
		return fmt.Errorf("recording acl bootstrap: %w", err)
	}
	return txn.commit()
}
