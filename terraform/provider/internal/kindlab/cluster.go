package kindlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
)

// ErrDockerUnavailable means no Docker daemon answers; kind needs one.
var ErrDockerUnavailable = errors.New("no Docker daemon answers")

// Lab manages kind clusters on the local Docker daemon.
type Lab struct {
	kind   *cluster.Provider
	docker string
}

// New returns a Lab that drives the docker CLI found on PATH.
func New() *Lab {
	return &Lab{kind: cluster.NewProvider(cluster.ProviderWithDocker()), docker: "docker"}
}

// CheckDocker fails with ErrDockerUnavailable, and what docker said, when
// the daemon does not answer.
func (l *Lab) CheckDocker(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, l.docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w (docker info: %s): start dockerd (hack/ensure-docker.sh does it on a lab machine)", ErrDockerUnavailable, firstLine(out, err))
	}
	return nil
}

// ImageID returns the local image ID of image, or an error that says how to
// get the image when it is missing.
func (l *Lab) ImageID(ctx context.Context, image string) (string, error) {
	out, err := exec.CommandContext(ctx, l.docker, "image", "inspect", "-f", "{{.Id}}", image).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("image %s is not in the local Docker daemon (%s): build it (make kind-image for the node image, make images for the components) or docker load it", image, firstLine(out, err))
	}
	return strings.TrimSpace(string(out)), nil
}

// Exists reports whether a kind cluster called name exists.
func (l *Lab) Exists(name string) (bool, error) {
	names, err := l.kind.List()
	if err != nil {
		return false, fmt.Errorf("listing kind clusters: %w", err)
	}
	return slices.Contains(names, name), nil
}

// Kubeconfig returns the kubeconfig of cluster name, for use from this host.
func (l *Lab) Kubeconfig(name string) (string, error) {
	cfg, err := l.kind.KubeConfig(name, false)
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig of cluster %q: %w", name, err)
	}
	return cfg, nil
}

// NodeImageID returns the image ID the control-plane node runs.
func (l *Lab) NodeImageID(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, l.docker, "inspect", "-f", "{{.Image}}", name+"-control-plane").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("inspecting the control-plane node of %q: %s", name, firstLine(out, err))
	}
	return strings.TrimSpace(string(out)), nil
}

// Create creates the cluster of spec, gives it pod networking, loads images
// into its nodes and waits up to wait for every node and CoreDNS to be
// Ready. It returns the kubeconfig. A failed create leaves no cluster
// behind.
func (l *Lab) Create(ctx context.Context, spec Spec, images []string, wait time.Duration) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
	}
	if err := l.CheckDocker(ctx); err != nil {
		return "", err
	}
	if _, err := l.ImageID(ctx, spec.NodeImage); err != nil {
		return "", fmt.Errorf("node_image: %w", err)
	}
	for _, img := range images {
		if _, err := l.ImageID(ctx, img); err != nil {
			return "", fmt.Errorf("load_images: %w", err)
		}
	}
	exists, err := l.Exists(spec.Name)
	if err != nil {
		return "", err
	}
	if exists {
		return "", fmt.Errorf("a kind cluster named %q already exists: import it (terraform import) or delete it (kind delete cluster --name %s)", spec.Name, spec.Name)
	}
	// kind writes the kubeconfig somewhere; keep it out of the user's
	// ~/.kube/config.
	tmp, err := os.CreateTemp("", "xilaguard-kubeconfig-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	err = l.kind.Create(spec.Name,
		cluster.CreateWithV1Alpha4Config(spec.KindConfig()),
		cluster.CreateWithNodeImage(spec.NodeImage),
		cluster.CreateWithKubeconfigPath(tmp.Name()),
		cluster.CreateWithRetain(false),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false),
	)
	if err != nil {
		return "", fmt.Errorf("kind could not create cluster %q from %s: %w", spec.Name, spec.NodeImage, withOutput(err))
	}
	kubeconfig, err := l.finish(ctx, spec, images, wait)
	if err != nil {
		if derr := l.Delete(spec.Name); derr != nil {
			err = errors.Join(err, derr)
		}
		return "", err
	}
	return kubeconfig, nil
}

