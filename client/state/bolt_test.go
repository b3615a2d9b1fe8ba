package state

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shoenig/test/must"
	bolt "go.etcd.io/bbolt"

	"github.com/berth-io/berth/testutil"
)

// TestBoltBackend_GroupCommit: updates that arrive while a commit is in
// flight are committed together in the next one; an update that fails
// does not take the others of its group down.
func TestBoltBackend_GroupCommit(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	must.NoError(t, err)
	defer db.Close()
	b := newBoltBackend(db)
	must.NoError(t, b.update(func(tx txn) error { _, err := tx.createBucket("b"); return err }))
	put := func(k string) func(tx txn) error {
		return func(tx txn) error { return tx.bucket("b").put(k, []byte(k)) }
	}
	queued := func(n int) {
		testutil.WaitForResult(t, func() (bool, error) {
			got := b.batcher.Pending()
			return got == n, fmt.Errorf("%d updates queued, want %d", got, n)
		})
	}
	// hold starts a commit that waits for release, and returns once it is
	// in flight.
	hold := func(wg *sync.WaitGroup, release chan struct{}) {
		entered := make(chan struct{})
		wg.Go(func() {
			must.NoError(t, b.update(func(tx txn) error {
				close(entered) // a group of one never runs again
				<-release
				return tx.bucket("b").put("held", []byte("x"))
			}))
		})
		<-entered
	}

	var wg sync.WaitGroup
	release := make(chan struct{})
	hold(&wg, release)
	before := b.commits.Load()
	for i := range 20 {
		wg.Go(func() { must.NoError(t, b.update(put(fmt.Sprintf("k%d", i)))) })
	}
	queued(20)
	close(release)
	wg.Wait()
	must.Eq(t, int64(1), b.commits.Load()-before, must.Sprint("20 updates queued behind a commit took more than one commit"))

	release = make(chan struct{})
	hold(&wg, release)
	refused := errors.New("refused")
	var got error
	wg.Go(func() { got = b.update(func(txn) error { return refused }) })
	for i := range 5 {
		wg.Go(func() { must.NoError(t, b.update(put(fmt.Sprintf("m%d", i)))) })
	}
	queued(6)
	close(release)
	wg.Wait()
	must.ErrorIs(t, got, refused)

	must.NoError(t, b.view(func(tx txn) error {
		for i := range 20 {
			must.NotNil(t, tx.bucket("b").get(fmt.Sprintf("k%d", i)))
		}
		for i := range 5 {
			must.NotNil(t, tx.bucket("b").get(fmt.Sprintf("m%d", i)), must.Sprint("an update was lost with the failing one of its group"))
		}
		return nil
	}))
}
