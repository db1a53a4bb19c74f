package dist

// NCCL's unique id from rank 0 to every rank. A data-parallel run
// broadcasts it over its own group (cuda.OpenCommOver), authenticated by
// the job's token; ExchangeID forms a group for that one broadcast.

import (
	"errors"
	"fmt"
	"time"
)

// IDBytes is the size of NCCL's unique id.
const IDBytes = 128

// ID is the payload the exchange carries.
type ID [IDBytes]byte

// protoVersion is the control plane's protocol (auth.go, group.go): 2 since
// ranks prove they hold the job's token.
const protoVersion = 2

// ErrTimeout is wrapped by a rendezvous or a call that ran out of time.
var ErrTimeout = errors.New("timed out")

// ExchangeID gives every rank rank 0's id: rank 0 passes the id it made and
// serves it on w.Port; the others pass anything and receive it. It returns
// once every rank holds the id. The group it forms for this is
// unauthenticated (NewGroup): for tests on one machine.
func ExchangeID(w World, id ID, timeout time.Duration) (ID, error) {
	g, err := NewGroup(w, timeout)
	if err != nil {
		return ID{}, err
	}
	defer g.Close()
	b, err := g.Broadcast("nccl id", id[:])
	if err != nil {
		return ID{}, err
	}
	if len(b) != IDBytes {
		return ID{}, fmt.Errorf("dist: rank %d: NCCL id of %d bytes from rank 0, want %d", w.Rank, len(b), IDBytes)
	}
	if err := g.Barrier("nccl id received"); err != nil {
		return ID{}, err
	}
	return ID(b), nil
}

// Listen opens rank 0's port as ListenGroup does with no options (port 0:
// a free port, which Port reports).
func Listen(w World) (*Hub, error) { return ListenGroup(w, Options{}) }
