package storage

// OpenBucketsForTest is how many buckets s holds open.
func OpenBucketsForTest(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets)
}
