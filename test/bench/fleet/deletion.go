package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// deletion is what deleting the fleet's GitOpsCluster left behind.
type deletion struct {
	took time.Duration
	// secretsGone is when the last cluster secret went: a secret carries the certificate
	// recorder's finalizer, so it goes after its GitOpsCluster (0 if some never went).
	secretsGone                        time.Duration
	secretsLeft, ledgersLeft           int
	blocklistKeys, blocklistBytes      int
	blocklistStoredBytes, revokedCerts int
}

// deleteFleet deletes the GitOpsCluster and waits for its finalizer: every agent must be
// unregistered (no cluster secret left) and its certificates blocked.
func deleteFleet(ctx context.Context, env *testenv.Env) (deletion, error) {
	var d deletion
	c := env.Client
	start := time.Now()
	if err := c.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName}}); err != nil {
		return d, err
	}
	for deadline := start.Add(20 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, &v1alpha1.GitOpsCluster{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return d, err
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("the GitOpsCluster is still there 20 minutes after its deletion")
		}
	}
	d.took = time.Since(start)
	// The cluster secrets being deleted wait for the certificate recorder; wait while their
	// number falls.
	last, lastChange := -1, time.Now()
	for {
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(namespace), client.HasLabels{v1alpha1.LabelAgentName}); err != nil {
			return d, err
		}
		d.secretsLeft = len(secrets.Items)
		if d.secretsLeft == 0 {
			d.secretsGone = time.Since(start)
			break
		}
		if d.secretsLeft != last {
			last, lastChange = d.secretsLeft, time.Now()
		} else if time.Since(lastChange) > 30*time.Second {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var ledgers corev1.ConfigMapList
	if err := c.List(ctx, &ledgers, client.InNamespace(namespace), client.MatchingLabels{ledger.LabelRecord: ledger.RecordLedger}); err != nil {
		return d, err
	}
	d.ledgersLeft = len(ledgers.Items)
	store := ledger.Store{Client: c, Reader: c, Namespace: namespace}
	bl := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ledger.BlocklistName}, bl); err != nil {
		return d, err
	}
	raw, err := bl.Marshal()
	if err != nil {
		return d, err
	}
	d.blocklistKeys, d.blocklistBytes, d.blocklistStoredBytes = len(bl.Data), ledger.BlocklistBytes(bl.Data), len(raw)
	revoked, err := store.Revoked(ctx, time.Now())
	if err != nil {
		return d, err
	}
	d.revokedCerts = len(revoked)
	return d, nil
}
