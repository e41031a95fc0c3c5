package realcluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
)

// imagePrefix names the images the test bed builds; "localhost/" keeps
// the CRI from thinking of any registry.
const imagePrefix = "localhost/groundcloud/"

// Images are the images every node has: groundcloud's, built from
// deploy/images/, and the test bed's own.
type Images struct {
	// ControllerManager, Agent and Router are built from their Dockerfiles.
	ControllerManager, Agent, Router imagebuild.Image
	// KubeProxy is the pinned kube-proxy with nft (the upstream image is
	// distroless with iptables and nftables); Pause is the Pods' sandbox;
	// Echo the example application (test/images/echo/groundcloud-echo).
	KubeProxy, Pause, Echo imagebuild.Image
	// CoreDNS is cluster DNS (hack/tools/cmd/coredns).
	CoreDNS imagebuild.Image
}

func (i Images) all() []imagebuild.Image {
	return []imagebuild.Image{i.ControllerManager, i.Agent, i.Router, i.KubeProxy, i.Pause, i.Echo, i.CoreDNS}
}

// buildImages builds every image into dir: our Dockerfiles' go builds and
// the example's in one go build in repo (they agree on flags, so they
// share their compile work), the Kubernetes binaries from tools.
func buildImages(ctx context.Context, repo, tools, dir string) (Images, error) {
	b := imagebuild.Builder{Dir: dir, Repo: repo}
	recipes, err := releaseRecipes(repo)
	if err != nil {
		return Images{}, err
	}
	var builds []imagebuild.GoBuild
	for _, r := range recipes {
		builds = append(builds, r.Build)
	}
	// As our Dockerfiles build: static, trimmed.
	builds = append(builds, imagebuild.GoBuild{
		Env:   map[string]string{"CGO_ENABLED": "0"},
		Flags: []string{"-trimpath", "-ldflags=-s -w"}, Output: "/out/groundcloud-echo",
		Packages: []string{"./test/images/echo/groundcloud-echo"},
	})
	bins, err := b.Compile(ctx, builds...)
	if err != nil {
		return Images{}, fmt.Errorf("build images: %w", err)
	}
	rel, err := releaseImages(ctx, b, recipes, bins[:len(recipes)])
	if err != nil {
		return Images{}, err
	}
	imgs := Images{ControllerManager: rel.ControllerManager, Agent: rel.Agent, Router: rel.Router}
	echo := bins[len(bins)-1]
	for _, s := range []struct {
		img  *imagebuild.Image
		spec imagebuild.Spec
	}{
		{&imgs.Echo, imagebuild.Spec{
			Name: imagePrefix + "groundcloud-echo", Base: "gcr.io/distroless/static-debian12:nonroot",
			Executables: []imagebuild.Executable{{Src: echo, Dest: "/usr/local/bin/groundcloud-echo"}},
			Entrypoint:  []string{"/usr/local/bin/groundcloud-echo"},
		}},
		{&imgs.Pause, imagebuild.Spec{
			Name: imagePrefix + "pause", Base: "scratch",
			Executables: []imagebuild.Executable{{Src: filepath.Join(tools, "pause"), Dest: "/pause"}},
			Entrypoint:  []string{"/pause"},
		}},
		// Like the upstream image: CoreDNS alone, on distroless (it runs
		// as root there, with NET_BIND_SERVICE for port 53).
		{&imgs.CoreDNS, imagebuild.Spec{
			Name: imagePrefix + "coredns", Base: "gcr.io/distroless/static-debian12",
			Executables: []imagebuild.Executable{{Src: filepath.Join(tools, "coredns"), Dest: "/coredns"}},
			Entrypoint:  []string{"/coredns"},
		}},
		// Like the upstream image (distroless-iptables): nft, and netbase's
		// /etc/protocols, without which kube-proxy's nftables mode loses
		// Service addresses on its full resyncs (see images.hostPackages).
		{&imgs.KubeProxy, imagebuild.Spec{
			Name: imagePrefix + "kube-proxy", Base: "debian:bookworm-slim",
			Packages:    []string{"nftables", "netbase"},
			Executables: []imagebuild.Executable{{Src: filepath.Join(tools, "kube-proxy"), Dest: "/usr/local/bin/kube-proxy"}},
			Entrypoint:  []string{"/usr/local/bin/kube-proxy"},
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
