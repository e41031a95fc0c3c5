package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// BMC is a machine's baseboard management controller, asked for the
// machine's power state over Redfish. The credentials are in files (mounted
// from a Secret), never in the cloud-config; their contents are read by the
// controller manager and never logged.
type BMC struct {
	// URL is the Redfish service: https://host[:port], no path (the
	// service root is /redfish/v1 under it).
	URL string
	// System is the system's Id or @odata.id within the service; "" means
	// the service's only system.
	System string
	// UsernameFile and PasswordFile hold the credentials of HTTP basic
	// authentication; both "" means none.
	UsernameFile, PasswordFile string
	// CAFile holds the PEM certificates of the authorities that may sign the
	// BMC's certificate; "" only with InsecureSkipVerify.
	CAFile string
	// InsecureSkipVerify accepts any certificate (explicit opt-out).
	InsecureSkipVerify bool
	// Timeout bounds one poll (every request of it); PollInterval is the
	// time between the starts of two polls.
	Timeout, PollInterval time.Duration
}

// Defaults of the bmc-timeout and bmc-poll-interval keys.
const (
	DefaultBMCTimeout      = 5 * time.Second
	DefaultBMCPollInterval = 30 * time.Second
)

var (
	bmcURLValue = valueType[string]{
		name: "HTTPS URL",
		doc: "`https://host` or `https://host:port` (host a DNS name or an IP address, IPv6 in brackets), " +
			"without a path, user, query or fragment.",
		parse: parseBMCURL,
	}
	redfishSystemValue = valueType[string]{
		name: "Redfish system",
		doc: "A system's `Id` (`1`, `System.Embedded.1`) or its `@odata.id` (`/redfish/v1/Systems/1`): " +
			"printable ASCII without blanks, at most 256 characters.",
		parse: parseRedfishSystem,
	}
	controllerFile = valueType[string]{
		name:  "controller manager file",
		doc:   "An absolute path to a file in the controller manager's container (mount a Secret or ConfigMap there).",
		parse: parseFilePath,
	}
	positiveSeconds = valueType[time.Duration]{
		name:  "positive duration",
		doc:   "A duration in whole seconds of at least 1s, as Go writes durations: `5s`, `30s`, `2m`.",
		parse: parsePositiveSeconds,
	}
)

func parseBMCURL(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "https":
		return "", fmt.Errorf("%q is not an https URL: the BMC's credentials must not cross the network in the clear", s)
	case u.User != nil:
		return "", fmt.Errorf("%q holds credentials; give them in bmc-username-file and bmc-password-file", u.Redacted())
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", fmt.Errorf("%q has a path, query or fragment; give only https://host[:port] (the service root is /redfish/v1 under it)", s)
	}
	return "https://" + u.Host, nil
}

func parseRedfishSystem(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	if len(s) > 256 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("%q is not a system Id or @odata.id: use at most 256 printable ASCII characters without blanks", s)
	}
	if strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "/redfish/v1/Systems/") {
		return "", fmt.Errorf("%q is not the @odata.id of a system: it must start with /redfish/v1/Systems/", s)
	}
	return s, nil
}

func parsePositiveSeconds(s string) (time.Duration, error) {
	d, err := parseSeconds(s)
	if err != nil {
		return 0, err
	}
	if d == 0 {
		return 0, fmt.Errorf("%q is not at least 1s", s)
	}
	return d, nil
}

func bmcField(f func(*BMC) *string) func(*target) *string {
	return func(t *target) *string { return f(&t.bmc) }
}

