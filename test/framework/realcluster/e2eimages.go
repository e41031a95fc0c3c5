package realcluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/groundcloud/groundcloud/test/framework/imagebuild"
)

// agnhostTools are the programs Kubernetes' e2e specs run inside an
// agnhost container besides agnhost itself (kubectl exec ... /bin/sh -c
// 'curl ...; nc -v -t -w ...'), by their path in the image and the host
// file they are taken from, with its libraries: what the upstream image
// (Alpine with curl, netcat-openbsd, bind-tools, iproute2, bash, socat and
// busybox's utilities) offers, from this machine's Debian packages (see
// hack/install-deps.sh). Debian's static busybox is no stand-in: its wget
// crashes on name lookup and its nc has no -v.
var agnhostTools = map[string]string{
	"/bin/sh": "/usr/bin/dash", "/bin/bash": "/usr/bin/bash",
	"/usr/bin/curl": "/usr/bin/curl", "/usr/bin/wget": "/usr/bin/wget",
	"/usr/bin/nc": "/usr/bin/nc.openbsd", "/usr/bin/socat": "/usr/bin/socat",
	"/usr/bin/dig": "/usr/bin/dig", "/usr/bin/nslookup": "/usr/bin/nslookup",
	"/usr/bin/ip": "/usr/bin/ip", "/usr/bin/awk": "/usr/bin/mawk",
}

// agnhostCoreutils are utilities at the same path as on this machine.
var agnhostCoreutils = []string{
	"cat", "sleep", "echo", "ls", "date", "hostname", "timeout", "head", "tail",
	"grep", "sed", "test", "env", "id", "mkdir", "rm", "touch", "wc", "sort",
	"tr", "cut", "seq", "ps", "true", "false", "printf", "tee", "uname", "stat",
	"find", "xargs", "kill", "expr", "basename", "dirname",
}

// BuildAgnhost builds the image of Kubernetes' e2e test helper agnhost
// (the tools module's build of k8s.io/kubernetes/test/images/agnhost) into
// dir: /agnhost as its entrypoint with "pause" as its default arguments,
// as upstream's, and the tools of agnhostTools and agnhostCoreutils.
func BuildAgnhost(ctx context.Context, tools, dir string) (imagebuild.Image, error) {
	exes := []imagebuild.Executable{{Src: filepath.Join(tools, "agnhost"), Dest: "/agnhost"}}
	for dest, src := range agnhostTools {
		exes = append(exes, imagebuild.Executable{Src: src, Dest: dest})
	}
	for _, name := range agnhostCoreutils {
		exes = append(exes, imagebuild.Executable{Src: "/usr/bin/" + name, Dest: "/usr/bin/" + name})
	}
	b := imagebuild.Builder{Dir: dir}
	img, err := b.Build(ctx, imagebuild.Spec{
		Name: imagePrefix + "agnhost", Base: "debian:bookworm-slim",
		Executables: exes,
		Entrypoint:  []string{"/agnhost"},
		Cmd:         []string{"pause"},
		Files: map[string][]byte{
			// Busybox's wget, which the specs expect, tries once; GNU wget
			// tries 20 times on a timeout, so a spec that polls until an
			// address is unreachable (wget -T 5) waited minutes per poll.
			"/etc/wgetrc": []byte("tries = 1\n"),
		},
	})
	if err != nil {
		return imagebuild.Image{}, fmt.Errorf("agnhost image: %w", err)
	}
	return img, nil
}

// ImportAs imports img into the containerd of every node that runs under
// the names refs as well as its own: an image a test suite asks for by its
// upstream name (registry.k8s.io/...), which no node may pull.
func (c *Cluster) ImportAs(ctx context.Context, img imagebuild.Image, refs ...string) error {
	for _, n := range c.Nodes {
		if n.containerd == nil || n.stopped {
			continue // a late worker not joined yet, or one that left
		}
		if err := n.importImages(ctx, []imagebuild.Image{img}); err != nil {
			return err
		}
		for _, ref := range refs {
			if _, err := n.Ctr(ctx, "images", "tag", "--force", img.Ref, ref); err != nil {
				return fmt.Errorf("node %s: tag %s as %s: %w", n.Name, img.Ref, ref, err)
			}
		}
	}
	return nil
}
