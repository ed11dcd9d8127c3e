package jobstore

// Changed returns a channel closed at the next change of this replica: an
// entry applied or a snapshot restored. Take a new one after each change.
func (s *Store) Changed() <-chan struct{} {
	s.fsm.mu.RLock()
	defer s.fsm.mu.RUnlock()
	return s.fsm.changed
}
