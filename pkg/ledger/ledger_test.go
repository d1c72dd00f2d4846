package ledger_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

func issue(t testing.TB, ca *pki.KeyPair, cn string, validity time.Duration, now time.Time) *x509.Certificate {
	t.Helper()
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: cn}, validity, now)
	if err != nil {
		t.Fatal(err)
	}
	return kp.Cert
}

func newStore(t *testing.T, env *testenv.Env, ns string) ledger.Store {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ledger.Store{Client: env.Client, Reader: env.Client, Namespace: ns}
}

func TestLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an API server")
	}
	env := testenv.StartForTest(t, testenv.Options{})
	ctx := context.Background()
	now := time.Now()
	ca, err := pki.NewCA("ledger-test", 48*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	owner := ledger.Owner{Namespace: "gitops", Name: "fleet"}

	t.Run("cap of unexpired certificates per cluster", func(t *testing.T) {
		s := newStore(t, env, "cap")
		for i := range 3 {
			if err := s.Record(ctx, "c1", owner, issue(t, ca, "c1", time.Hour, now), 3, now); err != nil {
				t.Fatalf("certificate %d: %v", i, err)
			}
		}
		err := s.Record(ctx, "c1", owner, issue(t, ca, "c1", time.Hour, now), 3, now)
		if !errors.Is(err, ledger.ErrTooManyCertificates) {
			t.Fatalf("fourth certificate: %v, want ErrTooManyCertificates", err)
		}
		// Expired ones do not count.
		if err := s.Record(ctx, "c1", owner, issue(t, ca, "c1", time.Hour, now), 3, now.Add(2*time.Hour)); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
	})

	t.Run("revoke, keep a person's keys, prune, undo", func(t *testing.T) {
		s := newStore(t, env, "revoke")
		const manual = "00000000000000000000000000000000000000000000000000000000000000AA"
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: ledger.BlocklistName},
			Data: map[string]string{manual: ""}}); err != nil {
			t.Fatal(err)
		}
		short, long := issue(t, ca, "c1", time.Hour, now), issue(t, ca, "c1", 3*time.Hour, now)
		other := issue(t, ca, "c2", 3*time.Hour, now)
		for _, c := range []*x509.Certificate{short, long} {
			if err := s.Record(ctx, "c1", owner, c, 0, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Record(ctx, "c2", owner, other, 0, now); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Revoke(ctx, "c1", ledger.CauseDeparted, nil, now); err != nil || n != 2 {
			t.Fatalf("Revoke = %d, %v", n, err)
		}
		if n, err := s.Revoke(ctx, "c2", ledger.CauseRevoked, nil, now); err != nil || n != 1 {
			t.Fatalf("Revoke = %d, %v", n, err)
		}
		bl, _ := s.Blocklist(ctx)
		for _, c := range []*x509.Certificate{short, long, other} {
			if _, ok := bl[pki.Fingerprint(c)]; !ok {
				t.Errorf("%s not blocked", pki.Fingerprint(c))
			}
		}
		if cm, _, _ := s.Read(ctx, "c1", now); cm != nil {
			t.Error("c1's ledger survived its revocation")
		}
		// Prune after the short one expired: it goes, the long one and the person's key stay.
		if err := s.Prune(ctx, now.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		bl, _ = s.Blocklist(ctx)
		if _, ok := bl[pki.Fingerprint(short)]; ok {
			t.Error("an expired certificate is still blocked")
		}
		if _, ok := bl[pki.Fingerprint(long)]; !ok {
			t.Error("an unexpired certificate was unblocked")
		}
		if _, ok := bl[manual]; !ok {
			t.Error("a key a person added was removed")
		}
	})

	t.Run("a malformed revocation record keeps its key blocked", func(t *testing.T) {
		s := newStore(t, env, "malformed")
		c := issue(t, ca, "c1", time.Hour, now)
		if err := s.Record(ctx, "c1", owner, c, 0, now); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Revoke(ctx, "c1", ledger.CauseRevoked, nil, now); err != nil || n != 1 {
			t.Fatalf("Revoke = %d, %v", n, err)
		}
		fp := pki.Fingerprint(c)
		shard := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ledger.ShardName(fp)}, shard); err != nil {
			t.Fatal(err)
		}
		shard.Data[fp] = "not a time"
		if err := env.Client.Update(ctx, shard); err != nil {
			t.Fatal(err)
		}
		if err := s.Prune(ctx, now.Add(10*time.Hour)); err != nil {
			t.Fatal(err)
		}
		bl, _ := s.Blocklist(ctx)
		if _, ok := bl[fp]; !ok {
			t.Error("a key whose revocation record does not parse was unblocked as if it had expired")
		}
	})

	t.Run("records concurrent with a revocation are never lost", func(t *testing.T) {
		s := newStore(t, env, "race")
		var wg sync.WaitGroup
		certs := make([]*x509.Certificate, 20)
		for i := range certs {
			certs[i] = issue(t, ca, "c1", time.Hour, now)
		}
		errs := make(chan error, len(certs))
		for i := range certs {
			wg.Add(1)
			go func(c *x509.Certificate) {
				defer wg.Done()
				errs <- s.Record(ctx, "c1", owner, c, 0, now)
			}(certs[i])
		}
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A revocation that keeps losing the race returns an error and is retried
				// by the next pass; it must never lose a record.
				_, _ = s.Revoke(ctx, "c1", ledger.CauseDeparted, nil, now)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		// Every certificate is either blocked or still in a ledger a later pass revokes.
		bl, _ := s.Blocklist(ctx)
		_, left, err := s.Read(ctx, "c1", now)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range certs {
			fp := pki.Fingerprint(c)
			if _, blocked := bl[fp]; !blocked {
				if _, recorded := left[fp]; !recorded {
					t.Errorf("certificate %s is neither blocked nor recorded", fp)
				}
			}
		}
	})

	// fill gives each of n clusters perCluster unexpired certificates in its ledger, 16 clusters
	// at a time (the ledgers are independent objects).
	fill := func(t *testing.T, s ledger.Store, prefix string, n, perCluster int) []string {
		t.Helper()
		clusters := make([]string, n)
		for c := range n {
			clusters[c] = fmt.Sprintf("%s-%d", prefix, c)
		}
		var mu sync.Mutex
		var errs []error
		parallel.Each(16, clusters, func(name string) {
			entries := ledger.Entries{}
			for i := range perCluster {
				// Spread over the record's shards as real fingerprints are.
				entries[fmt.Sprintf("%X", sha256.Sum256(fmt.Appendf(nil, "%s/%d", name, i)))] = now.Add(time.Hour).Truncate(time.Second)
			}
			if err := s.Merge(ctx, name, owner, entries, now); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return clusters
	}
	// storedBytes is the blocklist as etcd stores it, managed fields included.
	storedBytes := func(t *testing.T, s ledger.Store) (int, int) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ledger.BlocklistName}, cm); err != nil {
			t.Fatal(err)
		}
		raw, err := cm.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return len(raw), len(cm.Data)
	}
	const etcdLimit = 1536 * 1024

	t.Run("a key costs its data, not its data twice", func(t *testing.T) {
		s := newStore(t, env, "managed-fields")
		for _, c := range fill(t, s, "mf", 20, 50) {
			if _, err := s.Revoke(ctx, c, ledger.CauseDeparted, nil, now); err != nil {
				t.Fatal(err)
			}
		}
		size, keys := storedBytes(t, s)
		if perKey := size / keys; perKey > 90 {
			t.Errorf("the blocklist stores %d bytes for %d keys, %d a key: its managed fields grow with it", size, keys, perKey)
		}
	})

	t.Run("one live read of the blocklist per batch, and a key removed after it is still blocked", func(t *testing.T) {
		s := newStore(t, env, "one-read")
		cert, again := issue(t, ca, "c1", time.Hour, now), issue(t, ca, "c2", time.Hour, now)
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: ledger.BlocklistName},
			Data: map[string]string{strings.Repeat("AB", 32): ""}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, "c1", owner, cert, 0, now); err != nil {
			t.Fatal(err)
		}
		reader := &blocklistReads{Reader: s.Reader}
		s.Reader = reader
		if _, err := s.RevokeClusters(ctx, []string{"c1"}, ledger.CauseDeparted, now); err != nil {
			t.Fatal(err)
		}
		if reader.n != 1 {
			t.Errorf("blocking one batch read the blocklist %d times, want 1", reader.n)
		}

		// c2's key is already on the blocklist when the batch reads it, and a person removes
		// it before the batch writes: the block finds nothing to add in what it read, and
		// must confirm that on a live read rather than leave the key off.
		fp := pki.Fingerprint(again)
		if err := s.Record(ctx, "c2", owner, again, 0, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reassert(ctx, []string{fp}); err != nil {
			t.Fatal(err)
		}
		reader.n, reader.after = 0, func() {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ledger.BlocklistName}, cm); err != nil {
				t.Error(err)
				return
			}
			delete(cm.Data, fp)
			if err := env.Client.Update(ctx, cm); err != nil {
				t.Error(err)
			}
		}
		if _, err := s.RevokeClusters(ctx, []string{"c2"}, ledger.CauseDeparted, now); err != nil {
			t.Fatal(err)
		}
		bl, err := s.Blocklist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := bl[fp]; !ok {
			t.Errorf("a key removed after the batch read the blocklist is not blocked (%d reads)", reader.n)
		}

		// The blocklist is deleted after the batch read it: the block creates it again.
		third := issue(t, ca, "c3", time.Hour, now)
		if err := s.Record(ctx, "c3", owner, third, 0, now); err != nil {
			t.Fatal(err)
		}
		reader.after = func() {
			if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: ledger.BlocklistName}}); err != nil {
				t.Error(err)
			}
		}
		if _, err := s.RevokeClusters(ctx, []string{"c3"}, ledger.CauseDeparted, now); err != nil {
			t.Fatalf("blocking after the blocklist was deleted: %v", err)
		}
		if bl, err = s.Blocklist(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := bl[pki.Fingerprint(third)]; !ok {
			t.Error("a blocklist deleted after the batch read it was not created again with the batch's key")
		}
	})

	t.Run("a CLI-like writer at any step of a revocation: both keys stay", func(t *testing.T) {
		// argocd-agentctl's add: three steps (read the keys, read the ConfigMap, write the
		// whole data from the first read, conditional on the second). Every split of them
		// around the revocation's read and write of the blocklist: before it, between its read
		// and its write, after it; with the blocklist made by the revocation, or by a person
		// before it.
		refused, dropped := 0, 0
		for _, exists := range []bool{false, true} {
			for before := 0; before <= 3; before++ {
				for between := 0; before+between <= 3; between++ {
					name := fmt.Sprintf("cli-%v-%d-%d", exists, before, between)
					s := newStore(t, env, name)
					if exists {
						if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: ledger.BlocklistName},
							Data: map[string]string{strings.Repeat("CC", 32): ""}}); err != nil {
							t.Fatal(err)
						}
					}
					cert := issue(t, ca, "c1", time.Hour, now)
					if err := s.Record(ctx, "c1", owner, cert, 0, now); err != nil {
						t.Fatal(err)
					}
					const person = "00000000000000000000000000000000000000000000000000000000000000BB"
					cli := &cliAdd{c: env.Client, ns: s.Namespace, fp: person}
					for range before {
						cli.step(ctx)
					}
					reader := &blocklistReads{Reader: s.Reader, after: func() {
						for range between {
							cli.step(ctx)
						}
					}}
					s.Reader = reader
					if _, err := s.RevokeClusters(ctx, []string{"c1"}, ledger.CauseRevoked, now); err != nil {
						t.Fatalf("%s: the revocation: %v", name, err)
					}
					for !cli.done() {
						cli.step(ctx)
					}
					if cli.err != nil {
						// Refused on a conflict: the person runs it again.
						refused++
						cli = &cliAdd{c: env.Client, ns: s.Namespace, fp: person}
						for !cli.done() {
							cli.step(ctx)
						}
						if cli.err != nil {
							t.Fatalf("%s: the person's second run: %v", name, cli.err)
						}
					}
					bl, _ := s.Blocklist(ctx)
					if _, ok := bl[person]; !ok {
						t.Errorf("%s: the manager's write dropped the person's key", name)
					}
					fp := pki.Fingerprint(cert)
					if _, ok := bl[fp]; !ok {
						// Only the CLI's write can drop it, when its two reads straddle the
						// manager's write; the record still holds it, and putting it back keeps
						// the person's key.
						dropped++
						if n, err := s.Reassert(ctx, []string{fp}); err != nil || n != 1 {
							t.Fatalf("%s: Reassert = %d, %v", name, n, err)
						}
						bl, _ = s.Blocklist(ctx)
						if _, ok := bl[person]; !ok {
							t.Errorf("%s: putting the manager's key back dropped the person's", name)
						}
					}
					if _, ok := bl[strings.Repeat("CC", 32)]; exists && !ok {
						t.Errorf("%s: a key listed before both writers was dropped", name)
					}
				}
			}
		}
		// Both of the CLI's outcomes that involve the manager were met.
		if refused == 0 || dropped == 0 {
			t.Errorf("the CLI was refused %d time(s) and dropped the manager's key %d time(s); each should happen", refused, dropped)
		}
		t.Logf("20 interleavings: the CLI refused on a conflict %d time(s), the manager's key dropped by the CLI %d time(s)", refused, dropped)
	})

	t.Run("a 5000-cluster departure in one pass fits the blocklist", func(t *testing.T) {
		// Three unexpired certificates a cluster: the agent's, the one it renews to, and the
		// resource proxy's.
		s := newStore(t, env, "departure")
		clusters := fill(t, s, "d", 5000, 3)
		blocked, err := s.RevokeClusters(ctx, clusters, ledger.CauseDeparted, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocked) != len(clusters) {
			t.Errorf("%d of %d clusters blocked", len(blocked), len(clusters))
		}
		size, keys := storedBytes(t, s)
		t.Logf("5000 clusters: %d keys, %d bytes stored (etcd's limit %d)", keys, size, etcdLimit)
		if keys != 15000 || size > etcdLimit {
			t.Errorf("blocklist holds %d keys in %d bytes; want 15000 in at most %d", keys, size, etcdLimit)
		}
	})

	t.Run("more certificates than the blocklist holds: it stays bounded", func(t *testing.T) {
		// 20,000 keys: more than the budget holds (17,140), and each cluster has more
		// certificates than the departure above, which fits.
		s := newStore(t, env, "bounded")
		clusters := fill(t, s, "b", 2000, 10)
		blocked, err := s.RevokeClusters(ctx, clusters, ledger.CauseDeparted, now)
		if !errors.Is(err, ledger.ErrBlocklistFull) {
			t.Fatalf("revoking 20000 certificates: %v, want ErrBlocklistFull", err)
		}
		size, keys := storedBytes(t, s)
		t.Logf("20000 certificates: %d clusters blocked, %d keys, %d bytes stored (etcd's limit %d)", len(blocked), keys, size, etcdLimit)
		if size > etcdLimit || len(blocked) == 0 {
			t.Errorf("%d clusters blocked, blocklist %d bytes", len(blocked), size)
		}
		// Whatever did not fit keeps its ledger for a later pass.
		for _, c := range clusters {
			cm, _, err := s.Read(ctx, c, now)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := blocked[c]; ok == (cm != nil) {
				t.Fatalf("cluster %s: blocked %v, ledger kept %v", c, ok, cm != nil)
			}
		}
	})
}

