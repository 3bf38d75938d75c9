// Package deploy checks the deployment files beside it without a container
// runtime or a cluster: the Kubernetes manifests decode strictly into the
// API's own types (an unknown or misspelt field is an error), and the
// compose file, the systemd unit and the Dockerfile hold together with each
// other and with needled (the names, paths and drain timeouts they share).
// It is its own module so that the main one does not depend on the
// Kubernetes API; .ci/deploy-test.sh runs it.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests decodes every document of every file in deploy/k8s strictly
// into the type its kind names.
type manifests struct {
	sets     []appsv1.StatefulSet
	services []corev1.Service
	budgets  []policyv1.PodDisruptionBudget
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	var m manifests
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(raw) {
			if err := m.add(doc); err != nil {
				t.Errorf("%s: document %d: %v", f, i+1, err)
			}
		}
	}
	return m
}

func splitDocs(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(s, "")
}

func (m *manifests) add(doc []byte) error {
	var head struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 StatefulSet":
		var s appsv1.StatefulSet
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return err
		}
		m.sets = append(m.sets, s)
	case "v1 Service":
		var s corev1.Service
		if err := yaml.UnmarshalStrict(doc, &s); err != nil {
			return err
		}
		m.services = append(m.services, s)
	case "policy/v1 PodDisruptionBudget":
		var p policyv1.PodDisruptionBudget
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return err
		}
		m.budgets = append(m.budgets, p)
	default:
		return fmt.Errorf("unexpected %s %s", head.APIVersion, head.Kind)
	}
	return nil
}

