package membership

import "errors"

// Rejoin is [Membership.Join] for a node that comes back under its name at another
// address (a phone on a new network). Until the others have declared its old address
// dead, and DeadNodeReclaimTime has passed since, memberlist keeps the name bound to
// the old address: Rejoin reports that as taken rather than as an error, so that the
// caller tries again.
func (m *Membership) Rejoin(addrs []string) (taken bool, err error) {
	m.conflict.Store(nil)
	err = m.Join(addrs)
	if errors.Is(err, ErrNameTaken) {
		return true, nil
	}
	return false, err
}
