package dist

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Loopback forms a control plane of size ranks inside this process, over
// TCP on 127.0.0.1 (rank 0 listens on a free port, the others dial it),
// authenticated by a fresh random token: what tests and in-process
// data-parallel runs need to exercise the same code as separate processes.
// It returns the groups by rank; on failure every group formed is closed
// and the error names each rank that failed.
func Loopback(size int, timeout time.Duration) ([]*Group, error) {
	o := Options{Timeout: timeout, Token: NewToken()}
	hub, err := ListenGroup(World{Rank: 0, Size: size, Addr: "127.0.0.1"}, o)
	if err != nil {
		return nil, err
	}
	defer hub.Close()
	groups := make([]*Group, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := 1; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			groups[r], errs[r] = DialGroup(World{Rank: r, Size: size, Addr: "127.0.0.1", Port: hub.Port()}, o)
		}()
	}
	groups[0], errs[0] = hub.Accept()
	wg.Wait()
	for r, e := range errs {
		if e != nil {
			errs[r] = fmt.Errorf("loopback rank %d of %d: %w", r, size, e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, g := range groups {
			if g != nil {
				g.Close()
			}
		}
		return nil, err
	}
	return groups, nil
}