func TestKubernetes(t *testing.T) {
	m := loadManifests(t)
	if len(m.sets) != 1 || len(m.budgets) != 1 || len(m.services) != 2 {
		t.Fatalf("got %d StatefulSets, %d PodDisruptionBudgets, %d Services; want 1, 1, 2",
			len(m.sets), len(m.budgets), len(m.services))
	}
	set := m.sets[0]
	pod := set.Spec.Template
	if !matches(set.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", set.Spec.Selector.MatchLabels, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}

	// Joining: every pod joins pod 0 through the headless Service, and
	// knows its own name.
	var headless *corev1.Service
	for i, s := range m.services {
		if s.Name == set.Spec.ServiceName {
			headless = &m.services[i]
		}
	}
	switch {
	case headless == nil:
		t.Fatalf("no Service named %q (the StatefulSet's serviceName)", set.Spec.ServiceName)
	case headless.Spec.ClusterIP != corev1.ClusterIPNone:
		t.Errorf("Service %s: clusterIP %q; want None (headless)", headless.Name, headless.Spec.ClusterIP)
	case !headless.Spec.PublishNotReadyAddresses:
		t.Errorf("Service %s: publishNotReadyAddresses is false: pod names would not resolve until ready, and no pod is ready before it joins", headless.Name)
	}
	if want := fmt.Sprintf("%s-0.%s:%d", set.Name, set.Spec.ServiceName, containerPort(t, c, "p2p")); env["NEEDLE_JOIN"].Value != want {
		t.Errorf("NEEDLE_JOIN = %q; want %q", env["NEEDLE_JOIN"].Value, want)
	}
	if self := env["NEEDLE_SELF_NAME"].ValueFrom; self == nil || self.FieldRef == nil || self.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("NEEDLE_SELF_NAME is not the pod's metadata.name")
	}
	if want := fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", containerPort(t, c, "p2p")); env["NEEDLE_LISTEN"].Value != want {
		t.Errorf("NEEDLE_LISTEN = %q; want %q", env["NEEDLE_LISTEN"].Value, want)
	}
	if want := fmt.Sprintf("0.0.0.0:%d", containerPort(t, c, "api")); env["NEEDLE_HTTP"].Value != want {
		t.Errorf("NEEDLE_HTTP = %q; want %q", env["NEEDLE_HTTP"].Value, want)
	}

	// Storage and secrets: a volume per pod at the data dir, the key and
	// the token from a Secret.
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	if len(set.Spec.VolumeClaimTemplates) != 1 || mounts[env["NEEDLE_DATA"].Value] != set.Spec.VolumeClaimTemplates[0].Name {
		t.Errorf("NEEDLE_DATA %q is not on the StatefulSet's volume claim", env["NEEDLE_DATA"].Value)
	}
	for _, name := range []string{"NEEDLE_SWARM_KEY", "NEEDLE_API_TOKEN_FILE"} {
		dir := filepath.Dir(env[name].Value)
		vol := volume(pod.Spec, mounts[dir])
		if vol == nil || vol.Secret == nil {
			t.Errorf("%s = %q is not in a mounted Secret", name, env[name].Value)
		}
	}

	// Health and stopping.
	probe := c.ReadinessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" || probe.HTTPGet.Port != intstr.FromString("api") {
		t.Errorf("readiness probe %+v; want GET /healthz on the api port", probe)
	}
	drain := duration(t, "NEEDLE_DRAIN_TIMEOUT", env["NEEDLE_DRAIN_TIMEOUT"].Value)
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	if grace < drain+10*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v is not at least 10 s above the drain timeout %v: a stop would cut the drain short", grace, drain)
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("the pod does not run as a non-root user")
	}
	// With the default (Always) the kubelet makes every file of the
	// volume group-readable on every mount: identity.key 0660, and a WARN
	// at each restart (deploy audit s77, finding 4).
	if sc != nil && sc.FSGroup != nil && (sc.FSGroupChangePolicy == nil || *sc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch) {
		t.Errorf("fsGroupChangePolicy %v; want OnRootMismatch: the kubelet would re-chmod the data on every start", sc.FSGroupChangePolicy)
	}

	// A majority of each partition's 3 replicas stays up.
	pdb := m.budgets[0]
	if !matches(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the pods", pdb.Spec.Selector.MatchLabels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v; want 1", pdb.Spec.MaxUnavailable)
	}

	// The API Service reaches the pods' api port.
	for _, s := range m.services {
		if !matches(s.Spec.Selector, pod.Labels) {
			t.Errorf("Service %s selects %v, not the pods", s.Name, s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			containerPort(t, c, p.TargetPort.String())
		}
	}
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("container %s has no port named %q", c.Name, name)
	return 0
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i, v := range spec.Volumes {
		if v.Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s = %q: %v", what, s, err)
	}
	return d
}

// compose is the part of a compose file the checks read.
type compose struct {
	Services map[string]struct {
		Image           string                                `json:"image"`
		Build           any                                   `json:"build"`
		Entrypoint      []string                              `json:"entrypoint"`
		Environment     map[string]string                     `json:"environment"`
		Ports           []string                              `json:"ports"`
		Volumes         []string                              `json:"volumes"`
		DependsOn       map[string]struct{ Condition string } `json:"depends_on"`
		StopGracePeriod string                                `json:"stop_grace_period"`
		StopSignal      string                                `json:"stop_signal"`
		Hostname        string                                `json:"hostname"`
		Restart         string                                `json:"restart"`
		Networks        []string                              `json:"networks"`
	} `json:"services"`
	Volumes  map[string]any `json:"volumes"`
	Networks map[string]any `json:"networks"`
}

