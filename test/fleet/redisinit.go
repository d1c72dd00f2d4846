package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// RunAsServiceAccount runs the argocd binary with args against cluster, authenticated as a
// ServiceAccount of that cluster by a token from the TokenRequest API, as a container of a pod
// running as that ServiceAccount would be: what the ServiceAccount's RBAC refuses fails here too.
// It is how the fleet, which has no kubelet, runs the commands of init containers and Jobs.
// It returns the command's combined output.
func (f *Fleet) RunAsServiceAccount(ctx context.Context, cluster, namespace, serviceAccount string, args ...string) (string, error) {
	cp, err := f.plane(cluster)
	if err != nil {
		return "", err
	}
	bin, _, err := ArgoCDBinaries()
	if err != nil {
		return "", err
	}
	kc, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return "", err
	}
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("%s: token for ServiceAccount %s/%s: %w", cluster, namespace, serviceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: cp.url, CertificateAuthorityData: cp.ca.certPEM}
	cfg.AuthInfos[serviceAccount] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: serviceAccount, Namespace: namespace}
	cfg.CurrentContext = cluster
	dir, err := os.MkdirTemp(cp.dir, "sa-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "argocd"), append(args, "--kubeconfig="+path)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "KUBECONFIG="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: argocd %v as %s/%s: %w: %s", cluster, args, namespace, serviceAccount, err, out)
	}
	return string(out), nil
}
