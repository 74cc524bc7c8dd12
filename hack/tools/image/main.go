// Command image assembles promscaler's multi-arch container image from
// binaries already built for each platform, with no container engine: a
// scratch image holding Debian's CA certificate bundle, a passwd/group with
// the non-root user 65532, /tmp, and the adapter and autoscaler binaries. It
// writes an OCI image layout directory and the same layout as one tar
// (oci-archive), and prints the index digest.
//
// The output is reproducible: every timestamp is -created (hack/image.sh
// passes the commit time), tar entries are sorted with fixed owners, and
// nothing reads the clock.
//
//	image -out _output/image -archive _output/image.oci.tar -version v0.3.0 \
//	  -created 2026-12-01T00:00:00Z -ca-certs /etc/ssl/certs/ca-certificates.crt \
//	  -platform linux/amd64=_output/image-bin/linux_amd64 \
//	  -platform linux/arm64=_output/image-bin/linux_arm64
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as (distroless' "nonroot").
const (
	uid      = 65532
	certPath = "etc/ssl/certs/ca-certificates.crt"
)

type platforms map[string]string // "linux/arm64" -> directory with the binaries

func (p platforms) String() string { return fmt.Sprint(map[string]string(p)) }
func (p platforms) Set(s string) error {
	plat, dir, ok := strings.Cut(s, "=")
	if !ok || !strings.Contains(plat, "/") || dir == "" {
		return fmt.Errorf("want os/arch=dir, got %q", s)
	}
	p[plat] = dir
	return nil
}

type options struct {
	out, archive, version, revision, caCerts string
	created                                  time.Time
	platforms                                platforms
	binaries                                 []string
}

func main() {
	o := options{platforms: platforms{}, binaries: []string{"adapter", "autoscaler"}}
	var created string
	flag.StringVar(&o.out, "out", "", "OCI image layout directory to write (replaced)")
	flag.StringVar(&o.archive, "archive", "", "also write the layout as this tar (oci-archive)")
	flag.StringVar(&o.version, "version", "devel", "image version (label and ref name)")
	flag.StringVar(&o.revision, "revision", "", "source revision (label)")
	flag.StringVar(&o.caCerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to ship")
	flag.StringVar(&created, "created", "1970-01-01T00:00:00Z", "creation time of every file and of the image (RFC 3339)")
	flag.Var(o.platforms, "platform", "os/arch=dir holding the binaries for it (repeatable)")
	flag.Parse()
	var err error
	if o.created, err = time.Parse(time.RFC3339, created); err != nil {
		fail(fmt.Errorf("-created: %w", err))
	}
	if o.out == "" || len(o.platforms) == 0 {
		fail(errors.New("-out and at least one -platform are required"))
	}
	digest, size, err := build(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("image %s: index %s, %d bytes of blobs, platforms %s\n", o.out, digest, size, strings.Join(sortedKeys(o.platforms), ","))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// build writes the layout and returns the index digest and the blobs' size.
func build(o options) (v1.Hash, int64, error) {
	certs, err := os.ReadFile(o.caCerts)
	if err != nil {
		return v1.Hash{}, 0, fmt.Errorf("reading CA certificates: %w", err)
	}
	base, err := layer(o.created, baseFiles(certs))
	if err != nil {
		return v1.Hash{}, 0, err
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, plat := range sortedKeys(o.platforms) {
		img, err := platformImage(o, plat, base)
		if err != nil {
			return v1.Hash{}, 0, fmt.Errorf("%s: %w", plat, err)
		}
		osName, arch, _ := strings.Cut(plat, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	if err := os.RemoveAll(o.out); err != nil {
		return v1.Hash{}, 0, err
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return v1.Hash{}, 0, fmt.Errorf("writing layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.version,
	})); err != nil {
		return v1.Hash{}, 0, fmt.Errorf("writing index: %w", err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	var size int64
	if err := filepath.WalkDir(filepath.Join(o.out, "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	}); err != nil {
		return v1.Hash{}, 0, err
	}
	if o.archive != "" {
		if err := archive(o.out, o.archive, o.created); err != nil {
			return v1.Hash{}, 0, fmt.Errorf("writing %s: %w", o.archive, err)
		}
	}
	return digest, size, nil
}

func platformImage(o options, plat string, base v1.Layer) (v1.Image, error) {
	var files []file
	for _, b := range o.binaries {
		data, err := os.ReadFile(filepath.Join(o.platforms[plat], b))
		if err != nil {
			return nil, fmt.Errorf("reading binary: %w", err)
		}
		files = append(files, file{name: b, mode: 0o755, data: data})
	}
	bins, err := layer(o.created, files)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "promscaler hack/image.sh: CA certificates, passwd, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: bins, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "promscaler hack/image.sh: /adapter, /autoscaler", Comment: "binaries"}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	osName, arch, _ := strings.Cut(plat, "/")
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		Entrypoint: []string{"/adapter"},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=/" + certPath},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "promscaler",
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.revision,
			"org.opencontainers.image.source":   "https://github.com/promscaler/promscaler",
		},
	}
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	mode int64
	uid  int
	dir  bool
	data []byte
}

func baseFiles(certs []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	return []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl", dir: true, mode: 0o755},
		{name: "etc/ssl/certs", dir: true, mode: 0o755},
		{name: certPath, mode: 0o644, data: certs},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: uid},
		{name: "tmp", dir: true, mode: 0o1777},
	}
}

// layer makes a layer of files with fixed owners and times, in order.
func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// archive writes the layout directory as one tar (sorted, fixed times).
func archive(dir, dst string, created time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		paths = append(paths, p)
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return errors.Join(err, out.Close())
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: created, Format: tar.FormatPAX}
		var data []byte
		if info.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			if data, err = os.ReadFile(p); err != nil {
				return errors.Join(err, out.Close())
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return errors.Join(err, out.Close())
		}
		if _, err := tw.Write(data); err != nil {
			return errors.Join(err, out.Close())
		}
	}
	return errors.Join(tw.Close(), out.Close())
}
