package images

import (
	"os"
	"testing"
)

func TestTryBuild(t *testing.T) {
	if os.Getenv("TRY") == "" {
		t.Skip()
	}
	b := Builder{Dir: "/tmp/try-images", Repo: "/work/wt/cluster"}
	img, err := b.Dockerfile(t.Context(), "localhost/groundcloud/groundcloud-agent", "/work/wt/cluster/deploy/images/groundcloud-agent/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(img)
}
