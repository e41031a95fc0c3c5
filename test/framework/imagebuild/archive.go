package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// Config is the part of an image's configuration the builder sets.
type Config struct {
	User       string   `json:"User,omitempty"`
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
}

// Image is a docker-archive tarball holding one image.
type Image struct {
	// Ref is the image's name and tag, e.g.
	// "localhost/groundcloud/groundcloud-agent:0123456789abcdef"; the tag is
	// the start of the config's digest, so it names this content.
	Ref string
	// Archive is the tarball's path.
	Archive string
}

// imageConfig is the image configuration document (OCI image spec, in the
// docker-archive's layout).
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       Config `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// archiveManifest is one entry of a docker-archive's manifest.json.
type archiveManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// WriteArchive writes the image name:<digest> made of layer and cfg as a
// docker-archive tarball into dir, named after the image, and returns it.
func WriteArchive(dir, name string, layer *Layer, cfg Config) (Image, error) {
	layerFile, diffID, size, err := writeLayerFile(dir, layer)
	if err != nil {
		return Image{}, err
	}
	defer os.Remove(layerFile)
	conf := imageConfig{Architecture: runtime.GOARCH, OS: "linux", Config: cfg}
	conf.RootFS.Type = "layers"
	conf.RootFS.DiffIDs = []string{"sha256:" + diffID}
	confJSON, err := json.Marshal(conf)
	if err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(confJSON)
	confDigest := hex.EncodeToString(sum[:])
	ref := name + ":" + confDigest[:16]
	manifest, err := json.Marshal([]archiveManifest{{
		Config: confDigest + ".json", RepoTags: []string{ref}, Layers: []string{diffID + "/layer.tar"},
	}})
	if err != nil {
		return Image{}, err
	}
	img := Image{Ref: ref, Archive: filepath.Join(dir, filepath.Base(name)+"-"+confDigest[:16]+".tar")}
	err = writeTar(img.Archive, []tarFile{
		{name: confDigest + ".json", data: confJSON},
		{name: diffID + "/layer.tar", src: layerFile, size: size},
		{name: "manifest.json", data: manifest},
	})
	if err != nil {
		return Image{}, fmt.Errorf("write image %s: %w", ref, err)
	}
	return img, nil
}

// writeLayerFile writes the layer to a temporary file in dir and returns
// it with its sha256 (the layer's diff ID) and size.
func writeLayerFile(dir string, layer *Layer) (string, string, int64, error) {
	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return "", "", 0, fmt.Errorf("write layer: %w", err)
	}
	h := sha256.New()
	size, err := layer.WriteTo(io.MultiWriter(f, h))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", "", 0, err
	}
	return f.Name(), hex.EncodeToString(h.Sum(nil)), size, nil
}

type tarFile struct {
	name string
	data []byte
	src  string // read instead of data when set
	size int64
}

// writeTar writes files into a new tar at path, atomically.
func writeTar(path string, files []tarFile) (err error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	tw := tar.NewWriter(f)
	for _, tf := range files {
		if err := writeTarFile(tw, tf); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeTarFile(tw *tar.Writer, tf tarFile) error {
	size := int64(len(tf.data))
	if tf.src != "" {
		size = tf.size
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: tf.name, Mode: 0o644, Size: size, ModTime: layerTime}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if tf.src == "" {
		_, err := tw.Write(tf.data)
		return err
	}
	src, err := os.Open(tf.src)
	if err != nil {
		return err
	}
	defer src.Close()
	n, err := io.Copy(tw, src)
	if err == nil && n != size {
		err = errors.New("layer changed while written")
	}
	return err
}
