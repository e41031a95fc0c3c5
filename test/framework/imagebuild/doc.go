// Package imagebuild builds container images on this machine without a
// registry or a container daemon: docker-archive tarballs that `ctr images
// import` loads into a containerd. The real cluster of the test bed
// (test/framework/realcluster) runs groundcloud from these images.
//
// It owns: reading the Dockerfiles of deploy/images/ (ParseDockerfile) and
// turning the small subset of instructions they use into a Recipe; building
// a Recipe's go build the way the Dockerfile runs it; the content of the
// base images it knows (distroless static, Debian slim and scratch) and of
// the Debian packages it takes from this machine (nftables); assembling one
// deterministic layer (same inputs, same digest) and writing the archive.
//
// The Dockerfiles stay the one source of truth: a Dockerfile that uses an
// instruction, a base image or a package the builder does not know is an
// error, never a silently different image.
//
// It must not: pull, push or talk to any registry or daemon; change this
// machine beyond the files it is asked to write; take a package from this
// machine that is not the Debian release the Dockerfile names.
package imagebuild
