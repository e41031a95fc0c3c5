package health

// State is what the Checker knows of a target.
type State int

const (
	// Unknown: not probed yet. An unknown target gets no new flows while
	// another backend of the same service is known healthy.
	Unknown State = iota
	// Healthy: its last probes say it may receive new flows.
	Healthy
	// Unhealthy: its last probes say it must not.
	Unhealthy
)

func (s State) String() string {
	switch s {
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	}
	return "unknown"
}

// status is one target's state with hysteresis: the first probe result
// decides, then it goes down after failureThreshold consecutive failures
// and up after successThreshold consecutive successes. It does no I/O.
type status struct {
	failureThreshold, successThreshold int
	state                              State
	// streak counts consecutive results that contradict state.
	streak int
}

// newStatus returns an Unknown status (see the package doc). Thresholds
// below 1 count as 1.
func newStatus(failureThreshold, successThreshold int) status {
	return status{failureThreshold: max(failureThreshold, 1), successThreshold: max(successThreshold, 1)}
}

// Observe records one probe result and reports whether the state changed.
func (s *status) Observe(success bool) (changed bool) {
	result := Unhealthy
	if success {
		result = Healthy
	}
	if s.state == Unknown {
		s.state = result
		return true
	}
	if result == s.state {
		s.streak = 0
		return false
	}
	s.streak++
	threshold := s.failureThreshold
	if s.state == Unhealthy {
		threshold = s.successThreshold
	}
	if s.streak < threshold {
		return false
	}
	s.state, s.streak = result, 0
	return true
}

// State reports the current state.
func (s status) State() State { return s.state }