func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	keys, ok := c.Services["keys"]
	if !ok {
		t.Fatal("no service keys (writes the swarm key and the token once)")
	}
	peers := slices.Sorted(func(yield func(string) bool) {
		for name := range c.Services {
			if name != "keys" && !yield(name) {
				return
			}
		}
	})
	if want := []string{"needle-0", "needle-1", "needle-2"}; !slices.Equal(peers, want) {
		t.Fatalf("peer services %v; want %v", peers, want)
	}
	keygen := strings.Join(keys.Entrypoint, " ")
	if !strings.HasPrefix(keygen, "needle keygen --if-missing") {
		t.Errorf("keys runs %q; want needle keygen --if-missing", keygen)
	}
	published, dataVolumes := 0, map[string]string{}
	for _, name := range peers {
		s := c.Services[name]
		env := s.Environment
		if s.Image != keys.Image {
			t.Errorf("%s: image %q; want keys' %q", name, s.Image, keys.Image)
		}
		if s.DependsOn["keys"].Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for keys to complete", name)
		}
		if env["NEEDLE_JOIN"] != "needle-0:4001" || env["NEEDLE_SELF_NAME"] != name || s.Hostname != name {
			t.Errorf("%s: NEEDLE_JOIN %q, NEEDLE_SELF_NAME %q, hostname %q; want needle-0:4001 and its own name",
				name, env["NEEDLE_JOIN"], env["NEEDLE_SELF_NAME"], s.Hostname)
		}
		for _, v := range []string{"NEEDLE_SWARM_KEY", "NEEDLE_API_TOKEN_FILE"} {
			if !strings.Contains(keygen, env[v]) || env[v] == "" {
				t.Errorf("%s: %s = %q is not a file keys writes (%s)", name, v, env[v], keygen)
			}
		}
		drain := duration(t, name+" NEEDLE_DRAIN_TIMEOUT", env["NEEDLE_DRAIN_TIMEOUT"])
		if grace := duration(t, name+" stop_grace_period", s.StopGracePeriod); grace < drain+5*time.Second {
			t.Errorf("%s: stop_grace_period %v is not above the drain timeout %v: a stop would cut the drain short", name, grace, drain)
		}
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if _, named := c.Volumes[src]; !named {
				t.Errorf("%s: volume %q is not a named volume", name, v)
			}
			if dst == "/var/lib/needle" {
				if other, dup := dataVolumes[src]; dup {
					t.Errorf("%s and %s share the data volume %s", name, other, src)
				}
				dataVolumes[src] = name
			}
		}
		for _, p := range s.Ports {
			published++
			if !strings.HasPrefix(p, "127.0.0.1:") || !strings.HasSuffix(p, ":7070") {
				t.Errorf("%s publishes %q; want 127.0.0.1:PORT:7070", name, p)
			}
		}
	}
	if len(dataVolumes) != 3 {
		t.Errorf("%d peers have a data volume; want 3", len(dataVolumes))
	}
	if published != 1 {
		t.Errorf("%d published ports; want the API of one peer", published)
	}
}