// blocklistReads counts live reads of the blocklist and runs after once, after the first.
type blocklistReads struct {
	client.Reader
	n     int
	after func()
}

func (r *blocklistReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if key.Name == ledger.BlocklistName {
		r.n++
		if r.after != nil {
			after := r.after
			r.after = nil
			after()
		}
	}
	return err
}

// cliAdd is `argocd-agentctl blocklist tls add <fp>` of argocd-agent v0.10.0 taken one step at
// a time: read the blocklist's keys; read the ConfigMap again; set its whole data to the keys
// of the first read plus fp, and update it with the second read's resourceVersion (create it
// when the second read found none). A failed step ends the run with err; it is never retried.
type cliAdd struct {
	c     client.Client
	ns    string
	fp    string
	n     int
	keys  map[string]string
	cm    *corev1.ConfigMap
	err   error
	empty bool
}

func (a *cliAdd) done() bool { return a.n == 3 || a.err != nil }

func (a *cliAdd) step(ctx context.Context) {
	if a.done() {
		return
	}
	key := types.NamespacedName{Namespace: a.ns, Name: ledger.BlocklistName}
	a.n++
	switch a.n {
	case 1:
		a.keys = map[string]string{a.fp: ""}
		cm := &corev1.ConfigMap{}
		if err := a.c.Get(ctx, key, cm); err != nil && !apierrors.IsNotFound(err) {
			a.err = err
			return
		}
		for k := range cm.Data {
			a.keys[k] = ""
		}
	case 2:
		a.cm = &corev1.ConfigMap{}
		err := a.c.Get(ctx, key, a.cm)
		a.empty = apierrors.IsNotFound(err)
		if err != nil && !a.empty {
			a.err = err
		}
	case 3:
		if a.empty {
			a.err = a.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: ledger.BlocklistName}, Data: a.keys})
			return
		}
		a.cm.Data = a.keys
		a.err = a.c.Update(ctx, a.cm)
	}
}