// bmcKeys are the BMC keys of [Machine].
var bmcKeys = []keySpec{
	{
		section: machineSection, name: "bmc-url",
		value: assign(bmcURLValue, bmcField(func(b *BMC) *string { return &b.URL })),
		doc: "Redfish service of the machine's baseboard management controller (iDRAC, iLO, XClarity, OpenBMC, ...), such as " +
			"`https://10.0.9.11`. The controller manager polls the machine's power state from it in the background and reports " +
			"a machine whose BMC says `PowerState` `Off` as shut down ([docs/controller-manager.md](controller-manager.md#power-state-from-the-bmc)); " +
			"it never reports a machine gone because of its BMC. Without it the other `bmc-` keys are refused.",
	},
	{
		section: machineSection, name: "bmc-system", dfltDoc: "the service's only system",
		value: assign(redfishSystemValue, bmcField(func(b *BMC) *string { return &b.System })),
		doc: "Which system of the Redfish service is this machine, by `Id` or `@odata.id` (`/redfish/v1/Systems/1`). " +
			"Needed when the service has more than one system (a chassis manager); without it a service with several is an error of that machine's BMC.",
	},
	{
		section: machineSection, name: "bmc-username-file",
		value: assign(controllerFile, bmcField(func(b *BMC) *string { return &b.UsernameFile })),
		doc: "File holding the user name for HTTP basic authentication to the BMC, its trailing newline dropped. Given with `bmc-password-file` or not at all " +
			"(then requests carry no credentials). Read at each poll, so a rotated Secret is picked up.",
	},
	{
		section: machineSection, name: "bmc-password-file",
		value: assign(controllerFile, bmcField(func(b *BMC) *string { return &b.PasswordFile })),
		doc: "File holding the password for `bmc-username-file`, its trailing newline dropped; never logged. Example: `/etc/groundcloud-bmc/web-1-password`, " +
			"key `web-1-password` of the Secret that `deploy/controller-manager/bmc-credentials` mounts at `/etc/groundcloud-bmc`.",
	},
	{
		section: machineSection, name: "bmc-ca-file",
		value: assign(controllerFile, bmcField(func(b *BMC) *string { return &b.CAFile })),
		doc: "PEM file of the certificate authorities that may sign the BMC's certificate. " +
			"One of `bmc-ca-file` and `bmc-insecure-skip-verify = true` is required with `bmc-url`; not both.",
	},
	{
		section: machineSection, name: "bmc-insecure-skip-verify", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.bmc.InsecureSkipVerify }),
		doc: "Whether to accept any certificate from the BMC, as many BMCs ship with a self-signed one. An explicit " +
			"opt-out: anyone on the path to the BMC can then read its credentials and answer for it.",
	},
	{
		section: machineSection, name: "bmc-timeout", dflt: DefaultBMCTimeout.String(),
		value: assign(positiveSeconds, func(t *target) *time.Duration { return &t.bmc.Timeout }),
		doc: "How long one poll of the BMC may take; a BMC that does not answer in time is recorded as an error " +
			"(never as powered off). At most `bmc-poll-interval`.",
	},
	{
		section: machineSection, name: "bmc-poll-interval", dflt: DefaultBMCPollInterval.String(),
		value: assign(positiveSeconds, func(t *target) *time.Duration { return &t.bmc.PollInterval }),
		doc: "Time between two polls of the BMC. An answer counts for the cloud-node controllers for three poll intervals; " +
			"an older one is ignored, as if the BMC had not answered.",
	},
	outOfServiceMachineKey,
	fenceMachineKey,
}

// checkBMC checks the rules across a machine's bmc- keys, given the line
// each key was given on, and keeps the BMC in the machine.
func checkBMC(m *Machine, b BMC, given map[string]int, label string, p *problems) {
	urlLine, hasURL := given["bmc-url"]
	if !hasURL {
		for _, k := range bmcKeys {
			if line, ok := given[k.name]; ok && k.name != "bmc-url" {
				p.add(line, label, k.name, "needs bmc-url, the machine's Redfish service")
			}
		}
		return
	}
	_, user := given["bmc-username-file"]
	_, pass := given["bmc-password-file"]
	switch {
	case user && !pass:
		p.add(given["bmc-username-file"], label, "bmc-username-file", "needs bmc-password-file too")
	case pass && !user:
		p.add(given["bmc-password-file"], label, "bmc-password-file", "needs bmc-username-file too")
	}
	switch {
	case b.CAFile == "" && !b.InsecureSkipVerify:
		p.add(urlLine, label, "bmc-url", "needs bmc-ca-file, the authorities that sign the BMC's certificate, "+
			"or bmc-insecure-skip-verify = true to accept any certificate")
	case b.CAFile != "" && b.InsecureSkipVerify:
		p.add(given["bmc-insecure-skip-verify"], label, "bmc-insecure-skip-verify", "true, but bmc-ca-file is given too; use one")
	}
	if b.Timeout > b.PollInterval && b.PollInterval > 0 {
		line, key := given["bmc-timeout"], "bmc-timeout"
		if line == 0 {
			line, key = given["bmc-poll-interval"], "bmc-poll-interval"
		}
		p.add(line, label, key, "bmc-timeout %s is longer than bmc-poll-interval %s", b.Timeout, b.PollInterval)
	}
	if m.Fence == FencePowerOff && m.OutOfService == OutOfServiceOff {
		p.add(given["bmc-fence"], label, "bmc-fence", "power-off, but bmc-out-of-service = off: a fenced machine's Node would never be tainted; set bmc-out-of-service = taint")
	}
	m.BMC = &b
}
