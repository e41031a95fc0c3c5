package bmc

import (
	"time"

	"github.com/groundcloud/groundcloud/internal/config"
)

// PowerOff and PowerOn are the Redfish PowerStates of a system that is off
// and of one that is on.
const (
	PowerOff = "Off"
	PowerOn  = "On"
)

// Answer is what a BMC said about its system.
type Answer struct {
	// PowerState is Redfish's: On, Off, PoweringOn, PoweringOff, Paused.
	PowerState   string
	Model        string
	SerialNumber string
	BIOSVersion  string
}

// Status is what is known of a machine's BMC.
type Status struct {
	// BMC is the configuration the BMC was polled with; a reader whose
	// cloud-config says otherwise (a change not yet followed) ignores it.
	BMC config.BMC
	// Answer is the last answer; AnsweredAt is when it came (zero: never).
	Answer     Answer
	AnsweredAt time.Time
	// OffSince is when the first of an unbroken run of answers PowerState
	// Off came: every poll since then was answered Off. Zero when the last
	// poll failed or was answered otherwise.
	OffSince time.Time
	// Err is why the last poll failed, nil when it was answered; Reason is
	// its kind (see Reason).
	Err    error
	Reason string
	// PolledAt is when the last poll ended.
	PolledAt time.Time
	// MaxAge is how long an answer counts (FreshFor of the poll interval).
	MaxAge time.Duration
}

// FreshFor is how long an answer counts: three poll intervals. A poll
// takes at most the BMC's timeout, which is at most its poll interval, so
// a BMC that answers keeps its answer fresh with room for one lost poll.
func FreshFor(pollInterval time.Duration) time.Duration { return 3 * pollInterval }

// Fresh reports whether the last poll was answered and the answer is no
// older than MaxAge at now.
func (s Status) Fresh(now time.Time) bool {
	return s.Err == nil && !s.AnsweredAt.IsZero() && now.Sub(s.AnsweredAt) <= s.MaxAge
}

// PoweredOff reports whether the BMC says, in a fresh answer, that the
// machine is off. An error, no answer or an old one is not "off".
func (s Status) PoweredOff(now time.Time) bool {
	return s.Fresh(now) && s.Answer.PowerState == PowerOff
}

// OffFor returns how long the BMC has said Off in every answer, in a fresh
// answer at now; 0 when the last answer is not a fresh Off.
func (s Status) OffFor(now time.Time) time.Duration {
	if !s.PoweredOff(now) || s.OffSince.IsZero() {
		return 0
	}
	return now.Sub(s.OffSince)
}
