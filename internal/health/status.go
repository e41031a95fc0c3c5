package health

// status is one target's up/down state with hysteresis: it goes down after
// failureThreshold consecutive failures and up after successThreshold
// consecutive successes. It does no I/O.
type status struct {
	failureThreshold, successThreshold int
	healthy                            bool
	// streak counts consecutive results that contradict healthy.
	streak int
}

// newStatus returns a healthy status (see the package doc: optimistic start).
// Thresholds below 1 count as 1.
func newStatus(failureThreshold, successThreshold int) status {
	return status{failureThreshold: max(failureThreshold, 1), successThreshold: max(successThreshold, 1), healthy: true}
}

// Observe records one probe result and reports whether the state changed.
func (s *status) Observe(success bool) (changed bool) {
	if success == s.healthy {
		s.streak = 0
		return false
	}
	s.streak++
	threshold := s.failureThreshold
	if !s.healthy {
		threshold = s.successThreshold
	}
	if s.streak < threshold {
		return false
	}
	s.healthy, s.streak = !s.healthy, 0
	return true
}

// Healthy reports the current state.
func (s status) Healthy() bool { return s.healthy }
