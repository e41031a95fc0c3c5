package realcluster

import (
	"context"
	"fmt"
	"os"
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
	// The DNS specs' musl prober checks /etc/hosts entries with getent.
	"/usr/bin/getent": "/usr/bin/getent",
	"/usr/bin/ip":     "/usr/bin/ip", "/usr/bin/awk": "/usr/bin/mawk",
}

// agnhostCoreutils are utilities at the same path as on this machine, and
// in /bin too, where upstream's image (busybox) has them and specs name
// them (Services "should create endpoints for unready pods": a preStop
// hook of /bin/sleep).
var agnhostCoreutils = []string{
	"cat", "sleep", "echo", "ls", "date", "hostname", "timeout", "head", "tail",
	"grep", "sed", "test", "env", "id", "mkdir", "rm", "touch", "wc", "sort",
	"tr", "cut", "seq", "ps", "true", "false", "printf", "tee", "uname", "stat",
	"find", "xargs", "kill", "expr", "basename", "dirname",
	// Services "should be rejected for evicted pods" fills its ephemeral
	// storage with dd.
	"dd",
}

// BuildAgnhost builds the image of Kubernetes' e2e test helper agnhost
// (the tools module's build of k8s.io/kubernetes/test/images/agnhost) into
// dir: /agnhost as its entrypoint with "pause" as its default arguments,
// as upstream's, the tools of agnhostTools and agnhostCoreutils, /coredns,
// and porter's TLS certificate and key.
func BuildAgnhost(ctx context.Context, tools, dir string) (imagebuild.Image, error) {
	exes := []imagebuild.Executable{{Src: filepath.Join(tools, "agnhost"), Dest: "/agnhost"}}
	for dest, src := range agnhostTools {
		exes = append(exes, imagebuild.Executable{Src: src, Dest: dest})
	}
	exes = append(exes, utilities(agnhostCoreutils...)...)
	// The DNS specs run /coredns as their own test server (upstream's image
	// carries a CoreDNS release there): the tools' CoreDNS, which has the
	// hosts plugin they configure.
	exes = append(exes, imagebuild.Executable{Src: filepath.Join(tools, "coredns"), Dest: "/coredns"})
	files := map[string][]byte{
		// Busybox's wget, which the specs expect, tries once; GNU wget
		// tries 20 times on a timeout, so a spec that polls until an
		// address is unreachable (wget -T 5) waited minutes per poll.
		"/etc/wgetrc":        []byte("tries = 1\n"),
		"/etc/nsswitch.conf": []byte("hosts: files dns\n"),
	}
	// porter serves TLS with the certificate and key upstream's image
	// carries at / (it opens them relative to its working directory);
	// hack/tools/build.sh copies them from the module next to the tools.
	for _, name := range []string{"localhost.crt", "localhost.key"} {
		data, err := os.ReadFile(filepath.Join(tools, name))
		if err != nil {
			return imagebuild.Image{}, fmt.Errorf("agnhost image: porter's TLS files: %w", err)
		}
		files["/"+name] = data
	}
	return buildE2EImage(ctx, dir, imagebuild.Spec{
		Name: imagePrefix + "agnhost", Base: "debian:bookworm-slim",
		Executables: exes,
		Entrypoint:  []string{"/agnhost"},
		Cmd:         []string{"pause"},
		Files:       files,
	})
}

// BuildGlibcDNSTesting builds the image of the DNS specs' glibc prober
// (upstream's glibc-dns-testing: Debian with dnsutils, and a CoreDNS
// release at /coredns) into dir: the shell, dig, getent and the utilities
// its probe loop runs, from this machine, and the tools' CoreDNS.
func BuildGlibcDNSTesting(ctx context.Context, tools, dir string) (imagebuild.Image, error) {
	exes := []imagebuild.Executable{
		{Src: "/usr/bin/dash", Dest: "/bin/sh"}, {Src: "/usr/bin/dig", Dest: "/usr/bin/dig"},
		{Src: "/usr/bin/nslookup", Dest: "/usr/bin/nslookup"}, {Src: "/usr/bin/getent", Dest: "/usr/bin/getent"},
		{Src: filepath.Join(tools, "coredns"), Dest: "/coredns"},
	}
	exes = append(exes, utilities("seq", "sleep", "cat", "echo", "test", "grep", "ls")...)
	return buildE2EImage(ctx, dir, imagebuild.Spec{
		Name: imagePrefix + "glibc-dns-testing", Base: "debian:bookworm-slim",
		Executables: exes,
		Files:       map[string][]byte{"/etc/nsswitch.conf": []byte("hosts: files dns\n")},
	})
}

