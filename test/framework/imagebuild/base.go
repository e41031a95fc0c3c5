package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// base is what the builder puts into an image for a FROM it knows: a
// minimal stand-in with the users, directories and environment that
// programs in the real base image rely on.
type base struct {
	// user is the image's default user ("" is root).
	user string
	env  []string
	// release is the Debian release whose packages the base may install
	// from this machine ("" for none).
	release string
	files   func(*Layer) error
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// bases are the FROM lines the builder knows.
var bases = map[string]base{
	"scratch": {files: func(*Layer) error { return nil }},
	// gcr.io/distroless/static-debian12: CA certificates, /etc/passwd with
	// root, nobody and nonroot (65532), /tmp, Debian's netbase files; the
	// :nonroot tag runs as 65532.
	"gcr.io/distroless/static-debian12":         {env: distrolessEnv, files: distrolessFiles},
	"gcr.io/distroless/static-debian12:nonroot": {user: "65532", env: distrolessEnv, files: distrolessFiles},
	// debian:bookworm-slim: root and nobody, /tmp; apt-get install takes
	// packages from this machine when it runs Debian bookworm.
	"debian:bookworm-slim": {env: []string{defaultPath}, release: "bookworm", files: debianFiles},
}

var distrolessEnv = []string{defaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}

const hostCACertificates = "/etc/ssl/certs/ca-certificates.crt"

func distrolessFiles(l *Layer) error {
	l.AddFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	l.AddFile("/etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
	l.AddDir("/tmp", 0o1777, 0, 0)
	l.AddDir("/root", 0o700, 0, 0)
	l.AddDir("/home/nonroot", 0o700, 65532, 65532)
	if err := l.AddHostFile(hostCACertificates, hostCACertificates); err != nil {
		return err
	}
	return addPackageFiles(l, hostPackages["netbase"])
}

func debianFiles(l *Layer) error {
	l.AddFile("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/bash\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"))
	l.AddFile("/etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	l.AddDir("/tmp", 0o1777, 0, 0)
	l.AddDir("/root", 0o700, 0, 0)
	return nil
}

// hostPackage is what the builder takes of a Debian package: its
// executables (each with the libraries it needs) and data files.
type hostPackage struct {
	executables, files []string
}

// hostPackages are the Debian packages the builder can install.
var hostPackages = map[string]hostPackage{
	"nftables": {executables: []string{"/usr/sbin/nft"}},
	// Protocol and service names. Without /etc/protocols, nft prints the
	// protocol of an element as a number ("6", not "tcp"), and a program
	// that reads its elements back to compare them with what it wrote
	// (kube-proxy) sees a difference where there is none. nftables only
	// recommends it, so an image of ours installed --no-install-recommends
	// lacks it; the upstream kube-proxy image has it.
	"netbase": {files: []string{"/etc/protocols", "/etc/services", "/etc/rpc", "/etc/ethertypes"}},
}

func addPackageFiles(l *Layer, p hostPackage) error {
	for _, f := range p.files {
		if err := l.AddHostPath(f); err != nil {
			return err
		}
	}
	return nil
}

// addPackages adds pkgs from this machine, which must run the base's
// Debian release and have them installed.
func addPackages(ctx context.Context, l *Layer, b base, from string, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	if b.release == "" {
		return fmt.Errorf("%s: the local image builder installs no packages on this base", from)
	}
	if got := hostRelease(); got != b.release {
		return fmt.Errorf("%s installs %v: the local image builder takes them from this machine, which runs %q, not Debian %s", from, pkgs, got, b.release)
	}
	for _, pkg := range pkgs {
		p, ok := hostPackages[pkg]
		if !ok {
			return fmt.Errorf("package %s: not known to the local image builder", pkg)
		}
		if out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", pkg).Output(); err != nil || !bytes.Contains(out, []byte("install ok installed")) {
			return fmt.Errorf("package %s is not installed on this machine (apt-get install %s)", pkg, pkg)
		}
		for _, exe := range p.executables {
			if err := l.AddExecutable(ctx, exe); err != nil {
				return fmt.Errorf("package %s: %w", pkg, err)
			}
		}
		if err := addPackageFiles(l, p); err != nil {
			return fmt.Errorf("package %s: %w", pkg, err)
		}
	}
	return nil
}

// hostRelease is this machine's Debian codename (VERSION_CODENAME of
// /etc/os-release when ID is debian), or a description of what it runs.
func hostRelease() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "an unknown system"
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			fields[k] = strings.Trim(v, `"`)
		}
	}
	if fields["ID"] != "debian" {
		return fields["PRETTY_NAME"]
	}
	return fields["VERSION_CODENAME"]
}
