package clustertest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/apionly"
)

// sandboxBinary is groundcloud-sandbox, built once by TestMain.
var sandboxBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "groundcloud-cluster-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if _, err := apionly.BuildBinaries(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sandboxBinary = filepath.Join(dir, "groundcloud-sandbox")
	return m.Run()
}
