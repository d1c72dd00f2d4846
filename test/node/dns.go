package node

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterDNSIP is the kube-dns Service's address, which every kubelet hands its pods as their
// nameserver: the tenth address of the fleet's service range 10.0.0.0/24 (the API servers'
// --service-cluster-ip-range), as kubeadm takes the tenth of its own.
const ClusterDNSIP = "10.0.0.10"

// ClusterDomain is the kubelet's clusterDomain and the zone CoreDNS serves.
const ClusterDomain = "cluster.local"

// coreDNSUID is the user upstream's image runs as (distroless "nonroot").
const coreDNSUID = 65532

// corefile serves the cluster's zones from the API server and nothing else: there is no
// forward plugin, so a name outside them is answered SERVFAIL here and no query ever leaves
// the machine. The rest is kubeadm's Corefile.
var corefile = fmt.Sprintf(`.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    cache 30 {
        disable success %[1]s
        disable denial %[1]s
    }
    loop
    reload
}
`, ClusterDomain)

// BuildCoreDNSImage writes an image of binDir/coredns (hack/node-binaries.sh builds it) into
// dir, as upstream's image is laid out: /coredns as the entrypoint, run as 65532. It returns
// the tarball for Node.ImportImage and the image's name, tagged with the binary's version.
func BuildCoreDNSImage(binDir, dir string) (tarPath, ref string, err error) {
	bin := filepath.Join(binDir, "coredns")
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s -version: %w", bin, err)
	}
	m := regexp.MustCompile(`CoreDNS-(\d+\.\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("%s -version printed no version: %q", bin, out)
	}
	ref = "localhost/coredns:v" + string(m[1])
	tarPath = filepath.Join(dir, "coredns.tar")
	if err := WriteImage(tarPath, ImageSpec{Ref: ref, Binary: bin, UID: coreDNSUID}); err != nil {
		return "", "", err
	}
	return tarPath, ref, nil
}

// ClusterDNSObjects are the objects of a kubeadm cluster's DNS add-on, running image (from
// BuildCoreDNSImage, imported on the node): the coredns ServiceAccount with the read access
// the kubernetes plugin needs, the Corefile, the Deployment and the kube-dns Service on
// ClusterDNSIP. Create them in order. CoreDNS finds the API server through the kubernetes
// Service, so the API server's serving certificate must name that Service's ClusterIP.
func ClusterDNSObjects(image string) []client.Object {
	const ns = metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta("coredns"),
	}
	// The kubernetes plugin lists and watches Services and EndpointSlices for its records, and
	// Namespaces and Pods for some of its options; kubeadm grants the same.
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	config := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta("coredns"),
		Data:       map[string]string{"Corefile": corefile},
	}

	yes, no := true, false
	// One replica: a fleet cluster has one node, where kubeadm's two would only share it.
	replicas := int32(1)
	maxUnavailable := intstr.FromInt32(1)
	deployment := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: sa.Name,
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
					},
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					// CoreDNS itself resolves nothing through the node: the kubelet's
					// resolvConf is empty, so this gives it no nameserver at all.
					DNSPolicy: corev1.DNSDefault,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &yes,
						// Upstream's image grants /coredns cap_net_bind_service as a file
						// capability; a one-binary image has none, and a capability the
						// runtime adds does not survive exec for a non-root user. Port 53 is
						// opened to unprivileged users instead, in the pod's netns only (a
						// sysctl the kubelet allows by default).
						Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
					},
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Resources: corev1.ResourceRequirements{
							Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: corev1.ResourceList{
								corev1.ResourceCPU:    resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("70Mi"),
							},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
							{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
							{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("liveness-probe"), Scheme: corev1.URISchemeHTTP}},
							InitialDelaySeconds: 60,
							TimeoutSeconds:      5,
							SuccessThreshold:    1,
							FailureThreshold:    5,
						},
						// Every 2 s rather than the default 10 s: clusters of the fleet wait
						// for their DNS before anything else starts.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("readiness-probe"), Scheme: corev1.URISchemeHTTP}},
							PeriodSeconds: 2,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &no,
							Capabilities: &corev1.Capabilities{
								Add:  []corev1.Capability{"NET_BIND_SERVICE"},
								Drop: []corev1.Capability{"ALL"},
							},
							ReadOnlyRootFilesystem: &yes,
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "config-volume",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: config.Name},
							Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
						}},
					}},
				},
			},
		},
	}
	service := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kube-dns", Namespace: ns,
			Labels: map[string]string{
				"k8s-app":                       "kube-dns",
				"kubernetes.io/cluster-service": "true",
				"kubernetes.io/name":            "CoreDNS",
			},
			Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: ClusterDNSIP,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	return []client.Object{sa, role, binding, config, deployment, service}
}
