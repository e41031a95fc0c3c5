// Command e2e is Kubernetes' own end-to-end suite (k8s.io/kubernetes/test/e2e)
// with its network specs (test/e2e/network), built as a plain program so that
// it compiles in the tools module's one go build beside the control-plane
// binaries it shares packages with. It does what upstream's e2e.test does
// in TestMain and RunE2ETests: the same flags (-kubeconfig, -provider,
// -ginkgo.focus, ...), the same file sources and Ginkgo configuration; the
// suite's exit code is 1 when a spec failed. The ginkgo command (built
// beside it) runs it in parallel processes like a compiled test binary
// (ginkgo -p e2e.test, through a link of that name).
package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The suite's BeforeSuite and the network specs.
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/network"

	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

// suite is what ginkgo.RunSpecs reports a failure to (testing.T's part of
// it that Ginkgo uses).
type suite struct{ failed bool }

func (s *suite) Fail() { s.failed = true }

func main() {
	// The ginkgo command runs a suite's processes with go test's flags
	// (-test.timeout=0, ...) as it runs a compiled test binary.
	testing.Init()
	showVersion := flag.Bool("version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.Args())
		os.Exit(2)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)

	logs.InitLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	s := &suite{}
	ok := ginkgo.RunSpecs(s, "Kubernetes e2e suite", suiteConfig, reporterConfig)
	logs.FlushLogs()
	if !ok || s.failed {
		os.Exit(1)
	}
}
