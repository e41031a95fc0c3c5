package configwatch

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/config"
)

// DefaultInterval is how often the file is checked for changes.
const DefaultInterval = 2 * time.Second

// Watcher holds the current configuration of one cloud-config file.
type Watcher struct {
	path     string
	interval time.Duration
	current  atomic.Pointer[config.Config]
	lastSum  [sha256.Size]byte // of the last content read, good or bad
	lastGood bool              // whether that content parsed
}

// New returns a Watcher for path whose current configuration is initial,
// parsed from data. It starts nothing; call Run.
func New(path string, initial *config.Config, data []byte, interval time.Duration) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	w := &Watcher{path: path, interval: interval, lastSum: sha256.Sum256(data), lastGood: true}
	w.current.Store(initial)
	return w
}

// Current returns the last good configuration. It is never nil.
func (w *Watcher) Current() *config.Config { return w.current.Load() }

// Run checks the file every interval until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	if w.path == "" {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { w.Check(ctx) }, w.interval)
}

// Check reads the file once and applies it if its content changed. It
// returns true when a new configuration was swapped in.
func (w *Watcher) Check(ctx context.Context) bool {
	logger := klog.FromContext(ctx).WithValues("path", w.path)
	data, err := os.ReadFile(w.path)
	if err != nil {
		// A file being replaced can be missing for a moment; keep going.
		logger.Error(err, "Cannot read cloud-config; keeping the last good one")
		reloads.WithLabelValues(resultUnreadable).Inc()
		setReloadSuccessful(false)
		return false
	}
	sum := sha256.Sum256(data)
	if sum == w.lastSum {
		setReloadSuccessful(w.lastGood)
		return false
	}
	w.lastSum = sum
	cfg, err := config.Parse(w.path, data)
	if err != nil {
		var problems config.Errors
		if errors.As(err, &problems) {
			for _, p := range problems {
				logger.Error(nil, "Invalid cloud-config; keeping the last good one", "line", p.Line, "problem", p.Error())
			}
		} else {
			logger.Error(err, "Invalid cloud-config; keeping the last good one")
		}
		reloads.WithLabelValues(resultInvalid).Inc()
		w.lastGood = false
		setReloadSuccessful(false)
		return false
	}
	w.current.Store(cfg)
	reloads.WithLabelValues(resultApplied).Inc()
	lastApplied.SetToCurrentTime()
	w.lastGood = true
	setReloadSuccessful(true)
	logger.Info("Applied new cloud-config", "machines", len(cfg.Machines), "pools", len(cfg.Pools))
	return true
}
