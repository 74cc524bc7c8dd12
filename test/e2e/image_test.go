//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// ociIndex, ociManifest and ociConfig are the parts of the OCI image
// layout the test reads (image-spec v1.1).
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// ociLayout reads blobs of an OCI image layout directory.
type ociLayout string

func (l ociLayout) blob(t *testing.T, d ociDescriptor, into any) []byte {
	t.Helper()
	algo, hex, ok := strings.Cut(d.Digest, ":")
	if !ok {
		t.Fatalf("bad digest %q", d.Digest)
	}
	data, err := os.ReadFile(filepath.Join(string(l), "blobs", algo, hex))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s: %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("blob %s: %v", d.Digest, err)
		}
	}
	return data
}

// layerFiles returns the regular files of gzipped tar layers, later layers
// winning, with their modes and owners.
type layerFile struct {
	data     []byte
	mode     int64
	uid, gid int
}

func layerFiles(t *testing.T, l ociLayout, layers []ociDescriptor) map[string]layerFile {
	t.Helper()
	files := map[string]layerFile{}
	for _, d := range layers {
		zr, err := gzip.NewReader(bytes.NewReader(l.blob(t, d, nil)))
		if err != nil {
			t.Fatalf("layer %s: %v", d.Digest, err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", d.Digest, err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = layerFile{data: data, mode: h.Mode, uid: h.Uid, gid: h.Gid}
		}
	}
	return files
}

// TestImage reads the image `make image` built (_output/image, an OCI
// layout): an index of linux/amd64 and linux/arm64 images, each running
// /adapter as 65532 with the binaries of its own architecture, CA
// certificates and a passwd naming the user; building it again from the same
// tree gives the same digest; the host's binary in it reports the version
// the image is labelled with. Where podman works, it also runs the image.
func TestImage(t *testing.T) {
	ctx := ctxFor(t, 10*time.Minute)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	layout := ociLayout(filepath.Join(root, "_output", "image"))
	var top ociIndex
	topData, err := os.ReadFile(filepath.Join(string(layout), "index.json"))
	if err != nil {
		t.Fatalf("%v (run `make image`)", err)
	}
	if err := json.Unmarshal(topData, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json holds %+v, want one image index", top.Manifests)
	}
	version := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	var idx ociIndex
	layout.blob(t, top.Manifests[0], &idx)
	wantArch := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("manifest %s has no platform", m.Digest)
		}
		plat := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, plat)
		t.Run(plat, func(t *testing.T) {
			var man ociManifest
			layout.blob(t, m, &man)
			var cfg ociConfig
			layout.blob(t, man.Config, &cfg)
			if cfg.OS != m.Platform.OS || cfg.Architecture != m.Platform.Architecture {
				t.Errorf("config says %s/%s, index says %s", cfg.OS, cfg.Architecture, plat)
			}
			if diff := cmp.Diff([]string{"/adapter"}, cfg.Config.Entrypoint); diff != "" {
				t.Errorf("entrypoint (-want +got):\n%s", diff)
			}
			if cfg.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532", cfg.Config.User)
			}
			if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
				t.Errorf("version label %q, ref name %q", got, version)
			}
			files := layerFiles(t, layout, man.Layers)
			for _, bin := range []string{"adapter", "autoscaler"} {
				f, ok := files[bin]
				if !ok {
					t.Fatalf("no /%s in the image", bin)
				}
				if f.mode&0o111 == 0 {
					t.Errorf("/%s mode %o is not executable", bin, f.mode)
				}
				ef, err := elf.NewFile(bytes.NewReader(f.data))
				if err != nil {
					t.Fatalf("/%s: %v", bin, err)
				}
				if ef.Machine != wantArch[m.Platform.Architecture] {
					t.Errorf("/%s is built for %v, the image is %s", bin, ef.Machine, plat)
				}
				if slices.ContainsFunc(ef.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
					t.Errorf("/%s is dynamically linked (the image has no libc)", bin)
				}
			}
			if certs := files["etc/ssl/certs/ca-certificates.crt"]; bytes.Count(certs.data, []byte("BEGIN CERTIFICATE")) < 50 {
				t.Errorf("CA bundle has %d certificates", bytes.Count(certs.data, []byte("BEGIN CERTIFICATE")))
			}
			if !strings.Contains(string(files["etc/passwd"].data), ":65532:65532:") {
				t.Errorf("/etc/passwd lacks user 65532:\n%s", files["etc/passwd"].data)
			}
			if m.Platform.Architecture == runtime.GOARCH {
				exe := filepath.Join(t.TempDir(), "adapter")
				if err := os.WriteFile(exe, files["adapter"].data, 0o755); err != nil {
					t.Fatal(err)
				}
				out, err := exec.CommandContext(ctx, exe, "--version").CombinedOutput()
				if err != nil || !strings.HasPrefix(string(out), "adapter "+version+" ") {
					t.Errorf("adapter --version = %q (%v), want it to start with %q", out, err, "adapter "+version+" ")
				}
			}
		})
	}
	slices.Sort(platforms)
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}

	// Assembling the same binaries again gives the same digest (the binaries
	// themselves are built with -trimpath and no build ID; compiling them
	// twice here would cost minutes).
	t.Run("reproducible", func(t *testing.T) {
		out := t.TempDir()
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "image.sh"))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "IMAGE_OUT="+out, "VERSION="+version,
			"IMAGE_BIN="+filepath.Join(root, "_output", "image-bin"), "IMAGE_REUSE_BINARIES=1")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/image.sh: %v\n%s", err, b)
		}
		again, err := os.ReadFile(filepath.Join(out, "image", "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(topData, again) {
			t.Errorf("a second build of the same tree differs (was `make image` run on this tree?):\n%s\n%s", topData, again)
		}
	})

	t.Run("podman", func(t *testing.T) { runImageWithPodman(ctx, t, root, version) })
}

