package seal

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestSealCoversEveryField(t *testing.T) {
	s, err := New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	f := Fields{Namespace: "c1", Name: "app-01234", AppNamespace: "argocd", AppName: "app", ApplicationSet: "argocd/set"}
	sig := s.Sign(f)
	if !s.Verify(f, sig) {
		t.Fatal("a seal does not verify its own fields")
	}
	for name, edit := range map[string]func(*Fields){
		"namespace":      func(f *Fields) { f.Namespace = "c2" },
		"name":           func(f *Fields) { f.Name = "addon-x-deploy-0" },
		"app namespace":  func(f *Fields) { f.AppNamespace = "team-b" },
		"app name":       func(f *Fields) { f.AppName = "other" },
		"ApplicationSet": func(f *Fields) { f.ApplicationSet = "team-b/set" },
		"shifted fields": func(f *Fields) { f.Namespace, f.Name = "c1app-01234", "" },
	} {
		g := f
		edit(&g)
		if s.Verify(g, sig) {
			t.Errorf("the seal still verifies with another %s", name)
		}
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	if other.Verify(f, sig) {
		t.Error("a seal verifies under another key")
	}
	if s.Verify(f, "") || s.Verify(f, "not base64!") {
		t.Error("an empty or malformed seal verifies")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Error("a short key is accepted")
	}
}

// TestProjectSealIsNoApplicationSeal: a project ManifestWork's seal covers its place and its
// AppProject, and never passes for an Application's ManifestWork's seal at the same place (nor
// the other way round); an Application's seal is what it was before projects had seals.
func TestProjectSealIsNoApplicationSeal(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, _ := New(key)
	project := Fields{Namespace: "c1", Name: "team.appproject", Project: "team"}
	app := Fields{Namespace: "c1", Name: "team.appproject"}
	if !s.Verify(project, s.Sign(project)) {
		t.Fatal("a project's seal does not verify its own fields")
	}
	if s.Verify(app, s.Sign(project)) || s.Verify(project, s.Sign(app)) {
		t.Error("a project's seal and an Application's seal at the same place pass for each other")
	}
	other := project
	other.Project = "other"
	if s.Verify(other, s.Sign(project)) {
		t.Error("the seal still verifies with another AppProject")
	}
	// The seal of an Application's ManifestWork as made before projects had seals of their own.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("v1\x00c1\x00app-01234\x00argocd\x00app\x00"))
	before := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	if !s.Verify(Fields{Namespace: "c1", Name: "app-01234", AppNamespace: "argocd", AppName: "app"}, before) {
		t.Error("an Application's seal made before projects had seals no longer verifies")
	}
}

func TestLoadOrCreateKeyKeepsTheFirstKey(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	ref := types.NamespacedName{Namespace: "ns", Name: "seal"}
	a, err := LoadOrCreateKey(context.Background(), c, c, ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateKey(context.Background(), c, c, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 32 || !bytes.Equal(a, b) {
		t.Errorf("keys %x and %x: a restart must find the key it made", a, b)
	}
}
