package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/groundcloud/groundcloud/internal/images"
)

// imagePrefix names the images the test bed builds; "localhost/" keeps
// the CRI from thinking of any registry.
const imagePrefix = "localhost/groundcloud/"

// Images are the images every node has: groundcloud's, built from
// deploy/images/, and the test bed's own.
type Images struct {
	// ControllerManager, Agent and Router are built from their Dockerfiles.
	ControllerManager, Agent, Router images.Image
	// KubeProxy is the pinned kube-proxy with nft (the upstream image is
	// distroless with iptables and nftables); Pause is the Pods' sandbox;
	// Echo the example application (cmd/groundcloud-echo).
	KubeProxy, Pause, Echo images.Image
}

func (i Images) all() []images.Image {
	return []images.Image{i.ControllerManager, i.Agent, i.Router, i.KubeProxy, i.Pause, i.Echo}
}

// buildImages builds every image into dir: go builds run in repo, the
// Kubernetes binaries come from tools.
func buildImages(ctx context.Context, repo, tools, dir string) (Images, error) {
	b := images.Builder{Dir: dir, Repo: repo}
	var imgs Images
	for _, d := range []struct {
		img  *images.Image
		name string
	}{
		{&imgs.ControllerManager, "groundcloud-controller-manager"},
		{&imgs.Agent, "groundcloud-agent"},
		{&imgs.Router, "groundcloud-router"},
	} {
		img, err := b.Dockerfile(ctx, imagePrefix+d.name, filepath.Join(repo, "deploy", "images", d.name, "Dockerfile"))
		if err != nil {
			return Images{}, fmt.Errorf("image %s: %w", d.name, err)
		}
		*d.img = img
	}
	// As our Dockerfiles build: static, trimmed.
	echo, err := b.Compile(ctx, images.GoBuild{
		Env:   map[string]string{"CGO_ENABLED": "0"},
		Flags: []string{"-trimpath", "-ldflags=-s -w"}, Output: "/out/groundcloud-echo",
		Packages: []string{"./cmd/groundcloud-echo"},
	})
	if err != nil {
		return Images{}, fmt.Errorf("image groundcloud-echo: %w", err)
	}
	for _, s := range []struct {
		img  *images.Image
		spec images.Spec
	}{
		{&imgs.Echo, images.Spec{
			Name: imagePrefix + "groundcloud-echo", Base: "gcr.io/distroless/static-debian12:nonroot",
			Executables: []images.Executable{{Src: echo, Dest: "/usr/local/bin/groundcloud-echo"}},
			Entrypoint:  []string{"/usr/local/bin/groundcloud-echo"},
		}},
		{&imgs.Pause, images.Spec{
			Name: imagePrefix + "pause", Base: "scratch",
			Executables: []images.Executable{{Src: filepath.Join(tools, "pause"), Dest: "/pause"}},
			Entrypoint:  []string{"/pause"},
		}},
		{&imgs.KubeProxy, images.Spec{
			Name: imagePrefix + "kube-proxy", Base: "debian:bookworm-slim",
			Executables: []images.Executable{
				{Src: filepath.Join(tools, "kube-proxy"), Dest: "/usr/local/bin/kube-proxy"},
				{Src: "/usr/sbin/nft", Dest: "/usr/sbin/nft"},
			},
			Entrypoint: []string{"/usr/local/bin/kube-proxy"},
		}},
	} {
		img, err := b.Build(ctx, s.spec)
		if err != nil {
			return Images{}, err
		}
		*s.img = img
	}
	return imgs, nil
}
