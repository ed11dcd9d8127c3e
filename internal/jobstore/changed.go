package jobstore

// Changed returns a channel closed at the next change of this replica: an
// entry applied or a snapshot restored, or a switch between the Raft replica
// and the mirror. Take a new one after each change.
func (s *Store) Changed() <-chan struct{} {
	f := s.view()
	defer f.mu.RUnlock()
	return f.changed
}