// unit is a systemd unit file: section -> key -> values, in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u, section := unit{}, ""
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", path, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, "systemd/needled.service")
	s := u["Service"]
	for k, want := range map[string]string{
		"DynamicUser": "yes", "User": "needle", "StateDirectory": "needle", "ProtectSystem": "strict",
		"Restart": "on-failure", "KillSignal": "SIGTERM", "NoNewPrivileges": "yes",
		// A call SystemCallFilter= refuses fails instead of killing the
		// peer or its exec task with SIGSYS (SRE audit, finding 8).
		"SystemCallErrorNumber": "EPERM",
		// systemctl reload re-reads the TLS certificate as docs/operations.md
		// says SIGHUP does (deploy audit s77, finding 5: the unit had no
		// ExecReload=, and a reload failed).
		"ExecReload": "/bin/kill -HUP $MAINPID",
		// needled exits 2 on a configuration error: restarting it every
		// 2 s would fail the same way and fill the journal.
		"RestartPreventExitStatus": "2",
	} {
		if got := s[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %v; want %s", k, got, want)
		}
	}
	envFile, err := os.ReadFile("systemd/needled.env")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NEEDLE_DRAIN_TIMEOUT=(\S+)$`).FindSubmatch(envFile)
	if m == nil {
		t.Fatal("needled.env sets no NEEDLE_DRAIN_TIMEOUT")
	}
	drain := duration(t, "NEEDLE_DRAIN_TIMEOUT", string(m[1]))
	if len(s["TimeoutStopSec"]) != 1 {
		t.Fatal("no TimeoutStopSec")
	}
	if stop := duration(t, "TimeoutStopSec", s["TimeoutStopSec"][0]); stop < drain+5*time.Second {
		t.Errorf("TimeoutStopSec %v is not above the drain timeout %v", stop, drain)
	}
	exec := strings.Join(s["ExecStart"], " ")
	for _, cred := range s["LoadCredential"] {
		name, _, _ := strings.Cut(cred, ":")
		if !strings.Contains(exec, "${CREDENTIALS_DIRECTORY}/"+name) {
			t.Errorf("credential %s is loaded but ExecStart does not use it", name)
		}
	}
	for _, line := range bytes.Split(envFile, []byte("\n")) {
		if k, _, ok := bytes.Cut(line, []byte("=")); ok && !bytes.HasPrefix(line, []byte("#")) && !bytes.HasPrefix(k, []byte("NEEDLE_")) {
			t.Errorf("needled.env sets %s, which needled does not read", k)
		}
	}
}

// The unit sets no ProcSubset=pid: it hides /proc/meminfo and
// /proc/sys/vm/overcommit_memory, without which needled maps no heap
// ahead for huge pages (internal/hugepages.capReserve), and
// /proc/sys/net/core/somaxconn, without which Go's listeners take a
// backlog of 128.
func TestSystemdUnitShowsProcSystemFiles(t *testing.T) {
	s := parseUnit(t, "systemd/needled.service")["Service"]
	if v := s["ProcSubset"]; len(v) > 0 && v[len(v)-1] != "all" {
		t.Errorf("ProcSubset=%s hides /proc/meminfo and /proc/sys from needled", v[len(v)-1])
	}
	if v := s["ProtectProc"]; len(v) != 1 || v[0] != "invisible" {
		t.Errorf("ProtectProc = %v; want invisible (the other users' processes hidden)", v)
	}
}

// A members file reaches the service through a read-only bind of the
// directory that holds it, optional ("-": no directory, no bind), and
// not as a credential: a credential is a copy made at start, and the
// SIGHUP (systemctl reload) that shuts a host out would re-read the copy.
// A bind of the file itself would keep the old file after an edit that
// replaces it (sed -i, config management). needled.env names the file
// under the bind's target.
func TestSystemdUnitMembers(t *testing.T) {
	s := parseUnit(t, "systemd/needled.service")["Service"]
	for _, cred := range s["LoadCredential"] {
		if name, _, _ := strings.Cut(cred, ":"); strings.Contains(name, "members") {
			t.Errorf("LoadCredential=%s: a copy made at start, which a reload does not renew", cred)
		}
	}
	target := ""
	for _, v := range s["BindReadOnlyPaths"] {
		for _, b := range strings.Fields(v) {
			src, dst, _ := strings.Cut(b, ":")
			if src == "-/etc/needle/members.d" {
				target, _, _ = strings.Cut(dst, ":")
			}
		}
	}
	if target == "" || !strings.HasPrefix(target, "/run/") || strings.HasPrefix(target, "/etc/needle") {
		t.Fatalf("BindReadOnlyPaths = %v; want -/etc/needle/members.d bound outside the root-only /etc/needle", s["BindReadOnlyPaths"])
	}
	if s := s["ExecReload"]; len(s) != 1 || !strings.Contains(s[0], "-HUP") {
		t.Errorf("ExecReload = %v; want a SIGHUP, which re-reads the members file", s)
	}
	envFile, err := os.ReadFile("systemd/needled.env")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#?NEEDLE_MEMBERS=(\S+)$`).FindSubmatch(envFile)
	if m == nil {
		t.Fatal("needled.env names no NEEDLE_MEMBERS")
	}
	if dir, file := path.Split(string(m[1])); dir != target+"/" || file == "" {
		t.Errorf("NEEDLE_MEMBERS=%s is not a file of the bind's target %s", m[1], target)
	}
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	stages := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(df, -1)
	if len(stages) != 2 {
		t.Fatalf("%d stages; want 2 (build, run)", len(stages))
	}
	build, run := df[stages[0][0]:stages[1][0]], df[stages[1][0]:]
	if !strings.Contains(build, "make release") {
		t.Error("the build stage does not build with make release")
	}
	user := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindStringSubmatch(run)
	if user == nil || user[1] == "0" {
		t.Errorf("the image does not run as a numeric non-root user (USER %v)", user)
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD \["needle", "health"`).MatchString(run) {
		t.Error("no HEALTHCHECK running needle health")
	}
	m := regexp.MustCompile(`NEEDLE_DRAIN_TIMEOUT=(\S+)`).FindStringSubmatch(run)
	if m == nil {
		t.Fatal("the image sets no NEEDLE_DRAIN_TIMEOUT")
	}
	// docker stop waits 10 s before SIGKILL.
	if d := duration(t, "NEEDLE_DRAIN_TIMEOUT", m[1]); d >= 10*time.Second {
		t.Errorf("the image's drain timeout %v is not below docker stop's 10 s", d)
	}
	if !strings.Contains(run, `VOLUME ["/var/lib/needle"]`) || !strings.Contains(run, "NEEDLE_DATA=/var/lib/needle") {
		t.Error("the data dir is not a volume")
	}
	// The image's /var/lib/needle keeps the mode of the build stage's
	// /out/state/needle, copied as an entry of /out/state/ (COPY gives the
	// directory it copies into a mode of its own), and a new volume takes
	// the image's: 0755 (mkdir -p) made every container warn "chmod 700
	// it" (SRE audit, finding 10).
	if !regexp.MustCompile(`(install -d|mkdir( -p)?) -m 0?700 [^&\n]*/out/state/needle\b`).MatchString(build) {
		t.Error("the build stage does not make /out/state/needle, the image's data dir, mode 0700")
	}
	if !regexp.MustCompile(`(?m)^COPY --from=build --chown=65532:65532 /out/state/ /var/lib/$`).MatchString(run) {
		t.Error("the run stage does not copy /out/state/ (the data dir needle in it) into /var/lib/ owned by 65532")
	}
}

// Every host of a mesh needs the first host's swarm key and API token:
// with its own key a host is no member, with its own token it answers the
// other hosts' clients 401, and the unit does not start without
// api.token. So wherever the packages, the unit and the packaging docs
// tell to copy swarm.key, they name api.token with it (SRE audit, finding
// 2: they said to copy swarm.key alone).
func TestKeyAndTokenCopiedTogether(t *testing.T) {
	files := map[string]string{}
	for _, f := range []string{"deb/postinst", "deb/build.sh", "rpm/needle.spec", "systemd/needled.service", "systemd/needled.env"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(raw)
	}
	section := packagedSection(t)
	files["docs/operations.md (# Packaged)"] = section

	both := regexp.MustCompile(`(?i)swarm\.key,? and (/etc/needle/)?api\.token`)
	copyKey := regexp.MustCompile(`(?i)\bcop(y|ied)\b.{0,60}?swarm\.key`)
	tokenToo := regexp.MustCompile(`^,? and (/etc/needle/)?api\.token`)
	scpKey := regexp.MustCompile(`(?m)^.*\bscp\b.*swarm\.key.*$`)
	for name, text := range files {
		// Comments, Markdown and line breaks aside: the words as read.
		flat := regexp.MustCompile(`(?m)^\s*#+\s?`).ReplaceAllString(text, "")
		flat = strings.NewReplacer("`", "", "*", "").Replace(flat)
		flat = strings.Join(strings.Fields(flat), " ")
		if !both.MatchString(flat) {
			t.Errorf("%s does not say to copy swarm.key and api.token together", name)
		}
		for _, m := range copyKey.FindAllStringIndex(flat, -1) {
			if !tokenToo.MatchString(flat[m[1]:]) {
				t.Errorf("%s: %q names swarm.key without api.token", name, flat[m[0]:min(len(flat), m[1]+40)])
			}
		}
		for _, line := range scpKey.FindAllString(text, -1) {
			if !strings.Contains(line, "api.token") {
				t.Errorf("%s: %q copies swarm.key without api.token", name, line)
			}
		}
	}
}

