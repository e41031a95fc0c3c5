package ipam

import "errors"

// Errors returned by this package wrap one of these sentinels, with a
// message that names the Service and the pool and says what to change.
// Check them with errors.Is.
var (
	// ErrInvalidRequest: the Service asks for something malformed (an
	// annotation that does not parse, a family it does not have, ...).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnknownPool: the named pool does not exist, or no pool is
	// auto-assign.
	ErrUnknownPool = errors.New("unknown pool")
	// ErrNamespaceNotAllowed: the pool does not allow the Service's
	// namespace.
	ErrNamespaceNotAllowed = errors.New("namespace not allowed")
	// ErrNotInPool: a requested address lies outside the pool, or outside
	// every pool.
	ErrNotInPool = errors.New("address not in pool")
	// ErrAddressInUse: a requested address is held by a Service that does
	// not share it with this one (no sharing key, or another one).
	ErrAddressInUse = errors.New("address in use")
	// ErrSharingConflict: a requested address is held under the same sharing
	// key, but a port (protocol and number) is used on it already, or the
	// Services on it forward it otherwise.
	ErrSharingConflict = errors.New("sharing conflict")
	// ErrFamilyUnavailable: no pool the request may use has addresses of a
	// family it requires.
	ErrFamilyUnavailable = errors.New("address family unavailable")
	// ErrPoolExhausted: the pools the request may use have addresses of the
	// family, but none is free.
	ErrPoolExhausted = errors.New("pool exhausted")
)
