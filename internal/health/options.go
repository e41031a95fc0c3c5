package health

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Options; a zero field means its default.
const (
	DefaultInterval         = 2 * time.Second
	DefaultTimeout          = time.Second
	DefaultFailureThreshold = 2
	DefaultSuccessThreshold = 1
	DefaultConcurrency      = 32
)

// Options configure a Checker. The zero value means every default.
type Options struct {
	// Interval is the time between two probes of one target.
	Interval time.Duration
	// Timeout bounds one probe; it must not exceed Interval.
	Timeout time.Duration
	// FailureThreshold consecutive failures take a healthy target down.
	FailureThreshold int
	// SuccessThreshold consecutive successes bring a down target back.
	SuccessThreshold int
	// Concurrency bounds the probes in flight at once.
	Concurrency int
}

// Validate reports every problem at once. Zero fields are valid (defaults).
func (o Options) Validate() error {
	var errs []error
	if o.Interval < 0 {
		errs = append(errs, fmt.Errorf("health interval %s must not be negative", o.Interval))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("health timeout %s must not be negative", o.Timeout))
	}
	if o.FailureThreshold < 0 {
		errs = append(errs, fmt.Errorf("health failure threshold %d must not be negative", o.FailureThreshold))
	}
	if o.SuccessThreshold < 0 {
		errs = append(errs, fmt.Errorf("health success threshold %d must not be negative", o.SuccessThreshold))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("health concurrency %d must not be negative", o.Concurrency))
	}
	if len(errs) == 0 {
		if d := o.withDefaults(); d.Timeout > d.Interval {
			errs = append(errs, fmt.Errorf("health timeout %s must not exceed the interval %s", d.Timeout, d.Interval))
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills zero fields with their defaults.
func (o Options) withDefaults() Options {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout == 0 {
		o.Timeout = min(DefaultTimeout, o.Interval)
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.SuccessThreshold == 0 {
		o.SuccessThreshold = DefaultSuccessThreshold
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o
}