// runImageWithPodman runs the image with podman, when podman is installed
// and works here: `--version` first, then the adapter serving against a
// real API server (host network, the kubeconfig and rules mounted
// read-only) until its /healthz answers, as the image's user.
func runImageWithPodman(ctx context.Context, t *testing.T, root, version string) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("no podman on this machine")
	}
	// Global flags that work in containers and on hybrid cgroup v1 hosts
	// (measured on these machines: crun refuses hybrid cgroups, podman's
	// default ulimits exceed the hard limits): cgroupfs, runc when present,
	// and ulimits within the host's.
	global := []string{"--cgroup-manager=cgroupfs"}
	if _, err := exec.LookPath("runc"); err == nil {
		global = append(global, "--runtime=runc")
	}
	podmanCmd := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, podman, append(slices.Clone(global), args...)...)
	}
	limits := []string{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"}
	if out, err := podmanCmd("info").CombinedOutput(); err != nil {
		t.Skipf("podman cannot run here: %v\n%s", err, out)
	}
	image := "oci-archive:" + filepath.Join(root, "_output", "image.oci.tar")
	out, err := podmanCmd(append(append([]string{"run", "--rm"}, limits...), image, "--version")...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman run %s --version: %v\n%s", image, err, out)
	}
	if !strings.Contains(string(out), "adapter "+version+" ") {
		t.Errorf("podman run ... --version = %q, want version %s", out, version)
	}

	env := framework.New(t, framework.Config{})
	mount := t.TempDir()
	kubeconfig, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"kubeconfig":  kubeconfig,
		"config.yaml": []byte("rules: []\n"),
	} {
		// Readable by the image's user (65532), which owns nothing here.
		if err := os.WriteFile(filepath.Join(mount, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(mount, 0o755); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("promscaler-e2e-%d", port)
	args := append(append([]string{"run", "-d", "--rm", "--name", name}, limits...), "--network=host", "-v", mount+":/config:ro", image,
		"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--cert-dir=/tmp/cert",
		"--lister-kubeconfig=/config/kubeconfig", "--authentication-kubeconfig=/config/kubeconfig",
		"--authorization-kubeconfig=/config/kubeconfig",
		"--prometheus-url=http://127.0.0.1:9", "--config=/config/config.yaml")
	if out, err := podmanCmd(args...).CombinedOutput(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(podman, append(slices.Clone(global), "logs", "--tail", "30", name)...).CombinedOutput()
			t.Logf("container log:\n%s", logs)
		}
		_ = exec.Command(podman, append(slices.Clone(global), "rm", "-f", "-t", "2", name)...).Run()
	})
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	eventually(t, ctx, time.Minute, "the containerized adapter's /healthz", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
	user, err := podmanCmd("inspect", "--format", "{{.Config.User}}", name).CombinedOutput()
	if err != nil || strings.TrimSpace(string(user)) != "65532:65532" {
		t.Errorf("container user %q (%v), want 65532:65532", user, err)
	}
}