func (l *Lab) finish(ctx context.Context, spec Spec, images []string, wait time.Duration) (string, error) {
	kubeconfig, err := l.Kubeconfig(spec.Name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := l.ConfigureNetwork(ctx, spec, kubeconfig); err != nil {
		return "", err
	}
	if err := l.LoadImages(ctx, spec.Name, images); err != nil {
		return "", err
	}
	if err := WaitReady(ctx, kubeconfig, spec.Nodes()); err != nil {
		return "", fmt.Errorf("cluster %q did not become ready within %s: %w", spec.Name, wait, err)
	}
	return kubeconfig, nil
}

// ConfigureNetwork gives every node of the cluster of spec pod networking
// (see NetworkCommand), once each of them has registered and been given a
// pod CIDR by the controller-manager. Running it again converges.
func (l *Lab) ConfigureNetwork(ctx context.Context, spec Spec, kubeconfig string) error {
	nodeList, err := l.kind.ListNodes(spec.Name)
	if err != nil {
		return fmt.Errorf("listing the nodes of %q: %w", spec.Name, err)
	}
	if want := spec.Nodes(); len(nodeList) != want {
		return fmt.Errorf("pod networking of %q: %d node containers, want %d (1 control plane, %d workers): delete the cluster (kind delete cluster --name %s) and apply again", spec.Name, len(nodeList), want, spec.Workers, spec.Name)
	}
	byName := map[string]nodes.Node{}
	names := make([]string, 0, len(nodeList))
	for _, n := range nodeList {
		byName[n.String()] = n
		names = append(names, n.String())
	}
	slices.Sort(names)
	cs, err := clientset(kubeconfig)
	if err != nil {
		return err
	}
	all, err := waitNodeNetworks(ctx, cs, names)
	if err != nil {
		return fmt.Errorf("pod networking of %q: %w", spec.Name, err)
	}
	for _, nn := range all {
		argv := NetworkCommand(nn, all, spec.PodSubnet)
		var stderr bytes.Buffer
		cmd := byName[nn.Name].CommandContext(ctx, argv[0], argv[1:]...).SetStderr(&stderr)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pod networking on node %s: %w: %s", nn.Name, err, strings.TrimSpace(stderr.String()))
		}
	}
	return nil
}

// LoadImages loads local Docker images into every node of cluster name,
// skipping nodes that already hold the same image ID.
func (l *Lab) LoadImages(ctx context.Context, name string, images []string) error {
	if len(images) == 0 {
		return nil
	}
	nodeList, err := l.kind.ListNodes(name)
	if err != nil {
		return fmt.Errorf("listing the nodes of %q: %w", name, err)
	}
	for _, img := range images {
		id, err := l.ImageID(ctx, img)
		if err != nil {
			return fmt.Errorf("load_images: %w", err)
		}
		var missing []nodes.Node
		for _, n := range nodeList {
			if got, err := nodeutils.ImageID(n, img); err != nil || got != id {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if err := l.loadImage(ctx, img, missing); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) loadImage(ctx context.Context, img string, targets []nodes.Node) error {
	f, err := os.CreateTemp("", "xilaguard-image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	save := exec.CommandContext(ctx, l.docker, "save", img)
	save.Stdout = f
	var stderr bytes.Buffer
	save.Stderr = &stderr
	if err := save.Run(); err != nil {
		return fmt.Errorf("docker save %s: %w: %s", img, err, strings.TrimSpace(stderr.String()))
	}
	for _, n := range targets {
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		if err := nodeutils.LoadImageArchive(n, f); err != nil {
			return fmt.Errorf("loading %s into node %s: %w", img, n, withOutput(err))
		}
	}
	return nil
}

// Delete deletes cluster name; a missing cluster is not an error.
func (l *Lab) Delete(name string) error {
	tmp, err := os.CreateTemp("", "xilaguard-kubeconfig-*")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := l.kind.Delete(name, tmp.Name()); err != nil {
		return fmt.Errorf("deleting kind cluster %q: %w", name, withOutput(err))
	}
	return nil
}

// withOutput adds what a failed kind command printed to its error.
func withOutput(err error) error {
	var runErr *kindexec.RunError
	if errors.As(err, &runErr) && len(runErr.Output) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(runErr.Output)))
	}
	return err
}

func firstLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if s == "" {
		return err.Error()
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Workers counts the worker nodes of cluster name.
func (l *Lab) Workers(name string) (int, error) {
	nodeList, err := l.kind.ListNodes(name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range nodeList {
		if role, err := node.Role(); err == nil && role == "worker" {
			n++
		}
	}
	return n, nil
}

// NodeImageName returns the image name the control-plane node was created
// from.
func (l *Lab) NodeImageName(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, l.docker, "inspect", "-f", "{{.Config.Image}}", name+"-control-plane").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("inspecting the control-plane node of %q: %s", name, firstLine(out, err))
	}
	return strings.TrimSpace(string(out)), nil
}
