package config_test

import (
	"errors"
	"fmt"

	"github.com/groundcloud/groundcloud/internal/config"
)

func ExampleParse() {
	_, err := config.Parse("cloud.conf", []byte(`[Global]
region = eu-central

[Machine "web-1"]
zone =
internal-ip = 10.0.0.300
flavor = large

[Pool "public"]
addresses = 203.0.113.5/27
`))
	fmt.Println(err)

	var errs config.Errors
	if errors.As(err, &errs) {
		fmt.Println(len(errs), "problems; the first is on line", errs[0].Line)
	}
	// Output:
	// cloud.conf:5: [Machine "web-1"] zone: must not be empty
	// cloud.conf:6: [Machine "web-1"] internal-ip: "10.0.0.300" is not an IPv4 or IPv6 address
	// cloud.conf:7: [Machine "web-1"] flavor: unknown key; [Machine] has zone, region, instance-type, internal-ip, external-ip, hostname, internal-dns, external-dns, label, state, bmc-url, bmc-system, bmc-username-file, bmc-password-file, bmc-ca-file, bmc-insecure-skip-verify, bmc-timeout, bmc-poll-interval, bmc-out-of-service, bmc-fence
	// cloud.conf:10: [Pool "public"] addresses: CIDR "203.0.113.5/27" has host bits set; did you mean 203.0.113.0/27?
	// 4 problems; the first is on line 5
}