// Every `docker run` of the image in the Dockerfile's comment and the
// docs starts: the image listens on all interfaces for libp2p and serves
// the API beyond loopback, so needled refuses to start without a token,
// and without a swarm key unless the peer listens on loopback. The
// Dockerfile's own example passed a token alone and its container exited
// at once (deploy audit s77, finding 1).
func TestDockerRunExamples(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{
		"Dockerfile":         regexp.MustCompile(`(?m)^#[ \t]?`).ReplaceAllString(string(df), ""),
		"docs/operations.md": string(ops),
	}
	found := 0
	for name, text := range texts {
		text = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, " ")
		for _, cmd := range regexp.MustCompile(`(?m)^\s*docker run .*$`).FindAllString(text, -1) {
			found++
			if !strings.Contains(cmd, "NEEDLE_API_TOKEN") {
				t.Errorf("%s: %q passes no API token: the image's NEEDLE_HTTP (0.0.0.0:7070) needs one", name, cmd)
			}
			if !strings.Contains(cmd, "NEEDLE_LISTEN=/ip4/127.0.0.1/") && !strings.Contains(cmd, "NEEDLE_SWARM_KEY") &&
				!strings.Contains(cmd, "NEEDLE_INSECURE_OPEN_MESH") {
				t.Errorf("%s: %q sets neither a loopback NEEDLE_LISTEN nor NEEDLE_SWARM_KEY: needled refuses to start an open mesh on the image's NEEDLE_LISTEN", name, cmd)
			}
		}
	}
	if found < 2 {
		t.Errorf("found %d docker run examples; want the Dockerfile's and docs/operations.md's", found)
	}
}

