package bmc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/groundcloud/groundcloud/internal/config"
)

// Redfish asks BMCs over Redfish with gofish.
type Redfish struct {
	// DialContext opens connections to BMCs; nil means net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Query asks b for its system's power state and inventory, within ctx
// (the caller bounds it with b.Timeout). Credentials are read from their
// files now, so a rotated Secret applies at the next poll.
func (r Redfish) Query(ctx context.Context, b *config.BMC) (Answer, error) {
	var a Answer
	err := r.withSystem(ctx, b, func(sys *schemas.ComputerSystem) error {
		a = Answer{
			PowerState:   string(sys.PowerState),
			Model:        sys.Model,
			SerialNumber: sys.SerialNumber,
			BIOSVersion:  sys.BiosVersion,
		}
		return nil
	})
	return a, err
}

// PowerOff asks b to power its system off at once (Redfish
// ComputerSystem.Reset with ResetType ForceOff), within ctx and b.Timeout:
// fencing. It returns once the BMC accepted the request; the power state
// itself is followed by the polls.
func (r Redfish) PowerOff(ctx context.Context, b *config.BMC) error {
	return r.withSystem(ctx, b, func(sys *schemas.ComputerSystem) error {
		if _, err := sys.Reset(schemas.ForceOffResetType); err != nil {
			return fmt.Errorf("redfish ForceOff of %s: %w", sys.ODataID, err)
		}
		return nil
	})
}

// withSystem connects to b and calls fn with its system.
func (r Redfish) withSystem(ctx context.Context, b *config.BMC, fn func(*schemas.ComputerSystem) error) error {
	user, pass, err := credentials(b)
	if err != nil {
		return err
	}
	tc, err := tlsConfig(b)
	if err != nil {
		return err
	}
	tr := &http.Transport{
		DialContext:         r.DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: b.Timeout,
		DisableKeepAlives:   true,
		ForceAttemptHTTP2:   true,
	}
	defer tr.CloseIdleConnections()
	c, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint:          b.URL,
		Username:          user,
		Password:          pass,
		BasicAuth:         true,
		HTTPClient:        &http.Client{Transport: tr, Timeout: b.Timeout},
		NoModifyTransport: true,
	})
	if err != nil {
		return fmt.Errorf("redfish service root: %w", err)
	}
	sys, err := findSystem(c, b.System)
	if err != nil {
		return err
	}
	return fn(sys)
}

// findSystem finds the system id names (an @odata.id, an Id, or "" for the
// service's only one). It reads the systems collection itself rather than
// with gofish's collection helper, which flattens its members' errors into
// text and would hide a 401 (see Reason).
func findSystem(c *gofish.APIClient, id string) (*schemas.ComputerSystem, error) {
	if strings.HasPrefix(id, "/") {
		return getSystem(c, id)
	}
	var root struct {
		Systems struct {
			ODataID string `json:"@odata.id"`
		}
	}
	if err := getJSON(c, "/redfish/v1/", &root); err != nil {
		return nil, fmt.Errorf("redfish service root: %w", err)
	}
	if root.Systems.ODataID == "" {
		return nil, &systemError{"the service has no systems collection"}
	}
	var coll struct {
		Members []struct {
			ODataID string `json:"@odata.id"`
		}
	}
	if err := getJSON(c, root.Systems.ODataID, &coll); err != nil {
		return nil, fmt.Errorf("redfish systems: %w", err)
	}
	if id == "" {
		if len(coll.Members) != 1 {
			return nil, &systemError{fmt.Sprintf("the service has %d systems, not one; set bmc-system", len(coll.Members))}
		}
		return getSystem(c, coll.Members[0].ODataID)
	}
	for _, m := range coll.Members {
		sys, err := getSystem(c, m.ODataID)
		if err != nil {
			return nil, err
		}
		if sys.ID == id {
			return sys, nil
		}
	}
	return nil, &systemError{fmt.Sprintf("the service has no system with Id %q", id)}
}

func getSystem(c *gofish.APIClient, path string) (*schemas.ComputerSystem, error) {
	sys, err := schemas.GetComputerSystem(c, path)
	if err != nil {
		return nil, fmt.Errorf("redfish system %s: %w", path, err)
	}
	return sys, nil
}

func getJSON(c *gofish.APIClient, path string, into any) error {
	resp, err := c.Get(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(into)
}

// credentials reads the user name and password files, without their
// trailing newline.
func credentials(b *config.BMC) (user, pass string, err error) {
	if b.UsernameFile == "" {
		return "", "", nil
	}
	read := func(path string) (string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", &fileError{fmt.Errorf("read BMC credentials: %w", err)}
		}
		return string(bytes.TrimRight(data, "\r\n")), nil
	}
	if user, err = read(b.UsernameFile); err != nil {
		return "", "", err
	}
	if pass, err = read(b.PasswordFile); err != nil {
		return "", "", err
	}
	return user, pass, nil
}

// tlsConfig trusts the authorities of bmc-ca-file, or any certificate
// with bmc-insecure-skip-verify.
func tlsConfig(b *config.BMC) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if b.InsecureSkipVerify {
		tc.InsecureSkipVerify = true // the administrator's explicit choice (bmc-insecure-skip-verify)
		return tc, nil
	}
	pemBytes, err := os.ReadFile(b.CAFile)
	if err != nil {
		return nil, &fileError{fmt.Errorf("read bmc-ca-file: %w", err)}
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(pemBytes) {
		return nil, &fileError{fmt.Errorf("bmc-ca-file %s holds no PEM certificate", b.CAFile)}
	}
	return tc, nil
}
