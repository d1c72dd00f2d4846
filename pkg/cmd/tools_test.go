package cmd

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// TestTemplateReloaderArgsAreAcceptedByTheBinary renders the AddOnTemplate and runs this
// binary's command line with exactly the args its cert-reloader sidecar gets, so the template
// and the binary can never drift apart.
func TestTemplateReloaderArgsAreAcceptedByTheBinary(t *testing.T) {
	ca, err := pki.NewCA("test", 24*time.Hour, timeNow())
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := addon.BuildAddOnTemplate(addon.TemplateInput{
		AddonName: "argocd-agent-addon", TemplateName: "t", SignerName: "open-cluster-management.io/argocd-agent-addon",
		SigningCANamespace: "argocd", CABundlePEM: ca.CertPEM, Mode: "managed",
	})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, m := range tmpl.Spec.AgentSpec.Workload.Manifests {
		var d appsv1.Deployment
		if json.Unmarshal(m.Raw, &d) != nil || d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "cert-reloader" {
				args = c.Args
			}
		}
	}
	if len(args) == 0 {
		t.Fatal("the template has no cert-reloader container")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop right after the flags are parsed
	root := NewRootCommand()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("the binary rejects the template's reloader args %v: %v", args, err)
	}
}

func timeNow() time.Time { return time.Now() }