// With DynamicUser= systemd keeps StateDirectory= in /var/lib/private and
// makes /var/lib/needle a link to it (systemd.exec(5)): deleting the link
// alone keeps the peer's identity, which the next start links again, and
// a mesh that forgot the peer refuses it for good. So wherever the
// packages and their docs say where the data stays or how to delete it,
// they name /var/lib/private/needle (deploy audit s77, finding 2: they
// said /var/lib/needle).
func TestDynamicUserDataPath(t *testing.T) {
	u := parseUnit(t, "systemd/needled.service")
	if got := u["Service"]["DynamicUser"]; len(got) != 1 || got[0] != "yes" {
		t.Skipf("DynamicUser = %v: the data is where StateDirectory= says", got)
	}
	section := packagedSection(t)
	files := map[string]string{"docs/operations.md (# Packaged)": section}
	for _, f := range []string{"deb/postrm", "rpm/needle.spec", "systemd/needled.service"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(raw)
	}
	for name, text := range files {
		if !strings.Contains(text, "/var/lib/private/needle") {
			t.Errorf("%s does not say the data is in /var/lib/private/needle (DynamicUser=)", name)
		}
		for _, line := range regexp.MustCompile(`(?m)^.*\brm -[a-z]*r[a-z]* .*/var/lib/needle\b.*$`).FindAllString(text, -1) {
			if !strings.Contains(line, "/var/lib/private/needle") {
				t.Errorf("%s: %q deletes the link /var/lib/needle, not the data behind it", name, line)
			}
		}
	}
}

// packagedSection returns docs/operations.md's section "# Packaged", what
// an operator installing a package reads.
func packagedSection(t *testing.T) string {
	t.Helper()
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?ms)^# Packaged.*?(^# |\z)`).FindString(string(ops))
	if section == "" {
		t.Fatal("docs/operations.md has no section # Packaged")
	}
	return section
}

