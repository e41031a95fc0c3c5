package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// PowerState reads a system's PowerState ("On", "Off", ...) through the
// emulator's Redfish API.
func (e *Emulator) PowerState(ctx context.Context, id string) (string, error) {
	var sys struct{ PowerState string }
	if err := e.get(ctx, SystemPath(id), &sys); err != nil {
		return "", err
	}
	return sys.PowerState, nil
}

// Reset asks for a power action on a system through the emulator's
// Redfish API (ComputerSystem.Reset: "On", "ForceOff", "GracefulShutdown",
// "ForceRestart", ...). The emulator applies it some seconds later, as a
// machine would: see WaitPowerState.
func (e *Emulator) Reset(ctx context.Context, id, resetType string) error {
	body, _ := json.Marshal(map[string]string{"ResetType": resetType})
	return e.do(ctx, http.MethodPost, SystemPath(id)+"/Actions/ComputerSystem.Reset", body, nil)
}

// WaitPowerState waits until a system's PowerState is want (the fake
// driver applies an action after 1 to 11 seconds) or ctx is done.
func (e *Emulator) WaitPowerState(ctx context.Context, id, want string) error {
	var last string
	var err error
	for {
		if last, err = e.PowerState(ctx, id); err == nil && last == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("system %s: PowerState %q (error %v), want %q: %w", id, last, err, want, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (e *Emulator) get(ctx context.Context, path string, into any) error {
	return e.do(ctx, http.MethodGet, path, nil, into)
}

// do sends one request, with the emulator's credentials when it has them,
// and decodes a JSON answer into into (when not nil).
func (e *Emulator) do(ctx context.Context, method, path string, body []byte, into any) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.opts.Username != "" {
		req.SetBasicAuth(e.opts.Username, e.opts.Password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if into == nil {
		return nil
	}
	return json.Unmarshal(data, into)
}