// BuildDistrolessIptables builds the image of kube-proxy's CLOSE_WAIT spec
// (upstream's distroless-iptables, the base of its kube-proxy image) into
// dir: a shell and what the spec runs in it to read the node's conntrack
// table (cat and grep on /proc/net/nf_conntrack).
func BuildDistrolessIptables(ctx context.Context, dir string) (imagebuild.Image, error) {
	exes := []imagebuild.Executable{{Src: "/usr/bin/dash", Dest: "/bin/sh"}}
	exes = append(exes, utilities("sleep", "cat", "grep", "test")...)
	return buildE2EImage(ctx, dir, imagebuild.Spec{
		Name: imagePrefix + "distroless-iptables", Base: "debian:bookworm-slim",
		Executables: exes,
	})
}

// BuildBusybox builds a stand-in for the suite's busybox image into dir:
// the shell, the utilities of agnhostCoreutils and nc, from this machine
// (the Conntrack specs run `sh -c "... sleep ...; nc boom-server 9000"` in
// it), with sh as its default command, as busybox's.
func BuildBusybox(ctx context.Context, dir string) (imagebuild.Image, error) {
	exes := []imagebuild.Executable{
		{Src: "/usr/bin/dash", Dest: "/bin/sh"},
		{Src: "/usr/bin/nc.openbsd", Dest: "/bin/nc"}, {Src: "/usr/bin/nc.openbsd", Dest: "/usr/bin/nc"},
	}
	exes = append(exes, utilities(agnhostCoreutils...)...)
	return buildE2EImage(ctx, dir, imagebuild.Spec{
		Name: imagePrefix + "busybox", Base: "debian:bookworm-slim",
		Executables: exes,
		Cmd:         []string{"sh"},
	})
}

// BuildRegressionIssue74839 builds the image of the Conntrack spec "proxy
// implementation should not be vulnerable to the invalid conntrack state
// bug" (upstream's regression-issue-74839: the program alone, from the
// tools' build of k8s.io/kubernetes/test/images/regression-issue-74839)
// into dir.
func BuildRegressionIssue74839(ctx context.Context, tools, dir string) (imagebuild.Image, error) {
	return buildE2EImage(ctx, dir, imagebuild.Spec{
		Name: imagePrefix + "regression-issue-74839", Base: "debian:bookworm-slim",
		Executables: []imagebuild.Executable{{Src: filepath.Join(tools, "regression-issue-74839"), Dest: "/regression-issue-74839"}},
		Entrypoint:  []string{"/regression-issue-74839"},
	})
}

// utilities are this machine's /usr/bin/<name> at /usr/bin and /bin.
func utilities(names ...string) []imagebuild.Executable {
	var exes []imagebuild.Executable
	for _, name := range names {
		exes = append(exes,
			imagebuild.Executable{Src: "/usr/bin/" + name, Dest: "/usr/bin/" + name},
			imagebuild.Executable{Src: "/usr/bin/" + name, Dest: "/bin/" + name})
	}
	return exes
}

func buildE2EImage(ctx context.Context, dir string, spec imagebuild.Spec) (imagebuild.Image, error) {
	b := imagebuild.Builder{Dir: dir}
	img, err := b.Build(ctx, spec)
	if err != nil {
		return imagebuild.Image{}, fmt.Errorf("%s image: %w", spec.Name, err)
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