// The StatefulSet shows a members file: a ConfigMap mounted as a directory
// (never a subPath: the kubelet updates a directory's files after an edit,
// a subPath's never, and the SIGHUP that shuts a host out would re-read
// the old list), optional (a mesh starts without it), outside the
// read-only Secret mount, and a commented NEEDLE_MEMBERS naming a file of
// it to turn it on once the peers' ids are known.
func TestKubernetesMembers(t *testing.T) {
	m := loadManifests(t)
	if len(m.sets) != 1 {
		t.Fatalf("%d StatefulSets; want 1", len(m.sets))
	}
	pod := m.sets[0].Spec.Template.Spec
	vol := volume(pod, "members")
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Optional == nil || !*vol.ConfigMap.Optional {
		t.Fatalf("volume members = %+v; want an optional ConfigMap", vol)
	}
	var mount *corev1.VolumeMount
	for i, vm := range pod.Containers[0].VolumeMounts {
		if vm.Name == "members" {
			mount = &pod.Containers[0].VolumeMounts[i]
		}
	}
	switch {
	case mount == nil:
		t.Fatal("the members ConfigMap is not mounted")
	case mount.SubPath != "" || mount.SubPathExpr != "":
		t.Errorf("members mounted with a subPath: the kubelet never updates it, and a SIGHUP re-reads the old list")
	case !mount.ReadOnly:
		t.Errorf("members mounted read-write")
	case strings.HasPrefix(mount.MountPath+"/", "/etc/needle/"):
		t.Errorf("members mounted at %s, inside the Secret's read-only /etc/needle", mount.MountPath)
	}
	raw, err := os.ReadFile("k8s/statefulset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`(?m)^\s*#\s*- name: NEEDLE_MEMBERS\n\s*#\s+value: (\S+)$`).FindSubmatch(raw)
	if env == nil {
		t.Fatal("statefulset.yaml shows no NEEDLE_MEMBERS (commented: on once the ids are known)")
	}
	if mount != nil && path.Dir(string(env[1])) != mount.MountPath {
		t.Errorf("NEEDLE_MEMBERS %s is not a file of the ConfigMap's mount %s", env[1], mount.MountPath)
	}
	for _, e := range pod.Containers[0].Env {
		if e.Name == "NEEDLE_MEMBERS" {
			t.Errorf("NEEDLE_MEMBERS set: the pods would not start before the ConfigMap lists their ids")
		}
	}
}

// The compose file shows a members file too: a commented NEEDLE_MEMBERS
// in the peers' common environment, and on each peer a commented
// read-only bind of a directory (not of the file: an edit that replaces
// the file would not show) whose target holds it.
func TestComposeMembers(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`(?m)^\s*#\s*NEEDLE_MEMBERS: (\S+)$`).FindSubmatch(raw)
	if env == nil {
		t.Fatal("compose.yaml shows no NEEDLE_MEMBERS")
	}
	binds := regexp.MustCompile(`(?m)^\s*#\s*- (\./[^:\s]+):([^:\s]+):ro$`).FindAllSubmatch(raw, -1)
	if len(binds) != 3 {
		t.Fatalf("%d commented members binds; want one per peer (3)", len(binds))
	}
	for _, b := range binds {
		if string(b[2]) != path.Dir(string(env[1])) {
			t.Errorf("bind %s:%s: NEEDLE_MEMBERS %s is not a file of its target (bind the directory, not the file)", b[1], b[2], env[1])
		}
		if strings.HasPrefix(string(b[2])+"/", "/etc/needle/") {
			t.Errorf("bind target %s is inside the keys volume's /etc/needle", b[2])
		}
	}
	if !strings.Contains(string(raw), "kill -s HUP") {
		t.Error("compose.yaml does not say how to send the peers SIGHUP after an edit")
	}
}
