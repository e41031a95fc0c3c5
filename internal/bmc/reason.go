package bmc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/stmcginnis/gofish/schemas"
)

// Reasons a poll fails, the values of the metrics' reason label.
const (
	ReasonTimeout      = "timeout"      // no answer within bmc-timeout
	ReasonUnreachable  = "unreachable"  // no connection, or one closed before the answer
	ReasonTLS          = "tls"          // the certificate is not trusted, or the handshake failed
	ReasonUnauthorized = "unauthorized" // 401 or 403: wrong or missing credentials
	ReasonFiles        = "files"        // a credential or CA file cannot be read
	ReasonNoSystem     = "no-system"    // bmc-system is not there, or the service has not exactly one
	ReasonProtocol     = "protocol"     // any other answer that is not what Redfish promises
)

var reasons = []string{ReasonTimeout, ReasonUnreachable, ReasonTLS, ReasonUnauthorized, ReasonFiles, ReasonNoSystem, ReasonProtocol}

// fileError is a credential or CA file that cannot be read.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// systemError is a bmc-system the service does not have.
type systemError struct{ msg string }

func (e *systemError) Error() string { return e.msg }

// Reason classifies why a poll failed.
func Reason(err error) string {
	var (
		cred    *fileError
		sys     *systemError
		rf      *schemas.Error
		netErr  net.Error
		opErr   *net.OpError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &cred):
		return ReasonFiles
	case errors.As(err, &sys):
		return ReasonNoSystem
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid), errors.As(err, &record):
		return ReasonTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case errors.As(err, &rf) && (rf.HTTPReturnedStatusCode == http.StatusUnauthorized || rf.HTTPReturnedStatusCode == http.StatusForbidden):
		return ReasonUnauthorized
	case errors.As(err, &opErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// No connection, or one closed before the answer (a BMC that
		// stops or restarts).
		return ReasonUnreachable
	}
	return ReasonProtocol
}
